"""allot: the Python SDK for frameworks and executors on an allot cluster.

Scheduler side: :class:`Scheduler` (callbacks) and :class:`SchedulerDriver`
(actions); executor side: :class:`Executor` and :class:`ExecutorDriver`. The
messages are the Protocol Buffers of ``proto/allot.proto`` (``allot.wire``).
"""

from . import validate
from ._wire import wire
from .executor import Executor, ExecutorDriver
from .resources import fits, parse_resources, scalars
from .link import Backoff, Endpoint, Leader, Link, LinkError, TlsFiles, parse_endpoint
from .scheduler import (Filters, FrameworkInfo, NotRegistered, Offer, Scheduler, SchedulerDriver,
                        StandingFilters, TaskInfo, TaskRef, TaskStatus)

__all__ = [
    "wire", "Executor", "ExecutorDriver", "Backoff", "Endpoint", "Leader", "Link", "LinkError",
    "TlsFiles", "parse_endpoint", "Filters", "FrameworkInfo", "NotRegistered", "Offer",
    "Scheduler", "SchedulerDriver", "StandingFilters", "TaskInfo", "TaskRef", "TaskStatus",
    "fits", "parse_resources", "scalars", "validate",
]
