"""The Python SDK against a real allot-master and allot-agent."""

import asyncio
import os
import pathlib
import subprocess
import sys

import allot
from allot import wire

from conftest import ROOT

HERE = pathlib.Path(__file__).resolve().parent
TERMINAL = {wire.TASK_FINISHED, wire.TASK_FAILED, wire.TASK_KILLED, wire.TASK_LOST,
            wire.TASK_ERROR}


def hello(cluster, *extra):
    return subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "hello.py"),
                           "--master", cluster.master, "--timeout", "30", *extra],
                          capture_output=True, text=True, timeout=60)


def test_hello_example_exits_with_the_tasks_exit_code(cluster):
    done = hello(cluster)
    assert done.returncode == 0, done.stderr
    assert "TASK_FINISHED" in done.stdout
    failed = hello(cluster, "--command", "exit 7")
    assert failed.returncode == 7, failed.stderr
    assert "TASK_FAILED" in failed.stdout


class Recorder(allot.Scheduler):
    """Launches `tasks` (builders taking an offer) and records every update."""

    def __init__(self, tasks, on_update=None):
        self.pending = list(tasks)
        self.updates = []
        self.registrations = []
        self.on_update = on_update
        self.done = asyncio.Event()

    def registered(self, driver, framework_id, master_id):
        self.registrations.append(("registered", framework_id))

    def reregistered(self, driver, master_id):
        self.registrations.append(("reregistered", driver.framework_id))

    def resource_offers(self, driver, offers):
        for offer in offers:
            if not self.pending:
                driver.decline_offer(offer.offer_id)
                continue
            tasks = [build(offer) for build in self.pending]
            self.pending = []
            driver.accept_offer([offer.offer_id], tasks)

    def status_update(self, driver, status):
        self.updates.append(status)
        driver.acknowledge(status)
        if self.on_update:
            self.on_update(driver, status)
        if all(any(u.task_id == t and u.state in TERMINAL for u in self.updates)
               for t in {u.task_id for u in self.updates}) and not self.pending:
            self.done.set()


def command_task(task_id, shell, resources="cpus:0.1;mem:32"):
    def build(offer):
        t = wire.TaskInfo(task_id=task_id, name=task_id, agent_id=offer.agent_id)
        t.resources.extend(allot.parse_resources(resources))
        t.command.shell = shell
        return t
    return build


def python_executor_task(task_id, data, executor_id="py-echo"):
    def build(offer):
        t = wire.TaskInfo(task_id=task_id, name=task_id, agent_id=offer.agent_id, data=data)
        t.resources.extend(allot.parse_resources("cpus:0.1;mem:32"))
        t.executor.executor_id = executor_id
        t.executor.command.argv.extend([sys.executable, str(HERE / "echo_executor.py")])
        # The executor may run as an unprivileged user: it reads the wire
        # module this process generated instead of writing its own.
        cache = os.environ.get("ALLOT_PYTHON_CACHE", "")
        if cache:
            t.executor.command.environment["ALLOT_PYTHON_CACHE"] = cache
        t.executor.resources.extend(allot.parse_resources("cpus:0.1;mem:64"))
        return t
    return build


async def run_framework(cluster, scheduler, timeout=30):
    driver = allot.SchedulerDriver(scheduler, wire.FrameworkInfo(name="pytest"),
                                   master=cluster.master)
    runner = asyncio.ensure_future(driver.run())
    try:
        await asyncio.wait_for(scheduler.done.wait(), timeout)
    finally:
        driver.stop()
        await asyncio.wait_for(runner, 5)
    return driver


def test_python_executor_runs_tasks_and_updates_are_acknowledged(cluster):
    scheduler = Recorder([python_executor_task("a", b"0"), python_executor_task("b", b"0.2")])
    asyncio.run(run_framework(cluster, scheduler))
    final = {u.task_id: u for u in scheduler.updates if u.state in TERMINAL}
    assert final["a"].state == wire.TASK_FINISHED and final["a"].message == "echo 0"
    assert final["b"].state == wire.TASK_FINISHED and final["b"].message == "echo 0.2"
    assert all(u.update_id for u in scheduler.updates if u.state != wire.TASK_STAGING)


def test_kill_task_ends_a_running_task_as_killed(cluster):
    def kill_when_running(driver, status):
        if status.state == wire.TASK_RUNNING:
            driver.kill_task(status.task_id, grace_s=1)
    scheduler = Recorder([command_task("sleeper", "sleep 60")], on_update=kill_when_running)
    asyncio.run(run_framework(cluster, scheduler))
    assert scheduler.updates[-1].state == wire.TASK_KILLED


def test_reconcile_returns_the_state_of_running_and_unknown_tasks(cluster):
    async def scenario():
        running = asyncio.Event()
        scheduler = Recorder([command_task("sleeper", "sleep 60")],
                             on_update=lambda d, s: s.state == wire.TASK_RUNNING and running.set())
        driver = allot.SchedulerDriver(scheduler, wire.FrameworkInfo(name="pytest"),
                                       master=cluster.master)
        runner = asyncio.ensure_future(driver.run())
        await asyncio.wait_for(running.wait(), 30)
        scheduler.updates.clear()
        driver.reconcile([wire.TaskRef(task_id="sleeper"), wire.TaskRef(task_id="nope")])
        for _ in range(200):
            if {u.task_id for u in scheduler.updates} >= {"sleeper", "nope"}:
                break
            await asyncio.sleep(0.05)
        states = {u.task_id: u for u in scheduler.updates}
        driver.stop()  # unregisters: the master kills the sleeper
        await asyncio.wait_for(runner, 5)
        return states
    states = asyncio.run(scenario())
    assert states["sleeper"].state == wire.TASK_RUNNING
    assert states["nope"].state == wire.TASK_LOST
    assert states["nope"].reason == wire.REASON_RECONCILIATION


