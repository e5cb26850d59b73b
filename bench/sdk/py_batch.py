#!/usr/bin/env python3
"""The Python twin of examples/batch's launch loop, for bench/sdk/run.sh:
launches --tasks tasks of `true` (0 s on an emulated agent) as fast as offers
allow and prints the same summary line as allot-batch."""

import argparse
import asyncio
import pathlib
import sys
import time

try:
    import allot  # installed: pip install sdk/python
except ImportError:  # run from the source tree
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "sdk" / "python"))

import allot  # noqa: E402
from allot import wire  # noqa: E402

TERMINAL = {wire.TASK_FINISHED, wire.TASK_FAILED, wire.TASK_KILLED, wire.TASK_LOST,
            wire.TASK_ERROR}


class Batch(allot.Scheduler):
    def __init__(self, tasks: int, resources: str) -> None:
        self.total = tasks
        self.next = 0
        self.ended = 0
        self.finished = 0
        self.each = allot.parse_resources(resources)
        self.need = allot.scalars(self.each)
        self.first_offer = None
        self.first_offer_at = 0.0

    def resource_offers(self, driver, offers):
        if self.first_offer is None:
            self.first_offer, self.first_offer_at = time.monotonic(), time.time()
        for offer in offers:
            free = allot.scalars(offer.resources)
            tasks = []
            while self.next < self.total and all(free.get(k, 0) + 1e-9 >= v
                                                 for k, v in self.need.items()):
                t = wire.TaskInfo(task_id=str(self.next), name="py-batch",
                                  agent_id=offer.agent_id)
                t.resources.extend(self.each)
                t.command.shell = "true"
                tasks.append(t)
                self.next += 1
                for k, v in self.need.items():
                    free[k] -= v
            if tasks:
                driver.accept_offer([offer.offer_id], tasks)
            else:
                driver.decline_offer(offer.offer_id)
        if self.next == self.total:
            driver.set_needs_offers(False)

    def status_update(self, driver, status):
        driver.acknowledge(status)
        if status.state in TERMINAL:
            self.ended += 1
            self.finished += status.state == wire.TASK_FINISHED
            if self.ended == self.total:
                run_s = time.monotonic() - self.first_offer
                print(f"result tasks={self.total} finished={self.finished} run_s={run_s:.3f} "
                      f"finished_per_s={self.finished / run_s:.0f} "
                      f"first_offer_at={self.first_offer_at:.6f} end_at={time.time():.6f}",
                      flush=True)
                driver.stop()


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--master", required=True)
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--resources", default="cpus:1;mem:128")
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args()
    batch = Batch(args.tasks, args.resources)
    driver = allot.SchedulerDriver(batch, wire.FrameworkInfo(name="py-batch"), master=args.master)
    await asyncio.wait_for(driver.run(), args.timeout)
    return 0 if batch.finished == args.tasks else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
