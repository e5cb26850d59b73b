#!/usr/bin/env python3
"""Open-loop HTTP load generator for the hog benchmark (python3 stdlib only).

Sends GET requests at a fixed rate on a fixed schedule (request i is due at
start + i/rate) whatever the server does, each on a new connection
(Connection: close). Latency is measured from the request's *scheduled* send
time to the last byte of the response, so a stalled server is charged for the
requests queued behind it (no coordinated omission).

One thread, non-blocking sockets and select(2): it sleeps in the
selector until the next request is due or a response arrives (no busy
polling, no thread hand-offs). --fifo N runs it at SCHED_FIFO N only while
it sends and receives (the timing window): its start-up before and its
statistics after run as an ordinary process, so that a real-time client
preempts the machine's other tasks only for the few hundred microseconds
each request costs it. --cpus pins it (e.g. away from the web server's CPU)
for the same window only: pinned at SCHED_OTHER to a CPU a hog's executor
saturates, its statistics after waited behind the hog (allot.slice's weight
at the top level is a hundred times a process's outside it: ~1 % of that
CPU), and the phase took 160 s instead of 40, until the hog's own
--kill-after ended it.

Output: one line per request "due_offset_s latency_us status" in --samples,
and a JSON summary on stdout (mean/p50/p90/p99/max in ms, throughput, and
the client's own health: how late it sent, the CPU it used in the window).
"""
import argparse
import errno
import json
import os
import resource
import selectors
import socket
import sys
import time

kInflightMax = 900         # connections open at once (select(): fds below 1024); more wait in the
                           # client, still timed from their due time
kRecvBytes = 65536


class Request:
    __slots__ = ("index", "due", "sock", "head", "sent")

    def __init__(self, index, due):
        self.index, self.due = index, due
        self.sock, self.head, self.sent = None, b"", False


def percentile(sortedValues, p):
    if not sortedValues:
        return float("nan")
    k = min(len(sortedValues) - 1, max(0, int(round(p / 100.0 * len(sortedValues) + 0.5)) - 1))
    return sortedValues[k]


def status(head):
    parts = head.split(b" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        return -2
    return int(parts[1])


class Client:
    def __init__(self, args, count):
        self.args = args
        self.results = [None] * count        # (due, latency_s, status)
        # select(2), not epoll: its timeout has microseconds (epoll_wait's has
        # milliseconds, rounded up: every send up to 1 ms late, charged to the server).
        self.sel = selectors.SelectSelector()
        self.open = {}                       # fd -> Request
        self.request = (f"GET {args.path} HTTP/1.1\r\nHost: {args.host}:{args.port}\r\n"
                        "Connection: close\r\nUser-Agent: allot-hog-loadgen\r\n\r\n").encode()
        self.sendLate = []                   # seconds between due and connect(), per request

    def finish(self, r, code):
        if r.sock is not None:
            self.sel.unregister(r.sock)
            del self.open[r.sock.fileno()]
            r.sock.close()
            r.sock = None
        self.results[r.index] = (r.due, time.monotonic() - r.due, code)

    def start(self, r, now):
        self.sendLate.append(now - r.due)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        err = s.connect_ex((self.args.host, self.args.port))
        r.sock = s
        self.open[s.fileno()] = r
        self.sel.register(s, selectors.EVENT_WRITE, r)
        if err not in (0, errno.EINPROGRESS):
            self.finish(r, -3)

    def ready(self, r, mask):
        s = r.sock
        try:
            if not r.sent:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    return self.finish(r, -3)
                s.sendall(self.request)    # ~120 bytes into an empty socket buffer: never partial
                r.sent = True
                self.sel.modify(s, selectors.EVENT_READ, r)
                return None
            while True:
                chunk = s.recv(kRecvBytes)
                if not chunk:
                    return self.finish(r, status(r.head))
                if len(r.head) < 16:
                    r.head += chunk[:16]
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return self.finish(r, -3)

    def expire(self, now):
        for r in [r for r in self.open.values() if now - r.due >= self.args.timeout]:
            self.finish(r, -1)

    def run(self, start, count):
        rate, nextIndex, pending = self.args.rate, 0, []
        lastDue = start + (count - 1) / rate
        while True:
            now = time.monotonic()
            while nextIndex < count and start + nextIndex / rate <= now:
                pending.append(Request(nextIndex, start + nextIndex / rate))
                nextIndex += 1
            while pending and len(self.open) < kInflightMax:
                self.start(pending.pop(0), now)
            if nextIndex >= count and not pending and not self.open:
                return
            if now > lastDue + self.args.timeout + 1:
                for r in list(self.open.values()):
                    self.finish(r, -1)
                return
            wake = start + nextIndex / rate if nextIndex < count else now + 0.1
            if self.open:
                wake = min(wake, min(r.due for r in self.open.values()) + self.args.timeout)
            for key, mask in self.sel.select(max(0.0, wake - time.monotonic())):
                self.ready(key.data, mask)
            self.expire(time.monotonic())


def setFifo(priority):
    if priority:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))


