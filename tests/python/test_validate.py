"""The Python SDK validates what it receives with proto/input_limits.h's limits
(no daemons): each limit is refused with a text naming the field, the drivers
hand the refusal to the ``error`` callback and nothing else sees the message."""

import asyncio
import math
import pathlib
import re

import pytest

import allot
from allot import validate, wire

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _cpp_limits():
    text = (ROOT / "proto" / "input_limits.h").read_text()
    out = {}
    for name, expr in re.findall(r"inline constexpr \w+ (k\w+) = ([^;]+);", text):
        expr = expr.replace("u <<", " <<")
        out[name] = eval(expr, {})  # the header's arithmetic: literals, *, <<
    return out


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name[1:]).upper()


def test_limits_match_the_cpp_header():
    cpp = _cpp_limits()
    checked = 0
    for name, value in cpp.items():
        python = getattr(validate, _snake(name), None)
        if python is None:
            continue
        assert python == value, f"{name}: C++ {value}, Python {python}"
        checked += 1
    assert checked >= 20


def _offers(n: int) -> wire.Envelope:
    e = wire.Envelope()
    for i in range(n):
        o = e.resource_offers.offers.add(offer_id=f"o{i}", agent_id="a")
        o.resources.add(name="cpus", scalar=1)
    return e


def test_valid_messages_pass():
    assert validate.from_master_to_scheduler(_offers(3)) is None
    e = wire.Envelope()
    e.launch_task.task.task_id = "t"
    e.launch_task.task.command.shell = "true"
    assert validate.from_agent_to_executor(e) is None


@pytest.mark.parametrize("build, field", [
    (lambda: _offers(validate.OFFERS_PER_MESSAGE_MAX + 1), "ResourceOffers.offers: 1001 entries"),
    (lambda: _set(_offers(1), lambda e: setattr(e.resource_offers.offers[0], "offer_id", "x" * 257)),
     "ResourceOffers.offers[0].offer_id: 257 bytes"),
    (lambda: _set(_offers(1), lambda e: setattr(e.resource_offers.offers[0].resources[0], "scalar", math.nan)),
     "resources[0].scalar"),
    (lambda: _set(_offers(1), lambda e: [e.resource_offers.offers[0].resources.add(name=f"r{i}")
                                         for i in range(validate.RESOURCES_PER_LIST_MAX)]),
     "ResourceOffers.offers[0].resources: 33 entries"),
    (lambda: _set(_offers(1), lambda e: [e.resource_offers.offers[0].attributes.add(name="a")
                                         for i in range(validate.ATTRIBUTES_MAX + 1)]),
     "ResourceOffers.offers[0].attributes"),
    (lambda: _set(wire.Envelope(), lambda e: setattr(e.status_update.status, "message", "m" * 4097)),
     "StatusUpdate.status.message"),
    (lambda: _set(wire.Envelope(), lambda e: setattr(e.status_update.status, "timestamp_s", math.inf)),
     "StatusUpdate.status.timestamp_s"),
    (lambda: _set(wire.Envelope(), lambda e: setattr(e.framework_registered, "master_id", "m")),
     "FrameworkRegistered.framework_id: empty"),
    (lambda: _set(wire.Envelope(), lambda e: setattr(e.error, "message", "e" * 4097)), "ErrorMessage.message"),
    (lambda: _set(wire.Envelope(), lambda e: e.run_task.task.SetInParent()), "unexpected message from the master"),
])
def test_scheduler_side_limits(build, field):
    refusal = validate.from_master_to_scheduler(build())
    assert refusal is not None and field in refusal, refusal


def _set(e, change):
    change(e)
    return e


def _launch(change) -> wire.Envelope:
    e = wire.Envelope()
    e.launch_task.task.task_id = "t"
    change(e.launch_task.task)
    return e


