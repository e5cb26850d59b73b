"""Leader detection through ZooKeeper (python3-kazoo), the Python twin of
``ha/zk_detector.h``: watches the masters' contender group and reports its
lowest member. The group's layout is ``ha/group.h``'s::

    <path>/member_<guid>_<sequence>     ephemeral + sequential, one per master
    data: "address=HOST:PORT\\nid=MASTER_ID\\n"

The leader epoch is the member znode's czxid; a report never goes back to a
lower epoch. kazoo runs its callbacks on its own threads: every result is
handed to the asyncio loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from typing import List, Optional, Tuple
from urllib.parse import urlparse

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import KazooState

from .detector import Detector
from .link import Leader, parse_endpoint

log = logging.getLogger("allot.zookeeper")

MEMBER = re.compile(r"^member_([0-9a-f]+)_(\d+)$")
MAX_MEMBER_DATA_BYTES = 4096
MAX_GROUP_MEMBERS = 10000
SESSION_TIMEOUT_S = 10.0


def parse_zk_url(url: str) -> Tuple[str, str]:
    """``zk://h:p,h:p/path`` -> (``"h:p,h:p"``, ``"/path"``)."""
    parsed = urlparse(url)
    if parsed.scheme != "zk" or not parsed.netloc or not parsed.path or parsed.path == "/":
        raise ValueError(f"{url!r}: expected zk://host:port[,host:port...]/path")
    return parsed.netloc, parsed.path.rstrip("/")


def lowest_member(children: List[str]) -> Optional[str]:
    members = []
    for name in children[:MAX_GROUP_MEMBERS]:
        m = MEMBER.match(name)
        if m:
            members.append((int(m.group(2)), name))
    return min(members)[1] if members else None


def decode_member(data: bytes) -> Tuple[str, str]:
    """(address, master id) from a member's data; ValueError when malformed."""
    if len(data) > MAX_MEMBER_DATA_BYTES:
        raise ValueError("member data too large")
    fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
    if "address" not in fields:
        raise ValueError("member data has no address")
    return fields["address"], fields.get("id", "")


class ZooKeeperDetector(Detector):
    """Follows the leader of the group at ``zk://hosts/path``."""

    def __init__(self, url: str, session_timeout_s: float = SESSION_TIMEOUT_S) -> None:
        super().__init__()
        hosts, self._path = parse_zk_url(url)
        self._loop = asyncio.get_running_loop()
        self._highest_epoch = 0
        self._client = KazooClient(hosts=hosts, timeout=session_timeout_s)
        self._client.add_listener(self._on_state)
        # Connecting blocks: do it on a thread, never on the event loop.
        threading.Thread(target=self._watch, name="allot-zk", daemon=True).start()

    def _watch(self) -> None:
        try:
            self._client.start(timeout=3600)
            self._client.ensure_path(self._path)  # the masters create it too
            self._client.ChildrenWatch(self._path, self._on_children, allow_session_lost=True)
        except Exception as e:  # closed while connecting, or ZooKeeper unreachable
            log.warning("zookeeper: cannot watch %s: %s", self._path, e)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:  # session expired: no leader known until relisted
            self._loop.call_soon_threadsafe(self._set, None)

    def _on_children(self, children: Optional[List[str]]) -> None:
        """Runs on a kazoo thread for each change of the group."""
        member = lowest_member(children or [])
        if member is None:
            self._loop.call_soon_threadsafe(self._set, None)
            return
        try:
            data, stat = self._client.get(f"{self._path}/{member}")
            address, master_id = decode_member(data)
            leader = Leader(parse_endpoint(address), max(stat.czxid, 1), master_id)
        except NoNodeError:
            return  # gone already: the next listing reports its successor
        except Exception as e:  # malformed data, lost connection: keep the last leader
            log.warning("zookeeper: cannot read member %s: %s", member, e)
            return
        self._loop.call_soon_threadsafe(self._report, leader)

    def _report(self, leader: Leader) -> None:
        if leader.epoch < self._highest_epoch:
            log.warning("zookeeper: ignoring member with older epoch %d", leader.epoch)
            return
        self._highest_epoch = leader.epoch
        self._set(leader)

    def close(self) -> None:
        self._client.stop()
        self._client.close()
