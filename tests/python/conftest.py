"""Fixtures: a real allot-master and allot-agent on loopback (from the build
dir meson passes in ALLOT_MASTER / ALLOT_AGENT), killed on teardown."""

from __future__ import annotations

import os
import pathlib
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Iterator, List, Optional

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# ALLOT_SDK_INSTALLED=1 (the pytest_installed test): the SDK as pip installed
# it into this interpreter's environment; else the source tree's sdk/python.
if os.environ.get("ALLOT_SDK_INSTALLED"):
    import allot
    if pathlib.Path(allot.__file__).resolve().is_relative_to(ROOT / "sdk"):
        raise RuntimeError(f"allot imported from the source tree ({allot.__file__}), not installed")
else:
    sys.path.insert(0, str(ROOT / "sdk" / "python"))


def _binary(name: str) -> str:
    path = os.environ.get(name)
    if not path or not os.access(path, os.X_OK):
        pytest.skip(f"{name} is not set to a built binary (run through meson test)")
    return path


class Daemon:
    def __init__(self, args: List[str], log: pathlib.Path) -> None:
        self.log = log
        self.proc = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def stop(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=10)


class Cluster:
    """A master and an agent; ``master`` is the address to give frameworks."""

    def __init__(self, work: pathlib.Path) -> None:
        self.work = work
        self.daemons: List[Daemon] = []
        self.master_daemon: Optional[Daemon] = None
        self.port = 0

    @property
    def master(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_master(self, port: int = 0, *extra: str) -> Daemon:
        port_file = self.work / f"master-{len(self.daemons)}.port"
        self.master_daemon = Daemon([_binary("ALLOT_MASTER"), "--listen", f"127.0.0.1:{port}",
                                     "--port-file", str(port_file), *extra],
                                    self.work / f"master-{len(self.daemons)}.log")
        self.daemons.append(self.master_daemon)
        deadline = time.monotonic() + 10
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.master_daemon.proc.poll() is not None:
                raise RuntimeError("master did not start: " + self.master_daemon.log.read_text())
            time.sleep(0.02)
        self.port = int(port_file.read_text())
        return self.master_daemon

    @property
    def cgroups_root(self) -> str:
        return "allot-pytest-" + self.work.name

    def start_agent(self, resources: str = "cpus:2;mem:2048;ports:[31000-31100]",
                    *extra: str) -> None:
        self.daemons.append(Daemon([_binary("ALLOT_AGENT"), "--master", self.master,
                                    "--work-dir", str(self.work / "agent"),
                                    "--cgroups-root", self.cgroups_root,
                                    "--resources", resources, *extra],
                                   self.work / "agent.log"))

    def stop(self) -> None:
        for daemon in reversed(self.daemons):
            daemon.stop()
        # Executors and tasks keep running across agent restarts by design:
        # end everything in the agent's cgroups, and anything working in its
        # work dir, then remove the cgroups.
        for _ in range(50):
            if not self._kill_leftovers():
                break
            time.sleep(0.05)

    def _kill_leftovers(self) -> bool:
        """One sweep; True while something was left to kill or remove."""
        left = False
        for pid in _pids_in_cgroups(self.cgroups_root) | _pids_working_in(self.work):
            left = True
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for hierarchy in pathlib.Path("/sys/fs/cgroup").iterdir():
            top = hierarchy / self.cgroups_root
            if not top.is_dir():
                continue
            for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                left |= _rmdir(d)
            left |= _rmdir(top)
        return left


def _rmdir(path: pathlib.Path) -> bool:
    try:
        path.rmdir()
        return False
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _pids_in_cgroups(root: str) -> set:
    pids = set()
    for procs in pathlib.Path("/sys/fs/cgroup").glob(f"*/{root}/**/cgroup.procs"):
        try:
            pids.update(int(line) for line in procs.read_text().split())
        except OSError:
            pass
    return pids


def _pids_working_in(directory: pathlib.Path) -> set:
    pids = set()
    prefix = str(directory.resolve())
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if os.readlink(proc / "cwd").startswith(prefix):
                pids.add(int(proc.name))
        except OSError:
            pass
    return pids


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    if os.geteuid() != 0:
        pytest.skip("the agent needs root")
    work = pathlib.Path(tempfile.mkdtemp(prefix="allot-pytest-"))
    work.chmod(0o711)  # executors run as the agent's --default-user (nobody)
    c = Cluster(work)
    try:
        c.start_master()
        c.start_agent()
        yield c
    finally:
        c.stop()
        shutil.rmtree(work, ignore_errors=True)


ZK_JARS = ["/usr/share/java/zookeeper.jar", "/usr/share/java/zookeeper-jute.jar",
           "/usr/share/java/slf4j-api.jar", "/usr/share/java/netty.jar"]


# Ports for servers that cannot bind port 0 and report it (ZooKeeper's Java
# server): below the kernel's ephemeral range, so no bind(0) or outgoing
# connection of any process takes one (tests/common/test_ports.h does the
# same for the C++ tests).
TEST_PORT_LOW, TEST_PORT_HIGH = 20000, 30000


def unused_test_port() -> int:
    """A port in [TEST_PORT_LOW, TEST_PORT_HIGH) that nothing holds now."""
    try:
        low = int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(TEST_PORT_LOW, min(TEST_PORT_HIGH, low))
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("0.0.0.0", port))  # no SO_REUSEADDR: fails while anything holds it
            except OSError:
                continue
            return port
    raise RuntimeError("no free test port")


