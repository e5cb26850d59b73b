"""The executor API of SPEC section 2, on asyncio.

An executor is started by the agent with ``ALLOT_AGENT_ENDPOINT``,
``ALLOT_FRAMEWORK_ID``, ``ALLOT_EXECUTOR_ID`` (and the rest of
``proto/FORMAT.md``'s table) in its environment. Subclass :class:`Executor`
and run an :class:`ExecutorDriver`::

    class Echo(allot.Executor):
        def launch_task(self, driver, task):
            driver.send_status(task.task_id, allot.wire.TASK_RUNNING)
            ...
    asyncio.run(allot.ExecutorDriver(Echo()).run())

Status updates are kept until the agent acknowledges them and resent with
the registration after a reconnect (the agent may restart); if the agent
stays away longer than ``ALLOT_RECOVERY_TIMEOUT_S`` the executor shuts down.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import os
import time
from typing import Dict, Mapping, Optional

from ._wire import wire
from .link import Backoff, Link, LinkError, parse_endpoint
from .validate import TASKS_PER_EXECUTOR_MAX, from_agent_to_executor, task_status

log = logging.getLogger("allot.executor")

UNACKNOWLEDGED_MAX = 10_000
TASKS_MAX = TASKS_PER_EXECUTOR_MAX  # tasks the driver keeps (RegisterExecutor.tasks)


class Executor:
    """Callbacks. Override what you need; each may be ``async def``."""

    def registered(self, driver: "ExecutorDriver", info: "wire.ExecutorRegistered") -> None:
        """The agent accepted this executor."""

    def launch_task(self, driver: "ExecutorDriver", task: "wire.TaskInfo") -> None:
        """Run ``task`` and report its states with ``driver.send_status``."""

    def kill_task(self, driver: "ExecutorDriver", task_id: str, grace_s: float) -> None:
        """Kill one task (SIGTERM, then SIGKILL after ``grace_s``)."""

    def shutdown(self, driver: "ExecutorDriver", grace_s: float) -> None:
        """Kill every task and let ``run()`` return (call ``driver.stop()``)."""

    def error(self, driver: "ExecutorDriver", message: str) -> None:
        """The agent reported a problem, or sent a message that fails validation
        (``allot.validate``; it is dropped). The driver keeps running."""


class ExecutorDriver:
    """Registers with the agent and carries status updates reliably."""

    def __init__(self, executor: Executor, env: Optional[Mapping[str, str]] = None,
                 backoff: Optional[Backoff] = None) -> None:
        env = os.environ if env is None else env
        missing = [k for k in ("ALLOT_AGENT_ENDPOINT", "ALLOT_FRAMEWORK_ID", "ALLOT_EXECUTOR_ID")
                   if not env.get(k)]
        if missing:
            raise ValueError("not started by an allot agent: " + ", ".join(missing) + " unset")
        self._executor = executor
        self._endpoint = parse_endpoint(env["ALLOT_AGENT_ENDPOINT"])
        self.framework_id = env["ALLOT_FRAMEWORK_ID"]
        self.executor_id = env["ALLOT_EXECUTOR_ID"]
        self.agent_id = env.get("ALLOT_AGENT_ID", "")
        self.sandbox_dir = env.get("ALLOT_SANDBOX_DIR", "")
        # Proves to the agent that it launched this executor; kept from the
        # tasks this executor starts.
        self._secret = env.get("ALLOT_EXECUTOR_SECRET", "")
        if env is os.environ:
            os.environ.pop("ALLOT_EXECUTOR_SECRET", None)
        self._recovery_timeout_s = float(env.get("ALLOT_RECOVERY_TIMEOUT_S", "900"))
        self._backoff = backoff or Backoff()
        self._tasks: Dict[str, "wire.TaskInfo"] = {}
        self._unacked: Dict[str, "wire.TaskStatus"] = {}
        self._ids = itertools.count(1)
        # Bounded so every update id stays within the id limit.
        self._prefix = f"{self.executor_id[:128]}-py{os.getpid()}-{time.time_ns()}-"
        self._link: Optional[Link] = None
        self._stopped = asyncio.Event()
        self._shutdown_called = False

    async def run(self) -> None:
        """Connects and dispatches until :meth:`stop` (or the agent is gone for good)."""
        away_since = time.monotonic()
        while not self._stopped.is_set():
            if await self._session():
                away_since = time.monotonic()
            if self._stopped.is_set():
                break
            if time.monotonic() - away_since > self._recovery_timeout_s:
                log.error("agent did not come back within the recovery timeout; shutting down")
                await self._shutdown(0)
                break
            try:
                await asyncio.wait_for(self._stopped.wait(), self._backoff.next_delay())
            except asyncio.TimeoutError:
                pass

    async def _session(self) -> bool:
        try:
            self._link = await Link.open(self._endpoint, wire.ROLE_EXECUTOR, self.executor_id,
                                         expect_role=wire.ROLE_AGENT)
        except (OSError, LinkError, asyncio.TimeoutError) as e:
            log.debug("agent %s: %s", self._endpoint.describe(), e)
            return False
        try:
            self._link.send(self._registration())
        except LinkError as e:
            log.debug("agent %s: %s", self._endpoint.describe(), e)
            self._link.close()
            self._link = None
            return False
        reading = asyncio.ensure_future(self._read_loop(self._link))
        stop = asyncio.ensure_future(self._stopped.wait())
        await asyncio.wait({reading, stop}, return_when=asyncio.FIRST_COMPLETED)
        reading.cancel()
        stop.cancel()
        if self._stopped.is_set():
            try:
                await asyncio.wait_for(self._link.drain(), 1.0)
            except (OSError, asyncio.TimeoutError):
                pass
        self._link.close()
        self._link = None
        return True

    def _registration(self) -> "wire.Envelope":
        e = wire.Envelope()
        r = e.register_executor
        r.framework_id = self.framework_id
        r.executor_id = self.executor_id
        r.executor_secret = self._secret
        r.tasks.extend(self._tasks.values())
        r.unacknowledged.extend(self._unacked.values())
        return e

    async def _read_loop(self, link: Link) -> None:
        why = await link.serve(self._dispatch)
        log.warning("link to agent closed (%s); reconnecting", why)

    async def _dispatch(self, e: "wire.Envelope") -> None:
        refusal = from_agent_to_executor(e)
        if refusal is not None:
            log.warning("refused a message from the agent: %s", refusal)
            await self._call("error", self, "refused a message from the agent: " + refusal)
            return
        kind = e.WhichOneof("body")
        if kind == "executor_registered":
            self._backoff.reset()
            if e.executor_registered.agent_id:
                self.agent_id = e.executor_registered.agent_id
            await self._call("registered", self, e.executor_registered)
        elif kind == "launch_task":
            task = e.launch_task.task
            if task.task_id not in self._tasks and len(self._tasks) >= TASKS_MAX:
                self.send_status(task.task_id, wire.TASK_ERROR,
                                 message=f"the executor runs its limit of {TASKS_MAX} tasks")
                return
            self._tasks[task.task_id] = task
            await self._call("launch_task", self, task)
        elif kind == "kill_task":
            await self._call("kill_task", self, e.kill_task.task_id, e.kill_task.grace_s)
        elif kind == "status_acknowledgement":
            self._unacked.pop(e.status_acknowledgement.update_id, None)
        elif kind == "shutdown_executor":
            await self._shutdown(e.shutdown_executor.grace_s)
        elif kind == "error":
            log.error("agent reports: %s", e.error.message)
            await self._call("error", self, e.error.message)

    async def _shutdown(self, grace_s: float) -> None:
        if not self._shutdown_called:
            self._shutdown_called = True
            await self._call("shutdown", self, grace_s)

    async def _call(self, name: str, *args) -> None:
        result = getattr(self._executor, name)(*args)
        if inspect.isawaitable(result):
            await result

    def send_status(self, task_id: str, state: int, *, reason: int = wire.REASON_NONE,
                    message: str = "", exit_code: Optional[int] = None) -> None:
        """Reports a task's state; kept and resent until the agent acknowledges it."""
        if not task_id:
            raise ValueError("send_status: task_id is empty")
        if len(self._unacked) >= UNACKNOWLEDGED_MAX:
            raise RuntimeError(f"{len(self._unacked)} updates wait for the agent (limit reached)")
        s = wire.TaskStatus(task_id=task_id, framework_id=self.framework_id,
                            executor_id=self.executor_id, agent_id=self.agent_id, state=state,
                            reason=reason, message=message, timestamp_s=time.time(),
                            update_id=f"{self._prefix}{next(self._ids):012d}")
        if exit_code is not None:
            s.exit_code = exit_code
        refusal = task_status(s)
        if refusal is not None:
            raise ValueError(refusal)  # the agent would refuse it
        if state in (wire.TASK_FINISHED, wire.TASK_FAILED, wire.TASK_KILLED, wire.TASK_LOST,
                     wire.TASK_ERROR):
            self._tasks.pop(task_id, None)
        self._unacked[s.update_id] = s
        if self._link is not None:
            e = wire.Envelope()
            e.status_update.status.CopyFrom(s)
            try:
                self._link.send(e)
            except LinkError:
                pass  # resent with the next registration

    def stop(self) -> None:
        """Ends ``run()`` after flushing what is queued."""
        self._stopped.set()
