"""The example frameworks (examples/) against a real master and agent."""

import os
import pathlib
import socket
import subprocess
import sys
import tempfile

import pytest


def example(name):
    directory = os.environ.get("ALLOT_EXAMPLES")
    path = pathlib.Path(directory or "") / name
    if not directory or not os.access(path, os.X_OK):
        pytest.skip(f"{name} is not built (ALLOT_EXAMPLES unset; run through meson test)")
    return str(path)


def run(cluster, name, *args, timeout=60):
    return subprocess.run([example(name), "--master", cluster.master, *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def shared_dir():
    # Tasks may run as an unprivileged user: a directory everyone can write.
    d = tempfile.mkdtemp(prefix="allot-examples-")
    os.chmod(d, 0o1777)
    yield pathlib.Path(d)
    subprocess.run(["rm", "-rf", d], check=False)


def test_batch_runs_every_task_and_retries_a_failure(cluster, shared_dir):
    flag = shared_dir / "flag"
    tasks = shared_dir / "tasks.txt"
    tasks.write_text("# three tasks\ntrue\n\necho hi\n"
                     f"test -f {flag} || {{ touch {flag}; exit 3; }}\n")
    done = run(cluster, "allot-batch", "--tasks", str(tasks), "--retries", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "retrying" in done.stdout
    assert "progress: 3/3 finished, 0 failed" in done.stdout


def test_batch_gives_up_after_its_retries(cluster, shared_dir):
    tasks = shared_dir / "tasks.txt"
    tasks.write_text("exit 5\ntrue\n")
    done = run(cluster, "allot-batch", "--tasks", str(tasks), "--retries", "1")
    assert done.returncode == 1
    assert "gave up after 2 attempts" in done.stdout
    assert "progress: 1/2 finished, 1 failed" in done.stdout


def test_batch_refuses_a_missing_task_file(cluster):
    done = run(cluster, "allot-batch", "--tasks", "/nonexistent/tasks.txt")
    assert done.returncode == 2 and "cannot read" in done.stderr


RANK = r"""
import os, socket, sys, time
rank, ranks = int(os.environ["ALLOT_RANK"]), int(os.environ["ALLOT_RANKS"])
peers = os.environ["ALLOT_PEERS"].split(",")
assert len(peers) == ranks and peers[rank].endswith(":" + os.environ["ALLOT_PORT"])
if rank == 0:
    server = socket.create_server(("0.0.0.0", int(os.environ["ALLOT_PORT"])))
    server.settimeout(20)
    seen = set()
    while len(seen) < ranks - 1:
        conn, _ = server.accept()
        seen.add(conn.recv(16).decode())
    print("rank 0 heard", sorted(seen))
else:
    host, port = peers[0].rsplit(":", 1)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", int(port)), 1).sendall(str(rank).encode())
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit(9)
"""


def test_gang_launches_all_ranks_and_they_reach_each_other(cluster, shared_dir):
    script = shared_dir / "rank.py"
    script.write_text(RANK)
    done = run(cluster, "allot-gang", "--ranks", "3", "--command", f"{sys.executable} {script}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "launched 3 ranks" in done.stdout
    assert done.stdout.count("TASK_FINISHED") == 3


def test_gang_that_does_not_fit_releases_its_offers(cluster):
    # 30 ranks of 0.1 cpus do not fit the agent's 2 cpus.
    done = run(cluster, "allot-gang", "--ranks", "30", "--resources", "cpus:0.1;mem:8",
               "--command", "true", "--hold", "0.5", "--timeout", "2")
    assert done.returncode == 124
    assert "releasing them" in done.stdout
    # Nothing is held any more: a small job runs at once.
    quick = run(cluster, "allot-gang", "--ranks", "2", "--command", "true", "--timeout", "10")
    assert quick.returncode == 0, quick.stdout + quick.stderr


def test_locality_prefers_local_blocks_and_waits_the_delay(cluster, shared_dir):
    here = socket.gethostname()
    blocks = shared_dir / "blocks.txt"
    blocks.write_text("".join(f"b{i} {here},far-{i}\n" for i in range(4))
                      + "b4 far-1,far-2\nb5 far-3\n")
    done = run(cluster, "allot-locality", "--blocks", str(blocks), "--delay", "0.5",
               "--task-seconds", "0", "--resources", "cpus:0.1;mem:16")
    assert done.returncode == 0, done.stdout + done.stderr
    result = dict(kv.split("=") for kv in done.stdout.strip().splitlines()[-1].split()[1:])
    assert result["tasks"] == "6" and result["local"] == "4"
    assert float(result["run_s"]) >= 0.5
