"""The web UI's task page in headless Chromium: a task's stdout and stderr
shown live, read by the browser from the task's agent, equal to what the
task wrote (read back through the agent's files API).

Needs Debian's ``chromium`` and ``playwright-core`` from npm (both installed
by ``scripts/allot-dev test``); skipped with the reason only when they are
missing or Chromium cannot start."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import urllib.request

import pytest

from conftest import Cluster, _binary
from test_ui import CHROMIUM, HERE, PLAYWRIGHT, _get, _wait

LINES = 8


def _read(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


@pytest.fixture
def log_cluster():
    for need, why in ((shutil.which("node"), "node is not installed"),
                      (os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is not installed"),
                      (PLAYWRIGHT.is_dir(), f"playwright-core is not installed at {PLAYWRIGHT}")):
        if not need:
            pytest.skip(why + " (scripts/allot-dev test installs it)")
    if os.geteuid() != 0:
        pytest.skip("the agent needs root")
    work = pathlib.Path(tempfile.mkdtemp(prefix="allot-ui-logs-"))
    work.chmod(0o711)
    c = Cluster(work)
    execute = None
    try:
        c.start_master(0, "--http-listen", "127.0.0.1:0", "--http-port-file", str(work / "http.port"),
                       "--allocation-interval", "0.2")
        c.start_agent("cpus:2;mem:2048", "--http-listen", "127.0.0.1:0")
        http = int(_wait(lambda: (work / "http.port").exists() and (work / "http.port").read_text().strip(),
                         10, "the master's HTTP port"))
        # One line every 0.4 s once the page is open (the driver makes the
        # go file): the page must show them as they come.
        go = work / "go"
        command = (f"while [ ! -e {go} ]; do sleep 0.1; done; "
                   f"for i in $(seq 1 {LINES}); do echo out-$i; echo err-$i >&2; sleep 0.4; done; sleep 60")
        execute = subprocess.Popen([_binary("ALLOT_EXECUTE"), "--master", c.master, "--name", "logs",
                                    "--command", command, "--resources", "cpus:0.5;mem:64"],
                                   stdout=open(work / "execute.log", "w"), stderr=subprocess.STDOUT)
        yield c, f"http://127.0.0.1:{http}"
    finally:
        if execute and execute.poll() is None:
            execute.kill()
            execute.wait()
        c.stop()
        shutil.rmtree(work, ignore_errors=True)


def test_the_task_page_shows_its_output_live(log_cluster):
    cluster, base = log_cluster
    def running(s):
        return next((t for t in s["master"].get("tasks", []) if t["state"] == "TASK_RUNNING"), None)
    task = _wait(lambda: running(_get(base + "/state")), 30, "a RUNNING task in /state")
    agent = next(a for a in _get(base + "/state")["master"]["agents"] if a["id"] == task["agentId"])
    assert agent["httpAddress"], agent
    shots = pathlib.Path(os.environ.get("ALLOT_UI_SHOTS") or tempfile.mkdtemp(prefix="allot-ui-shots-"))
    shots.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(["node", str(HERE / "drive_logs.cjs"), base + "/", task["frameworkId"], task["taskId"],
                          str(LINES), str(shots), str(PLAYWRIGHT), str(cluster.work / "go")],
                         capture_output=True, text=True, timeout=180)
    if run.returncode == 3:
        pytest.skip(run.stderr.strip())
    assert run.returncode == 0, run.stdout + run.stderr
    page = json.loads(run.stdout.strip().splitlines()[-1])
    shown = page["shown"]
    assert page["errors"] == [], page["errors"]
    assert shown["id"] == task["taskId"]
    assert "RUNNING" in shown["info"]
    assert shown["image"] == "the node's filesystem"
    # What the task wrote, through the agent's API.
    q = f"framework={task['frameworkId']}&task={task['taskId']}"
    written_out = _read(f"http://{agent['httpAddress']}/files/read?{q}&stream=stdout")
    written_err = _read(f"http://{agent['httpAddress']}/files/read?{q}&stream=stderr")
    assert written_out == "".join(f"out-{i}\n" for i in range(1, LINES + 1))
    assert shown["stdout"] == written_out
    _wait(lambda: len(written_err) > 0, 1, "stderr")
    assert shown["stderr"] == written_err[:len(shown["stderr"])] and shown["stderr"].startswith("err-1\n")
    # Live: the pane showed some lines before it showed them all.
    assert any(0 < n < LINES for n in page["seen"]), page["seen"]
    assert (shots / "ui-task.png").stat().st_size > 10_000