class ZooKeeper:
    """A throwaway standalone ZooKeeper server on a loopback test port."""

    START_ATTEMPTS = 5

    def __init__(self, work: pathlib.Path) -> None:
        java = shutil.which("java")
        if java is None or not pathlib.Path(ZK_JARS[0]).exists():
            pytest.skip("ZooKeeper is not installed (scripts/allot-dev installs zookeeper)")
        self.data = work / "zk-data"
        jars = ":".join(str(p) for p in pathlib.Path("/usr/share/java").glob("*.jar")
                        if p.name.startswith(("zookeeper", "slf4j-api", "netty", "jline",
                                              "commons-", "metrics-core", "snappy")))
        # The port was free when picked; if another test takes it before
        # ZooKeeper binds it, ZooKeeper exits and starts again on a fresh one.
        for attempt in range(self.START_ATTEMPTS):
            shutil.rmtree(self.data, ignore_errors=True)
            self.data.mkdir()
            self.port = unused_test_port()
            cfg = work / "zoo.cfg"
            cfg.write_text(f"tickTime=200\ndataDir={self.data}\nclientPort={self.port}\n"
                           "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                           "4lw.commands.whitelist=srvr,conf\n")
            self.daemon = Daemon([java, "-cp", jars, "-Xmx256m",
                                  "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
                                 work / f"zookeeper-{attempt}.log")
            deadline = time.monotonic() + 30
            while not self._serving():
                if self.daemon.proc.poll() is not None:
                    break
                if time.monotonic() > deadline:
                    self.daemon.stop()
                    raise RuntimeError("ZooKeeper did not start: " + self.daemon.log.read_text()[-2000:])
                time.sleep(0.1)
            else:
                return
        raise RuntimeError("ZooKeeper exited at every start: " + self.daemon.log.read_text()[-2000:])

    def _ask(self, command: bytes) -> bytes:
        try:
            with socket.create_connection(("127.0.0.1", self.port), 0.5) as s:
                s.sendall(command)
                reply = b""
                while chunk := s.recv(4096):
                    reply += chunk
                return reply
        except OSError:
            return b""

    def _serving(self) -> bool:
        """Serving, and it is ours (not another test's on a port taken meanwhile)."""
        return (b"Mode:" in self._ask(b"srvr")
                and f"dataDir={self.data}".encode() in self._ask(b"conf"))

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.daemon.stop()


@pytest.fixture
def zookeeper() -> Iterator[ZooKeeper]:
    work = pathlib.Path(tempfile.mkdtemp(prefix="allot-pytest-zk-"))
    work.chmod(0o711)  # executors run as the agent's --default-user (nobody)
    zk = None
    try:
        zk = ZooKeeper(work)
        yield zk
    finally:
        if zk:
            zk.stop()
        shutil.rmtree(work, ignore_errors=True)
