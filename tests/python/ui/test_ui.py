"""The master's web UI in headless Chromium: a live master with an
agent and a running framework; the page must show what ``/state`` says, the
share chart must be drawn, and the agent page must show the executor's
usage. Screenshots go to $ALLOT_UI_SHOTS (docs/results/ui.png is one).

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
import time
import urllib.request

import pytest

from conftest import Cluster, _binary

HERE = pathlib.Path(__file__).resolve().parent
# Where scripts/allot-dev installs it (ALLOT_NPM_DIR, as there).
PLAYWRIGHT = pathlib.Path(os.environ.get("ALLOT_NPM_DIR", pathlib.Path.home() / ".cache/allot/npm")) \
    / "node_modules" / "playwright-core"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def _wait(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


@pytest.fixture
def ui_cluster():
    for need, why in ((shutil.which("node"), "node is not installed"),
                      (os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is not installed"),
                      (PLAYWRIGHT.is_dir(), f"playwright-core is not installed at {PLAYWRIGHT}")):
        if not need:
            pytest.skip(why + " (scripts/allot-dev test installs it)")
    if os.geteuid() != 0:
        pytest.skip("the agent needs root")
    work = pathlib.Path(tempfile.mkdtemp(prefix="allot-ui-"))
    work.chmod(0o711)
    c = Cluster(work)
    execute = None
    try:
        c.start_master(0, "--http-listen", "127.0.0.1:0", "--http-port-file", str(work / "http.port"),
                       "--allocation-interval", "0.2")
        # Resource isolators report each executor's usage (the containment
        # cgroup alone does not).
        c.start_agent("cpus:2;mem:2048", "--usage-interval", "0.5",
                      "--isolation", "cgroups/cpu,cgroups/mem,cgroups/pids")
        http = int(_wait(lambda: (work / "http.port").exists() and (work / "http.port").read_text().strip(),
                         10, "the master's HTTP port"))
        execute = subprocess.Popen([_binary("ALLOT_EXECUTE"), "--master", c.master, "--name", "ui",
                                    "--command", "sleep 120", "--resources", "cpus:0.5;mem:64"],
                                   stdout=open(work / "execute.log", "w"), stderr=subprocess.STDOUT)
        yield c, f"http://127.0.0.1:{http}"
    finally:
        if execute and execute.poll() is None:
            execute.kill()
            execute.wait()
        c.stop()
        shutil.rmtree(work, ignore_errors=True)


def test_the_page_shows_what_state_says(ui_cluster):
    cluster, base = ui_cluster
    def measured(s):  # a RUNNING task, and its executor's usage counts the sleep
        usage = [u for a in s["master"]["agents"] for u in a.get("usage", [])]
        return any(t["state"] == "TASK_RUNNING" for t in s["master"].get("tasks", [])) and \
            any(u["usage"].get("processes", 0) >= 2 for u in usage)
    _wait(lambda: measured(_get(base + "/state")), 30, "a RUNNING task with usage in /state")
    shots = pathlib.Path(os.environ.get("ALLOT_UI_SHOTS") or tempfile.mkdtemp(prefix="allot-ui-shots-"))
    shots.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(["node", str(HERE / "drive.cjs"), base + "/", str(shots), str(PLAYWRIGHT)],
                         capture_output=True, text=True, timeout=180)
    if run.returncode == 3:
        pytest.skip(run.stderr.strip())
    assert run.returncode == 0, run.stdout + run.stderr
    page = json.loads(run.stdout.strip().splitlines()[-1])
    state = _get(base + "/state")["master"]
    agents, frameworks, tasks = state["agents"], state["frameworks"], state.get("tasks", [])

    shown = page["cluster"]
    assert page["errors"] == []
    assert shown["agentCount"] == f"({len(agents)})"
    assert shown["frameworkCount"] == f"({len(frameworks)})"
    assert shown["taskCount"] == f"({len(tasks)})"
    assert {r["data"]["agent"] for r in shown["agents"]} == {a["id"] for a in agents}
    # The shard column: the link shard carrying each agent, "direct" without.
    assert {r["data"]["agent"]: r["cells"][6] for r in shown["agents"]} == \
        {a["id"]: a.get("shard") or "direct" for a in agents}
    assert {r["data"]["framework"]: r["cells"][2] for r in shown["frameworks"]} == \
        {f["id"]: f["name"] for f in frameworks}
    assert {r["data"]["task"]: r["cells"][3] for r in shown["tasks"]} == \
        {t["taskId"]: t["state"].replace("TASK_", "") for t in tasks}
    assert "RUNNING: 1" in shown["states"]
    assert state["masterId"] in shown["summary"]
    assert shown["chartPixels"] > 10, "the share chart has no line"  # 2 polls: a short line

    agent = page["agent"]
    assert agent["id"] == agents[0]["id"]
    assert agents[0]["hostname"] in agent["info"]
    assert {r["data"]["executor"] for r in agent["executors"]} == \
        {u["executorId"] for u in agents[0]["usage"]}
    memory, processes = agent["executors"][0]["cells"][3], agent["executors"][0]["cells"][5]
    assert memory != "0.0 MiB" and int(processes) >= 2, agent["executors"]  # executor + sleep
    assert [r["cells"][0] for r in agent["tasks"]] == [t["taskId"] for t in tasks]
    for name in ("ui.png", "ui-agent.png"):
        assert (shots / name).stat().st_size > 10_000, name
