#!/usr/bin/env python3
"""A minimal allot framework in Python: runs one task that prints hello.

    examples/python/hello.py --master 127.0.0.1:5050

Exits with the task's exit code (0 when it finished; 137 when killed; 1 when
lost or refused; 124 when no offer came within --timeout).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import sys

try:
    import allot  # installed: pip install sdk/python
except ImportError:  # run from the source tree
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "sdk" / "python"))

import allot  # noqa: E402
from allot import wire  # noqa: E402

TERMINAL = {wire.TASK_FINISHED, wire.TASK_FAILED, wire.TASK_KILLED, wire.TASK_LOST,
            wire.TASK_ERROR}


class Hello(allot.Scheduler):
    """Launches one task on the first offer that fits, then waits for its end."""

    def __init__(self, command: str, resources: str) -> None:
        self.command = command
        self.resources = allot.parse_resources(resources)
        self.launched = False
        self.exit_code: int | None = None

    def resource_offers(self, driver: allot.SchedulerDriver, offers) -> None:
        for offer in offers:
            if self.launched or not allot.fits(self.resources, offer.resources):
                driver.decline_offer(offer.offer_id)
                continue
            task = wire.TaskInfo(task_id="hello", name="hello", agent_id=offer.agent_id)
            task.resources.extend(self.resources)
            task.command.shell = self.command
            driver.accept_offer([offer.offer_id], [task])
            self.launched = True
            driver.set_needs_offers(False)

    def status_update(self, driver: allot.SchedulerDriver, status) -> None:
        print(f"task {status.task_id}: {wire.TaskState.Name(status.state)}"
              + (f" ({status.message})" if status.message else ""), flush=True)
        driver.acknowledge(status)
        if status.state in TERMINAL:
            self.exit_code = self._code(status)
            driver.stop()

    @staticmethod
    def _code(status) -> int:
        if status.state == wire.TASK_FINISHED:
            return 0
        if status.state == wire.TASK_FAILED and status.HasField("exit_code"):
            return status.exit_code or 1
        if status.state == wire.TASK_KILLED:
            return 137
        return 1

    def error(self, driver: allot.SchedulerDriver, message: str) -> None:
        print(f"master says: {message}", file=sys.stderr)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--master", default="127.0.0.1:5050", help="HOST:PORT or zk://...")
    parser.add_argument("--command", default="echo hello", help="the task's shell command")
    parser.add_argument("--resources", default="cpus:0.1;mem:32")
    parser.add_argument("--timeout", type=float, default=60, help="seconds to wait in all")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--tls-ca")
    args = parser.parse_args()
    tls_given = [args.tls_cert, args.tls_key, args.tls_ca]
    if any(tls_given) and not all(tls_given):
        parser.error("--tls-cert, --tls-key and --tls-ca go together")
    tls = allot.TlsFiles(args.tls_cert, args.tls_key, args.tls_ca) if all(tls_given) else None
    try:
        scheduler = Hello(args.command, args.resources)
    except ValueError as e:
        parser.error(str(e))
    driver = allot.SchedulerDriver(scheduler, wire.FrameworkInfo(name="hello-python"),
                                   master=args.master, tls=tls)
    try:
        await asyncio.wait_for(driver.run(), args.timeout)
    except asyncio.TimeoutError:
        print(f"no result within {args.timeout} s", file=sys.stderr)
        return 124
    return scheduler.exit_code if scheduler.exit_code is not None else 1


if __name__ == "__main__":
    logging.basicConfig(level=logging.DEBUG if __import__("os").environ.get("ALLOT_DEBUG") else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(asyncio.run(main()))
