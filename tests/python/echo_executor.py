#!/usr/bin/env python3
"""A custom executor written with the Python SDK: each task sleeps for the
seconds in its data (default 0), then finishes with its data echoed in the
status message. Kill requests end the task as KILLED."""

import asyncio
import pathlib
import sys

try:
    import allot  # installed: pip install sdk/python
except ImportError:  # run from the source tree
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "sdk" / "python"))

import allot  # noqa: E402
from allot import wire  # noqa: E402


class Echo(allot.Executor):
    def __init__(self) -> None:
        self.running = {}

    def launch_task(self, driver, task):
        driver.send_status(task.task_id, wire.TASK_RUNNING)
        self.running[task.task_id] = asyncio.ensure_future(self.run(driver, task))

    async def run(self, driver, task):
        text = task.data.decode() or "0"
        await asyncio.sleep(float(text))
        self.running.pop(task.task_id, None)
        driver.send_status(task.task_id, wire.TASK_FINISHED, message=f"echo {text}")

    def kill_task(self, driver, task_id, grace_s):
        job = self.running.pop(task_id, None)
        if job:
            job.cancel()
            driver.send_status(task_id, wire.TASK_KILLED, reason=wire.REASON_KILLED_BY_FRAMEWORK)

    def shutdown(self, driver, grace_s):
        for task_id in list(self.running):
            self.kill_task(driver, task_id, grace_s)
        asyncio.get_running_loop().call_later(0.2, driver.stop)


if __name__ == "__main__":
    asyncio.run(allot.ExecutorDriver(Echo()).run())
