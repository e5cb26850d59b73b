"""Validation of what the SDK receives, with the limits of ``proto/input_limits.h``.

The drivers pass every message from the master (scheduler side) or the agent
(executor side) through :func:`from_master_to_scheduler` /
:func:`from_agent_to_executor` before any callback sees it, as the C++ SDK
does with ``proto/validate.h``. Each returns ``None`` or a text naming the
field, e.g. ``"ResourceOffers.offers: 1001 entries (limit 1000)"``; the
driver then logs it, calls the ``error`` callback and drops the message.
Each check costs time linear in the message.

The constants below are the C++ ones (tests/python/test_validate.py checks
that they match ``proto/input_limits.h``).
"""

from __future__ import annotations

import math
from typing import Iterable, Optional

from ._wire import wire

ID_BYTES_MAX = 256
NAME_BYTES_MAX = 256
USER_BYTES_MAX = 64
ROLE_BYTES_MAX = 64
SECRET_BYTES_MAX = 128
RESOURCE_NAME_BYTES_MAX = 64
ATTRIBUTE_BYTES_MAX = 256
STATUS_MESSAGE_BYTES_MAX = 4096
SHELL_BYTES_MAX = 64 * 1024
ARGV_COUNT_MAX = 1024
ENVIRONMENT_COUNT_MAX = 1024
COMMAND_BYTES_MAX = 256 * 1024
TASK_DATA_BYTES_MAX = 1024 * 1024
RESOURCES_PER_LIST_MAX = 32
RANGES_PER_RESOURCE_MAX = 1024
ATTRIBUTES_MAX = 64
EXECUTORS_PER_AGENT_MAX = 10000
TASKS_PER_EXECUTOR_MAX = 10000
OFFERS_PER_MESSAGE_MAX = 1000
WEIGHT_MAX = 1e6
TIMEOUT_SECONDS_MAX = 365.0 * 86400
KILL_GRACE_SECONDS_MAX = 3600
ERROR_MESSAGE_BYTES_MAX = 4096
HEALTH_CHECK_SECONDS_MAX = 86400
HEALTH_CHECK_INTERVAL_SECONDS_MIN = 0.1
HEALTH_CHECK_FAILURES_MAX = 1000
HEALTH_CHECK_PATH_BYTES_MAX = 1024
IMAGE_REFERENCE_BYTES_MAX = 512
VOLUMES_PER_CONTAINER_MAX = 16
VOLUME_PATH_BYTES_MAX = 1024


class Invalid(Exception):
    """One field over its limit; the text names it."""


def _bytes(value, limit: int, where: str) -> None:
    size = len(value.encode() if isinstance(value, str) else value)
    if size > limit:
        raise Invalid(f"{where}: {size} bytes (limit {limit})")


def _count(items, limit: int, where: str) -> None:
    if len(items) > limit:
        raise Invalid(f"{where}: {len(items)} entries (limit {limit})")


def _non_empty(value: str, where: str) -> None:
    if not value:
        raise Invalid(f"{where}: empty")


def _number(value: float, limit: float, where: str) -> None:
    if not math.isfinite(value) or value < 0 or value > limit:
        raise Invalid(f"{where}: {value} is not in [0, {limit}]")


def _ids(ids: Iterable[str], limit: int, where: str) -> None:
    ids = list(ids)
    _count(ids, limit, where)
    for i, value in enumerate(ids):
        _bytes(value, ID_BYTES_MAX, f"{where}[{i}]")


def _resources(items, where: str) -> None:
    _count(items, RESOURCES_PER_LIST_MAX, where)
    for i, r in enumerate(items):
        _bytes(r.name, RESOURCE_NAME_BYTES_MAX, f"{where}[{i}].name")
        _count(r.ranges, RANGES_PER_RESOURCE_MAX, f"{where}[{i}].ranges")
        if not math.isfinite(r.scalar):
            raise Invalid(f"{where}[{i}].scalar: not a finite number")


def _attributes(items, where: str) -> None:
    _count(items, ATTRIBUTES_MAX, where)
    for i, a in enumerate(items):
        _bytes(a.name, ATTRIBUTE_BYTES_MAX, f"{where}[{i}].name")
        _bytes(a.value, ATTRIBUTE_BYTES_MAX, f"{where}[{i}].value")


def _command(c, where: str) -> None:
    _bytes(c.shell, SHELL_BYTES_MAX, f"{where}.shell")
    _count(c.argv, ARGV_COUNT_MAX, f"{where}.argv")
    _count(c.environment, ENVIRONMENT_COUNT_MAX, f"{where}.environment")
    _bytes(c.user, USER_BYTES_MAX, f"{where}.user")
    total = sum(len(a.encode()) for a in c.argv)
    total += sum(len(k.encode()) + len(v.encode()) for k, v in c.environment.items())
    if total > COMMAND_BYTES_MAX:
        raise Invalid(f"{where} argv+environment: {total} bytes (limit {COMMAND_BYTES_MAX})")


