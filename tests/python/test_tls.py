"""The Python SDK over mutual TLS, with certificates from scripts/allot-certs."""

import asyncio
import subprocess

import pytest

import allot
from allot import wire

from conftest import ROOT, Cluster


@pytest.fixture
def certs(tmp_path):
    d = tmp_path / "certs"
    subprocess.run([str(ROOT / "scripts" / "allot-certs"), str(d)], check=True,
                   capture_output=True)
    other = tmp_path / "other-ca"
    subprocess.run([str(ROOT / "scripts" / "allot-certs"), str(other)], check=True,
                   capture_output=True)
    return d, other


@pytest.fixture
def tls_master(tmp_path, certs):
    d, _ = certs
    cluster = Cluster(tmp_path)
    cluster.start_master(0, "--tls-cert", str(d / "master.crt"), "--tls-key",
                         str(d / "master.key"), "--tls-ca", str(d / "ca.crt"))
    yield cluster
    cluster.stop()


class Registers(allot.Scheduler):
    def __init__(self):
        self.framework_id = None
        self.done = asyncio.Event()

    def registered(self, driver, framework_id, master_id):
        self.framework_id = framework_id
        self.done.set()


def register(master, tls, timeout=5.0):
    async def scenario():
        s = Registers()
        driver = allot.SchedulerDriver(s, wire.FrameworkInfo(name="tls-pytest"), master=master,
                                       tls=tls)
        runner = asyncio.ensure_future(driver.run())
        try:
            await asyncio.wait_for(s.done.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        driver.stop()
        await asyncio.wait_for(runner, 5)
        return s.framework_id
    return asyncio.run(scenario())


def test_a_framework_certificate_registers(tls_master, certs):
    d, _ = certs
    tls = allot.TlsFiles(str(d / "framework.crt"), str(d / "framework.key"), str(d / "ca.crt"))
    assert register(tls_master.master, tls)


def test_no_certificate_another_ca_or_the_wrong_role_do_not_register(tls_master, certs):
    d, other = certs
    assert register(tls_master.master, None, timeout=2) is None
    foreign = allot.TlsFiles(str(other / "framework.crt"), str(other / "framework.key"),
                             str(d / "ca.crt"))
    assert register(tls_master.master, foreign, timeout=2) is None
    agent_cert = allot.TlsFiles(str(d / "agent.crt"), str(d / "agent.key"), str(d / "ca.crt"))
    assert register(tls_master.master, agent_cert, timeout=2) is None