def setOther():
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def run(args):
    total = int(args.rate * args.duration)
    warm = int(args.rate * args.warmup)
    anyCpu = os.sched_getaffinity(0)
    if args.cpus:
        os.sched_setaffinity(0, args.cpus)
    windowCpus = sorted(os.sched_getaffinity(0))
    client = Client(args, warm + total)
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.time()))
    setFifo(args.fifo)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic() + 0.05
    client.run(start, warm + total)
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    windowS = time.monotonic() - start
    setOther()
    os.sched_setaffinity(0, anyCpu)   # the statistics may run on any CPU (module doc)

    measured = client.results[warm:]
    sendLate = sorted(client.sendLate[warm:])
    ok = []
    errors = 0
    lost = 0
    with open(args.samples, "w") if args.samples else open(os.devnull, "w") as out:
        for r in measured:
            if r is None:
                lost += 1
                continue
            due, latency, code = r
            out.write(f"{due - start:.6f} {latency * 1e6:.0f} {code}\n")
            if code == 200:
                ok.append(latency * 1e3)
            else:
                errors += 1
    ok.sort()
    # Throughput: answered requests over the span from the first measured
    # due time to the last measured completion.
    firstDue = start + warm / args.rate
    lastDone = max((r[0] + r[1] for r in measured if r is not None), default=firstDue)
    measuredSpan = max(1e-9, lastDone - firstDue)
    cpuS = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    summary = {
        "sent": total,
        "ok": len(ok),
        "errors": errors + lost,
        "mean_ms": sum(ok) / len(ok) if ok else float("nan"),
        "p50_ms": percentile(ok, 50),
        "p90_ms": percentile(ok, 90),
        "p99_ms": percentile(ok, 99),
        "p999_ms": percentile(ok, 99.9),
        "max_ms": ok[-1] if ok else float("nan"),
        "throughput_rps": len(ok) / measuredSpan,
        "rate_rps": args.rate,
        "client_send_late_p99_ms": percentile(sendLate, 99) * 1e3 if sendLate else float("nan"),
        "client_send_late_max_ms": sendLate[-1] * 1e3 if sendLate else float("nan"),
        "client_cpu_ms": cpuS * 1e3,
        "client_cpu_share": cpuS / max(1e-9, windowS),
        "client_cpus": windowCpus,
        "client_fifo": args.fifo,
    }
    json.dump(summary, sys.stdout)
    sys.stdout.write("\n")
    return 0


def cpuList(text):
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/")
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second")
    parser.add_argument("--duration", type=float, default=30.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds first")
    parser.add_argument("--timeout", type=float, default=10.0, help="per-request timeout, s")
    parser.add_argument("--samples", help="file for per-request samples")
    parser.add_argument("--fifo", type=int, default=0, help="SCHED_FIFO priority in the timing window (0: none)")
    parser.add_argument("--cpus", type=cpuList, help="CPU list to run on (e.g. 1 or 1-3)")
    parser.add_argument("--start-at", type=float, help="wall-clock time (s since the epoch) to start at, "
                        "so that the interpreter's start-up comes before the measurement")
    args = parser.parse_args()
    if args.rate <= 0 or args.duration <= 0 or args.warmup < 0:
        parser.error("--rate and --duration must be positive, --warmup not negative")
    if not 0 <= args.fifo <= 99:
        parser.error("--fifo is 0 (none) or 1-99")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