def test_driver_reregisters_with_a_restarted_master(cluster):
    async def scenario():
        scheduler = Recorder([])
        driver = allot.SchedulerDriver(scheduler, wire.FrameworkInfo(name="pytest"),
                                       master=cluster.master,
                                       backoff=allot.Backoff(0.05, 0.5))
        runner = asyncio.ensure_future(driver.run())
        for _ in range(200):
            if driver.registered:
                break
            await asyncio.sleep(0.02)
        first_id = driver.framework_id
        port = cluster.port
        cluster.master_daemon.stop()
        await asyncio.get_running_loop().run_in_executor(None, cluster.start_master, port)
        for _ in range(400):
            if ("reregistered", first_id) in scheduler.registrations:
                break
            await asyncio.sleep(0.025)
        driver.stop()
        await asyncio.wait_for(runner, 5)
        return first_id, scheduler.registrations
    first_id, registrations = asyncio.run(scenario())
    assert first_id
    assert registrations[0] == ("registered", first_id)
    assert ("reregistered", first_id) in registrations


SIGNALLED_FRAMEWORK = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
import allot
from allot import wire

class Sleeper(allot.Scheduler):
    launched = False
    def resource_offers(self, driver, offers):
        for offer in offers:
            if self.launched:
                driver.decline_offer(offer.offer_id)
                continue
            t = wire.TaskInfo(task_id="py-sleeper", name="py-sleeper", agent_id=offer.agent_id)
            t.resources.extend(allot.parse_resources("cpus:0.1;mem:16"))
            t.command.shell = "sleep 600"
            driver.accept_offer([offer.offer_id], [t])
            self.launched = True
    def status_update(self, driver, status):
        driver.acknowledge(status)
        print(wire.TaskState.Name(status.state), flush=True)

driver = allot.SchedulerDriver(Sleeper(), wire.FrameworkInfo(name="signalled", failover_timeout_s=5),
                               master=sys.argv[2], backoff=allot.Backoff(0.05, 0.5))
asyncio.run(driver.run(stop_on_signals=True))
print("returned", flush=True)
"""


def signalled_framework(cluster):
    """A framework process whose task runs, then its master killed."""
    proc = subprocess.Popen([sys.executable, "-c", SIGNALLED_FRAMEWORK, str(ROOT / "sdk" / "python"),
                             cluster.master], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    while True:
        line = proc.stdout.readline()
        assert line, "the framework ended before its task ran: " + proc.stderr.read()
        if line.strip() == "TASK_RUNNING":
            break
    cluster.master_daemon.stop()
    return proc


def test_sigterm_with_no_master_stops_the_driver_naming_the_running_task(cluster):
    import signal
    import time
    proc = signalled_framework(cluster)
    time.sleep(0.3)  # the driver sees the link drop
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)  # run() returns within about a second
    assert proc.returncode == 0, err
    assert "returned" in out
    assert "these tasks may still run: py-sleeper" in err

def test_health_check_set_from_python_reports_healthy_then_kills(cluster):
    # The check passes until the task removes its flag file, then fails
    # twice and the executor kills the task.
    def build(offer):
        t = command_task("checked", "touch up; sleep 1.5; rm up; sleep 60")(offer)
        t.health_check.type = wire.HealthCheck.COMMAND
        t.health_check.command.shell = "test -e up"
        t.health_check.delay_s = 0
        t.health_check.interval_s = 0.2
        t.health_check.grace_period_s = 1
        t.health_check.consecutive_failures = 2
        return t
    scheduler = Recorder([build])
    asyncio.run(run_framework(cluster, scheduler))
    verdicts = [u.healthy for u in scheduler.updates
                if u.state == wire.TASK_RUNNING and u.HasField("healthy")]
    assert verdicts[:1] == [True], scheduler.updates
    final = [u for u in scheduler.updates if u.state in TERMINAL][-1]
    assert final.state == wire.TASK_KILLED
    assert final.reason == wire.REASON_HEALTH_CHECK_FAILED
    assert final.HasField("healthy") and not final.healthy


def test_health_check_limits_are_checked_in_python():
    e = wire.Envelope()
    t = e.launch_task.task
    t.task_id = "t"
    t.command.shell = "true"
    t.health_check.type = wire.HealthCheck.HTTP
    t.health_check.port = 8080
    t.health_check.path = "/ok"
    assert allot.validate.from_agent_to_executor(e) is None
    t.health_check.path = "/a b"
    assert "LaunchTask.task.health_check.path" in allot.validate.from_agent_to_executor(e)
    t.health_check.path = "/ok"
    t.health_check.interval_s = 0.01
    assert "health_check.interval_s" in allot.validate.from_agent_to_executor(e)
