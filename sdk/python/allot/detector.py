"""Where the leading master is (``docs/links.md`` section 4).

``make_detector("host:port")`` always reports that address;
``make_detector("zk://host:port,.../path")`` follows the masters' ZooKeeper
election through python3-kazoo.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from .link import Leader, parse_endpoint


class Detector:
    """Reports the current leader and wakes waiters when it changes."""

    def __init__(self) -> None:
        self._leader: Optional[Leader] = None
        self._changed = asyncio.Event()

    def current(self) -> Optional[Leader]:
        return self._leader

    async def wait_change(self, known: Optional[Leader]) -> Optional[Leader]:
        """Returns as soon as the leader differs from ``known``."""
        while self._leader == known:
            self._changed.clear()
            await self._changed.wait()
        return self._leader

    def _set(self, leader: Optional[Leader]) -> None:
        if leader != self._leader:
            self._leader = leader
            self._changed.set()

    def close(self) -> None:
        """Stops watching; the default detector has nothing to stop."""


class FixedDetector(Detector):
    """A single master at a fixed address, epoch 0."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self._set(Leader(parse_endpoint(text)))


def make_detector(text: str) -> Detector:
    """A detector for a ``--master`` value: ``host:port`` or ``zk://...``."""
    if text.startswith("zk://"):
        from .zookeeper import ZooKeeperDetector  # kazoo is needed only here
        return ZooKeeperDetector(text)
    return FixedDetector(text)