def _volume_path(path: str, where: str) -> None:
    _bytes(path, VOLUME_PATH_BYTES_MAX, where)
    if not path:
        raise Invalid(f"{where}: empty")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise Invalid(f"{where}: control characters")
    if ".." in path.split("/"):
        raise Invalid(f"{where}: '..' is not allowed")


def _container(c, where: str) -> None:
    _bytes(c.image, IMAGE_REFERENCE_BYTES_MAX, f"{where}.image")
    _count(c.volumes, VOLUMES_PER_CONTAINER_MAX, f"{where}.volumes")
    if c.volumes and not c.image:
        raise Invalid(f"{where}.volumes: volumes need an image")
    for i, v in enumerate(c.volumes):
        _volume_path(v.source, f"{where}.volumes[{i}].source")
        _volume_path(v.container_path, f"{where}.volumes[{i}].container_path")
        if not v.container_path.startswith("/") or v.container_path == "/":
            raise Invalid(f"{where}.volumes[{i}].container_path: must be absolute and not '/'")


def _executor_info(ex, where: str) -> None:
    _bytes(ex.executor_id, ID_BYTES_MAX, f"{where}.executor_id")
    _bytes(ex.framework_id, ID_BYTES_MAX, f"{where}.framework_id")
    _bytes(ex.name, NAME_BYTES_MAX, f"{where}.name")
    _command(ex.command, f"{where}.command")
    _container(ex.container, f"{where}.container")
    _resources(ex.resources, f"{where}.resources")


def _framework_info(info, where: str) -> None:
    _bytes(info.id, ID_BYTES_MAX, f"{where}.id")
    _bytes(info.name, NAME_BYTES_MAX, f"{where}.name")
    _bytes(info.user, USER_BYTES_MAX, f"{where}.user")
    _bytes(info.role, ROLE_BYTES_MAX, f"{where}.role")
    _number(info.weight, WEIGHT_MAX, f"{where}.weight")
    _number(info.failover_timeout_s, TIMEOUT_SECONDS_MAX, f"{where}.failover_timeout_s")
    _resources(info.guaranteed, f"{where}.guaranteed")


def _task_info(t, where: str) -> None:
    _bytes(t.task_id, ID_BYTES_MAX, f"{where}.task_id")
    _bytes(t.name, NAME_BYTES_MAX, f"{where}.name")
    _bytes(t.agent_id, ID_BYTES_MAX, f"{where}.agent_id")
    _resources(t.resources, f"{where}.resources")
    _command(t.command, f"{where}.command")
    if t.HasField("executor"):
        _executor_info(t.executor, f"{where}.executor")
    _number(t.kill_grace_s, KILL_GRACE_SECONDS_MAX, f"{where}.kill_grace_s")
    _number(t.max_duration_s, TIMEOUT_SECONDS_MAX, f"{where}.max_duration_s")
    _health_check(t.health_check, f"{where}.health_check")
    _container(t.container, f"{where}.container")
    if t.HasField("executor") and t.container.image:
        raise Invalid(f"{where}.container: a task with its own executor sets the image on the executor")
    _bytes(t.data, TASK_DATA_BYTES_MAX, f"{where}.data")


def _health_check(h, where: str) -> None:
    if h.type not in wire.HealthCheck.Type.values():
        raise Invalid(f"{where}.type: unknown value")
    if h.type == wire.HealthCheck.NONE:
        return
    for name in ("delay_s", "timeout_s", "grace_period_s", "interval_s"):
        if h.HasField(name):
            _number(getattr(h, name), HEALTH_CHECK_SECONDS_MAX, f"{where}.{name}")
    if h.HasField("interval_s") and h.interval_s < HEALTH_CHECK_INTERVAL_SECONDS_MIN:
        raise Invalid(f"{where}.interval_s: below {HEALTH_CHECK_INTERVAL_SECONDS_MIN}")
    if h.HasField("consecutive_failures") and not 1 <= h.consecutive_failures <= HEALTH_CHECK_FAILURES_MAX:
        raise Invalid(f"{where}.consecutive_failures: not in [1, {HEALTH_CHECK_FAILURES_MAX}]")
    _bytes(h.path, HEALTH_CHECK_PATH_BYTES_MAX, f"{where}.path")
    if h.path and (h.path[0] != "/" or any(not 0x20 < ord(c) < 0x7F for c in h.path)):
        raise Invalid(f"{where}.path: must start with '/', printable ASCII without spaces")
    if h.type == wire.HealthCheck.COMMAND:
        _command(h.command, f"{where}.command")
        if not h.command.shell and not h.command.argv:
            raise Invalid(f"{where}.command: neither shell nor argv")
    elif not 1 <= h.port <= 65535:
        raise Invalid(f"{where}.port: not in [1, 65535]")


def _task_status(s, where: str) -> None:
    for name in ("task_id", "framework_id", "agent_id", "executor_id", "update_id"):
        _bytes(getattr(s, name), ID_BYTES_MAX, f"{where}.{name}")
    _bytes(s.message, STATUS_MESSAGE_BYTES_MAX, f"{where}.message")
    if s.state not in wire.TaskState.values():
        raise Invalid(f"{where}.state: unknown value")
    if not math.isfinite(s.timestamp_s):
        raise Invalid(f"{where}.timestamp_s: not a finite number")
    _number(s.usage.cpu_time_s, 1e15, f"{where}.usage.cpu_time_s")


