"""The scheduler API of SPEC section 2 (the paper's Table 1), on asyncio.

A framework subclasses :class:`Scheduler` (callbacks; plain or ``async def``)
and runs a :class:`SchedulerDriver`::

    class Hello(allot.Scheduler):
        def resource_offers(self, driver, offers):
            for offer in offers:
                driver.accept_offer([offer.offer_id], [task_for(offer)])
        def status_update(self, driver, status):
            driver.acknowledge(status)

    driver = allot.SchedulerDriver(Hello(), allot.FrameworkInfo(name="hello"),
                                   master="127.0.0.1:5050")
    asyncio.run(driver.run())

Contract (the same as the C++ SDK, ``sdk/scheduler.h``): offers are valid
until accepted, declined, rescinded or the link drops; updates with an
``update_id`` must be acknowledged or the agent resends them; on a lost link
the driver reconnects with jittered backoff (following the leader when the
master is ``zk://...``) and re-registers with the same framework id and its
secret; ``disconnected`` then ``reregistered`` are called. Actions while not
registered raise :class:`NotRegistered`. Everything runs on the event loop
that runs :meth:`SchedulerDriver.run`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import signal
import sys
from typing import Iterable, Optional, Sequence

from ._wire import wire
from .detector import Detector, make_detector
from .link import Backoff, Leader, Link, LinkError, TlsFiles
from .validate import from_master_to_scheduler

log = logging.getLogger("allot.scheduler")

#: How many unfinished task ids a driver remembers for :meth:`SchedulerDriver.stop`'s message.
MAX_TRACKED_TASKS = 100_000

FrameworkInfo = wire.FrameworkInfo
TaskInfo = wire.TaskInfo
TaskStatus = wire.TaskStatus
Offer = wire.Offer
Filters = wire.Filters
StandingFilters = wire.StandingFilters
TaskRef = wire.TaskRef

_TERMINAL = frozenset({wire.TASK_FINISHED, wire.TASK_FAILED, wire.TASK_KILLED, wire.TASK_LOST,
                       wire.TASK_ERROR})


class NotRegistered(Exception):
    """An action needs a registered framework, and the driver is not registered."""


class Scheduler:
    """Callbacks. Override what you need; each may be ``async def``."""

    def registered(self, driver: "SchedulerDriver", framework_id: str, master_id: str) -> None:
        """First registration: the master assigned ``framework_id``."""

    def reregistered(self, driver: "SchedulerDriver", master_id: str) -> None:
        """Registration with an existing id succeeded (reconnect or failover)."""

    def disconnected(self, driver: "SchedulerDriver") -> None:
        """The link to the master dropped; the driver is reconnecting."""

    def resource_offers(self, driver: "SchedulerDriver", offers: Sequence[Offer]) -> None:
        """New offers: accept or decline each."""

    def offer_rescinded(self, driver: "SchedulerDriver", offer_id: str) -> None:
        """An offer is void."""

    def status_update(self, driver: "SchedulerDriver", status: TaskStatus) -> None:
        """A task changed state; acknowledge it (``driver.acknowledge``)."""

    def agent_lost(self, driver: "SchedulerDriver", agent_id: str) -> None:
        """An agent was removed; its tasks were reported LOST before this."""

    def error(self, driver: "SchedulerDriver", message: str) -> None:
        """The master reported a problem (a fatal one stops the driver), or sent a
        message that fails validation (``allot.validate``; it is dropped)."""


class SchedulerDriver:
    """Registers a framework and carries its actions to the leading master."""

    def __init__(self, scheduler: Scheduler, info: FrameworkInfo, *, master: str = "127.0.0.1:5050",
                 tls: Optional[TlsFiles] = None, needs_offers: bool = True,
                 framework_secret: str = "", backoff: Optional[Backoff] = None) -> None:
        self._scheduler = scheduler
        self._info = FrameworkInfo()
        self._info.CopyFrom(info)
        self._master = master
        self._tls = tls
        self._needs_offers = needs_offers
        self._filters = StandingFilters()
        self._secret = framework_secret
        self._backoff = backoff or Backoff()
        self._link: Optional[Link] = None
        self._registered = False
        self._stopped = asyncio.Event()
        self._max_epoch = 0
        self._unfinished: set = set()
        self.share = wire.ShareUpdate()

    # ------------------------------------------------------------------ state

    @property
    def framework_id(self) -> str:
        return self._info.id

    @property
    def framework_secret(self) -> str:
        """Give it to a second scheduler that takes over this framework id."""
        return self._secret

    @property
    def registered(self) -> bool:
        return self._registered

    def unfinished_tasks(self) -> list:
        """Tasks launched here or reported non-terminal, not yet seen to end (sorted)."""
        return sorted(self._unfinished)

    def _track(self, task_id: str, running: bool) -> None:
        if not running:
            self._unfinished.discard(task_id)
        elif len(self._unfinished) < MAX_TRACKED_TASKS:
            self._unfinished.add(task_id)

    def guaranteed_share(self) -> "wire.ShareUpdate":
        """The latest share the master reported (guaranteed, allocated, dominant)."""
        return self.share

    # ------------------------------------------------------------------ running

    async def run(self, *, stop_on_signals: bool = False) -> None:
        """Connects, registers and dispatches callbacks until :meth:`stop`.

        ``stop_on_signals``: the first SIGINT or SIGTERM calls :meth:`stop`
        (run returns within about a second, also with no master reachable,
        naming the tasks that may still run); a second SIGINT exits the
        process at once (status 130).
        """
        detector = make_detector(self._master)
        loop = asyncio.get_running_loop()
        if stop_on_signals:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            await self._run(detector)
        finally:
            if stop_on_signals:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)
            detector.close()
            if self._link:
                self._link.close()

    def _on_signal(self, sig: int) -> None:
        if not self._stopped.is_set():
            print(f"allot: {signal.Signals(sig).name}: stopping the framework "
                  "(again to exit at once)", file=sys.stderr, flush=True)
            self.stop()
            return
        if sig == signal.SIGINT:
            running = ", ".join(self.unfinished_tasks())
            print("allot: interrupted again: exiting" +
                  (f"; these tasks may still run: {running}" if running else ""),
                  file=sys.stderr, flush=True)
            os._exit(130)

    async def _run(self, detector: Detector) -> None:
        leader = detector.current()
        while not self._stopped.is_set():
            if leader is None:
                leader = await self._until_stopped(detector.wait_change(None))
                continue
            await self._session(leader, detector)
            if self._stopped.is_set():
                return
            delay = self._backoff.next_delay()
            await self._until_stopped(asyncio.sleep(delay))
            leader = detector.current()

    async def _until_stopped(self, awaitable):
        task = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._stopped.wait())
        done, _ = await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        for pending in (task, stop):
            if pending not in done:
                pending.cancel()
        return task.result() if task in done and not task.cancelled() else None

    async def _session(self, leader: Leader, detector: Detector) -> None:
        """One link to one leader, from connect to close."""
        self._max_epoch = max(self._max_epoch, leader.epoch)
        try:
            self._link = await Link.open(leader.endpoint, wire.ROLE_SCHEDULER, self._info.name,
                                         tls=self._tls, min_epoch=self._max_epoch)
        except (OSError, LinkError, asyncio.TimeoutError) as e:
            log.debug("master %s: %s", leader.endpoint.describe(), e)
            return
        self._max_epoch = max(self._max_epoch, self._link.peer_hello.leader_epoch)
        try:
            self._link.send(self._registration())
        except LinkError as e:  # e.g. TLS 1.3 reports a refused certificate only now
            log.debug("master %s: %s", leader.endpoint.describe(), e)
            self._link.close()
            return
        reading = asyncio.ensure_future(self._read_loop(self._link))
        change = asyncio.ensure_future(detector.wait_change(leader))
        stop = asyncio.ensure_future(self._stopped.wait())
        await asyncio.wait({reading, change, stop}, return_when=asyncio.FIRST_COMPLETED)
        for pending in (reading, change, stop):
            pending.cancel()
        if self._stopped.is_set():  # let an UnregisterFramework reach the master
            try:
                await asyncio.wait_for(self._link.drain(), 1.0)
            except (OSError, asyncio.TimeoutError):
                pass
        self._link.close()
        was = self._registered
        self._registered = False
        if was and not self._stopped.is_set():
            await self._call("disconnected", self)

    def _registration(self) -> "wire.Envelope":
        e = wire.Envelope()
        e.register_framework.info.CopyFrom(self._info)
        e.register_framework.needs_offers = self._needs_offers
        e.register_framework.filters.CopyFrom(self._filters)
        e.register_framework.framework_secret = self._secret
        return e

    async def _read_loop(self, link: Link) -> None:
        why = await link.serve(self._dispatch)
        log.debug("link to master closed: %s", why)

    async def _dispatch(self, e: "wire.Envelope") -> None:
        refusal = from_master_to_scheduler(e)
        if refusal is not None:
            log.warning("refused a message from the master: %s", refusal)
            await self._call("error", self, "refused a message from the master: " + refusal)
            return
        kind = e.WhichOneof("body")
        if kind == "framework_registered":
            r = e.framework_registered
            first = not self._info.id
            self._info.id = r.framework_id
            if r.framework_secret:
                self._secret = r.framework_secret
            self._registered = True
            self._backoff.reset()
            if first:
                await self._call("registered", self, r.framework_id, r.master_id)
            else:
                await self._call("reregistered", self, r.master_id)
        elif kind == "resource_offers":
            await self._call("resource_offers", self, list(e.resource_offers.offers))
        elif kind == "offer_rescinded":
            await self._call("offer_rescinded", self, e.offer_rescinded.offer_id)
        elif kind == "status_update":
            st = e.status_update.status
            self._track(st.task_id, st.state not in _TERMINAL)
            await self._call("status_update", self, st)
        elif kind == "agent_lost":
            await self._call("agent_lost", self, e.agent_lost.agent_id)
        elif kind == "share_update":
            self.share = e.share_update
        elif kind == "error":
            if e.error.fatal:
                self._stopped.set()
            await self._call("error", self, e.error.message)
        else:
            log.debug("ignoring %s", kind)

    async def _call(self, name: str, *args) -> None:
        result = getattr(self._scheduler, name)(*args)
        if inspect.isawaitable(result):
            await result

    def stop(self, failover: bool = False) -> None:
        """Stops; ``failover=False`` unregisters (the master kills the tasks).

        Stopped with no master reachable, it says which tasks may still run
        (the master ends them when the framework's failover timeout passes).
        """
        if not self._registered and self._unfinished and not self._stopped.is_set():
            more = " (and maybe more)" if len(self._unfinished) >= MAX_TRACKED_TASKS else ""
            log.warning("stopped while no master is reachable; these tasks may still run: %s%s "
                        "(the master ends them when this framework's failover timeout passes)",
                        ", ".join(self.unfinished_tasks()), more)
        if self._link and self._registered and not failover:
            e = wire.Envelope()
            e.unregister_framework.framework_id = self._info.id
            try:
                self._link.send(e)
            except LinkError:
                pass  # the link is gone: the master's failover timeout ends the framework
        self._registered = False
        self._stopped.set()

    # ------------------------------------------------------------------ actions

    def _send(self, e: "wire.Envelope") -> None:
        if not self._registered or self._link is None:
            raise NotRegistered("not registered with a master")
        self._link.send(e)

    def accept_offer(self, offer_ids: Iterable[str], tasks: Iterable[TaskInfo],
                     filters: Optional[Filters] = None) -> None:
        """Launches ``tasks`` on the offers (all from one agent)."""
        e = wire.Envelope()
        e.accept_offers.offer_ids.extend(offer_ids)
        e.accept_offers.tasks.extend(tasks)
        if filters is not None:
            e.accept_offers.filters.CopyFrom(filters)
        self._send(e)
        for t in e.accept_offers.tasks:
            self._track(t.task_id, True)

    def decline_offer(self, offer_id: str, filters: Optional[Filters] = None) -> None:
        e = wire.Envelope()
        e.decline_offers.offer_ids.append(offer_id)
        if filters is not None:
            e.decline_offers.filters.CopyFrom(filters)
        self._send(e)

    def set_needs_offers(self, needs_offers: bool) -> None:
        """False: no offers until called with True (suppress / revive)."""
        self._needs_offers = needs_offers
        e = wire.Envelope()
        e.set_needs_offers.needs_offers = needs_offers
        if self._registered:
            self._send(e)

    def set_filters(self, filters: StandingFilters) -> None:
        self._filters.CopyFrom(filters)
        e = wire.Envelope()
        e.set_filters.filters.CopyFrom(filters)
        if self._registered:
            self._send(e)

    def kill_task(self, task_id: str, grace_s: float = 0) -> None:
        e = wire.Envelope()
        e.kill_task.framework_id = self._info.id
        e.kill_task.task_id = task_id
        e.kill_task.grace_s = grace_s
        self._send(e)

    def acknowledge(self, status: TaskStatus) -> None:
        """Acknowledges an update (nothing to do for those without update_id)."""
        if not status.update_id:
            return
        e = wire.Envelope()
        a = e.acknowledge
        a.framework_id = self._info.id
        a.agent_id = status.agent_id
        a.task_id = status.task_id
        a.update_id = status.update_id
        self._send(e)

    def reconcile(self, tasks: Iterable[TaskRef] = ()) -> None:
        """Asks for the latest state of these tasks (none: all of ours)."""
        e = wire.Envelope()
        e.reconcile.SetInParent()
        e.reconcile.tasks.extend(tasks)
        self._send(e)