@pytest.mark.parametrize("build, field", [
    (lambda: _launch(lambda t: setattr(t, "data", b"x" * (validate.TASK_DATA_BYTES_MAX + 1))),
     "LaunchTask.task.data"),
    (lambda: _launch(lambda t: t.command.argv.extend(["a"] * (validate.ARGV_COUNT_MAX + 1))),
     "LaunchTask.task.command.argv"),
    (lambda: _launch(lambda t: t.command.argv.extend(["a" * 65536] * 5)), "argv+environment"),
    (lambda: _launch(lambda t: setattr(t, "kill_grace_s", -1)), "LaunchTask.task.kill_grace_s"),
    (lambda: _launch(lambda t: setattr(t.container, "image", "a" * (validate.IMAGE_REFERENCE_BYTES_MAX + 1))),
     "LaunchTask.task.container.image"),
    (lambda: _launch(lambda t: (setattr(t.container, "image", "busybox"),
                                t.container.volumes.add(source="/data/../etc", container_path="/x"))),
     "LaunchTask.task.container.volumes[0].source: '..'"),
    (lambda: _launch(lambda t: (setattr(t.container, "image", "busybox"),
                                t.container.volumes.add(source="/data", container_path="relative"))),
     "container_path: must be absolute"),
    (lambda: _launch(lambda t: setattr(t, "task_id", "")), "LaunchTask.task.task_id: empty"),
    (lambda: _set(wire.Envelope(), lambda e: setattr(e.kill_task, "task_id", "t" * 257)), "KillTask.task_id"),
    (lambda: _set(wire.Envelope(), lambda e: setattr(e.shutdown_executor, "grace_s", math.nan)),
     "ShutdownExecutor.grace_s"),
    (lambda: _set(wire.Envelope(), lambda e: setattr(e.executor_registered.framework, "weight", math.inf)),
     "ExecutorRegistered.framework.weight"),
    (lambda: _set(wire.Envelope(), lambda e: e.resource_offers.SetInParent()), "unexpected message from the agent"),
])
def test_executor_side_limits(build, field):
    refusal = validate.from_agent_to_executor(build())
    assert refusal is not None and field in refusal, refusal


class _Recorder(allot.Scheduler, allot.Executor):
    def __init__(self):
        self.errors, self.offers, self.launched = [], [], []

    def resource_offers(self, driver, offers):
        self.offers.extend(offers)

    def launch_task(self, driver, task):
        self.launched.append(task.task_id)

    def error(self, driver, message):
        self.errors.append(message)


def test_scheduler_driver_reports_a_refused_message_and_drops_it():
    rec = _Recorder()
    driver = allot.SchedulerDriver(rec, allot.FrameworkInfo(name="v"), master="127.0.0.1:1")
    asyncio.run(driver._dispatch(_offers(validate.OFFERS_PER_MESSAGE_MAX + 1)))
    assert rec.offers == []
    assert len(rec.errors) == 1 and "ResourceOffers.offers: 1001 entries" in rec.errors[0]
    asyncio.run(driver._dispatch(_offers(2)))
    assert len(rec.offers) == 2


def _executor_driver(rec):
    env = {"ALLOT_AGENT_ENDPOINT": "unix:/nonexistent", "ALLOT_FRAMEWORK_ID": "f",
           "ALLOT_EXECUTOR_ID": "e" * 256}
    return allot.ExecutorDriver(rec, env=env)


def test_executor_driver_reports_a_refused_message_and_drops_it():
    rec = _Recorder()
    driver = _executor_driver(rec)
    asyncio.run(driver._dispatch(_launch(lambda t: setattr(t, "data", b"x" * (validate.TASK_DATA_BYTES_MAX + 1)))))
    assert rec.launched == []
    assert len(rec.errors) == 1 and "LaunchTask.task.data" in rec.errors[0]
    asyncio.run(driver._dispatch(_launch(lambda t: t.command.argv.append("true"))))
    assert rec.launched == ["t"]


def test_executor_driver_refuses_an_update_the_agent_would_refuse():
    driver = _executor_driver(_Recorder())
    with pytest.raises(ValueError, match="send_status.message: 4097 bytes"):
        driver.send_status("t", wire.TASK_RUNNING, message="m" * 4097)
    # A 256-byte executor id still yields update ids within the id limit.
    driver.send_status("t", wire.TASK_RUNNING, message="ok")
    assert all(len(u) <= validate.ID_BYTES_MAX for u in driver._unacked)