def _offer(o, where: str) -> None:
    _bytes(o.offer_id, ID_BYTES_MAX, f"{where}.offer_id")
    _bytes(o.framework_id, ID_BYTES_MAX, f"{where}.framework_id")
    _bytes(o.agent_id, ID_BYTES_MAX, f"{where}.agent_id")
    _bytes(o.hostname, NAME_BYTES_MAX, f"{where}.hostname")
    _resources(o.resources, f"{where}.resources")
    _attributes(o.attributes, f"{where}.attributes")
    _ids(o.executor_ids, EXECUTORS_PER_AGENT_MAX, f"{where}.executor_ids")


def _error(m) -> None:
    _bytes(m.message, ERROR_MESSAGE_BYTES_MAX, "ErrorMessage.message")


def _scheduler_message(e) -> None:
    kind = e.WhichOneof("body")
    if kind == "framework_registered":
        r = e.framework_registered
        _non_empty(r.framework_id, "FrameworkRegistered.framework_id")
        _bytes(r.framework_id, ID_BYTES_MAX, "FrameworkRegistered.framework_id")
        _bytes(r.master_id, ID_BYTES_MAX, "FrameworkRegistered.master_id")
        _bytes(r.framework_secret, SECRET_BYTES_MAX, "FrameworkRegistered.framework_secret")
    elif kind == "resource_offers":
        offers = e.resource_offers.offers
        _count(offers, OFFERS_PER_MESSAGE_MAX, "ResourceOffers.offers")
        for i, o in enumerate(offers):
            _offer(o, f"ResourceOffers.offers[{i}]")
    elif kind == "offer_rescinded":
        _bytes(e.offer_rescinded.offer_id, ID_BYTES_MAX, "OfferRescinded.offer_id")
    elif kind == "status_update":
        _task_status(e.status_update.status, "StatusUpdate.status")
    elif kind == "agent_lost":
        _bytes(e.agent_lost.agent_id, ID_BYTES_MAX, "AgentLost.agent_id")
    elif kind == "share_update":
        _resources(e.share_update.guaranteed, "ShareUpdate.guaranteed")
        _resources(e.share_update.allocated, "ShareUpdate.allocated")
        _number(e.share_update.dominant_share, 1e6, "ShareUpdate.dominant_share")
    elif kind == "error":
        _error(e.error)
    else:
        raise Invalid(f"unexpected message from the master ({kind})")


def _executor_message(e) -> None:
    kind = e.WhichOneof("body")
    if kind == "executor_registered":
        r = e.executor_registered
        _bytes(r.agent_id, ID_BYTES_MAX, "ExecutorRegistered.agent_id")
        _framework_info(r.framework, "ExecutorRegistered.framework")
        _executor_info(r.executor, "ExecutorRegistered.executor")
    elif kind == "launch_task":
        _non_empty(e.launch_task.task.task_id, "LaunchTask.task.task_id")
        _task_info(e.launch_task.task, "LaunchTask.task")
    elif kind == "kill_task":
        k = e.kill_task
        _non_empty(k.task_id, "KillTask.task_id")
        for name in ("framework_id", "task_id", "agent_id"):
            _bytes(getattr(k, name), ID_BYTES_MAX, f"KillTask.{name}")
        _number(k.grace_s, KILL_GRACE_SECONDS_MAX, "KillTask.grace_s")
    elif kind == "shutdown_executor":
        s = e.shutdown_executor
        _bytes(s.framework_id, ID_BYTES_MAX, "ShutdownExecutor.framework_id")
        _bytes(s.executor_id, ID_BYTES_MAX, "ShutdownExecutor.executor_id")
        _number(s.grace_s, KILL_GRACE_SECONDS_MAX, "ShutdownExecutor.grace_s")
    elif kind == "status_acknowledgement":
        a = e.status_acknowledgement
        for name in ("framework_id", "task_id", "update_id"):
            _bytes(getattr(a, name), ID_BYTES_MAX, f"StatusAcknowledgement.{name}")
    elif kind == "error":
        _error(e.error)
    else:
        raise Invalid(f"unexpected message from the agent ({kind})")


def from_master_to_scheduler(e: "wire.Envelope") -> Optional[str]:
    """None, or why a message from the master must be dropped."""
    try:
        _scheduler_message(e)
    except Invalid as why:
        return str(why)
    return None


def from_agent_to_executor(e: "wire.Envelope") -> Optional[str]:
    """None, or why a message from the agent must be dropped."""
    try:
        _executor_message(e)
    except Invalid as why:
        return str(why)
    return None


def task_status(s: "wire.TaskStatus", where: str = "send_status") -> Optional[str]:
    """None, or why the agent would refuse this update."""
    try:
        _task_status(s, where)
    except Invalid as why:
        return str(why)
    return None
