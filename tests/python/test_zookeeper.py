"""The Python SDK follows the leader through a real ZooKeeper server."""

import asyncio
import os
import subprocess
import sys
import time

from kazoo.client import KazooClient

import allot
from allot import wire
from allot.zookeeper import ZooKeeperDetector

from conftest import ROOT


def advertise(zk, path, address, master_id):
    """Joins the contender group the way a master does (ha/group.h)."""
    client = KazooClient(hosts=zk.hosts)
    client.start(timeout=10)
    client.ensure_path(path)
    client.create(f"{path}/member_0123456789abcdef_", f"address={address}\nid={master_id}\n".encode(),
                  ephemeral=True, sequence=True)
    return client


def test_detector_reports_the_lowest_member_and_its_successor(zookeeper):
    async def scenario():
        first = advertise(zookeeper, "/allot", "127.0.0.1:1111", "m1")
        second = advertise(zookeeper, "/allot", "127.0.0.1:2222", "m2")
        detector = ZooKeeperDetector(f"zk://{zookeeper.hosts}/allot")
        try:
            leader = await asyncio.wait_for(detector.wait_change(None), 20)
            assert leader.endpoint.port == 1111 and leader.id == "m1" and leader.epoch > 0
            first.stop()
            first.close()  # its ephemeral member goes at once
            successor = await asyncio.wait_for(detector.wait_change(leader), 20)
            assert successor.endpoint.port == 2222 and successor.id == "m2"
            assert successor.epoch > leader.epoch
        finally:
            detector.close()
            second.stop()
            second.close()
    asyncio.run(scenario())


def test_a_master_older_than_the_groups_epoch_is_refused(cluster, zookeeper):
    # The group names the (standalone, epoch 0) master with its member's
    # czxid as epoch: the SDK must refuse it (docs/links.md, fencing).
    member = advertise(zookeeper, "/cluster", cluster.master, "the-master")
    try:
        done = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "hello.py"),
                               "--master", f"zk://{zookeeper.hosts}/cluster", "--timeout", "3"],
                              capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, ALLOT_DEBUG="1"))
        assert done.returncode == 124, done.stdout + done.stderr
        assert "has leader epoch 0, older than" in done.stderr
    finally:
        member.stop()
        member.close()


def test_bad_zookeeper_urls_are_refused():
    import pytest
    from allot.zookeeper import parse_zk_url
    for bad in ("zk://", "zk://127.0.0.1:2181", "http://x/y"):
        with pytest.raises(ValueError):
            parse_zk_url(bad)


def members(zk, path, count, timeout=30.0):
    """Waits until the contender group at `path` has `count` members."""
    client = KazooClient(hosts=zk.hosts)
    client.start(timeout=10)
    try:
        deadline = time.monotonic() + timeout
        while True:
            children = client.get_children(path) if client.exists(path) else []
            if len([c for c in children if c.startswith("member_")]) >= count:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} has {children}, not {count} members")
            time.sleep(0.05)
    finally:
        client.stop()
        client.close()


def test_framework_follows_the_leader_to_a_standby_after_sigkill(zookeeper, tmp_path):
    from conftest import Cluster
    cluster = Cluster(tmp_path)
    zk_url = f"zk://{zookeeper.hosts}/ha-test"
    try:
        # Start the standby only once the first master is in the group, so the
        # master killed below is the leader.
        leader = cluster.start_master(0, "--zk", zk_url, "--zk-session-timeout", "1")
        members(zookeeper, "/ha-test", 1)
        standby = cluster.start_master(0, "--zk", zk_url, "--zk-session-timeout", "1")
        members(zookeeper, "/ha-test", 2)

        class Watcher(allot.Scheduler):
            def __init__(self):
                self.events = []
                self.changed = asyncio.Event()

            def _note(self, *event):
                self.events.append(event)
                self.changed.set()

            def registered(self, driver, framework_id, master_id):
                self._note("registered", framework_id, master_id)

            def reregistered(self, driver, master_id):
                self._note("reregistered", driver.framework_id, master_id)

            def disconnected(self, driver):
                self._note("disconnected")

        async def until(watcher, kind, timeout):
            deadline = asyncio.get_running_loop().time() + timeout
            while not any(e[0] == kind for e in watcher.events):
                watcher.changed.clear()
                await asyncio.wait_for(watcher.changed.wait(),
                                       deadline - asyncio.get_running_loop().time())
            return next(e for e in watcher.events if e[0] == kind)

        async def scenario():
            watcher = Watcher()
            driver = allot.SchedulerDriver(watcher, wire.FrameworkInfo(name="ha-pytest"),
                                           master=zk_url, backoff=allot.Backoff(0.05, 0.5))
            runner = asyncio.ensure_future(driver.run())
            try:
                first = await until(watcher, "registered", 30)
                leader.stop()  # SIGKILL: the standby leads once the session expires
                await until(watcher, "disconnected", 10)
                again = await until(watcher, "reregistered", 30)
                return first, again
            finally:
                driver.stop()
                await asyncio.wait_for(runner, 5)

        first, again = asyncio.run(scenario())
        assert again[1] == first[1]      # the same framework id
        assert again[2] != first[2]      # on another master
        assert standby.proc.poll() is None
    finally:
        cluster.stop()
