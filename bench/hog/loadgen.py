#!/usr/bin/env python3
"""Open-loop HTTP load generator for the hog benchmark (python3 stdlib only).

Sends GET requests at a fixed rate on a fixed schedule (request i is due at
start + i/rate) whatever the server does, each on a new connection
(Connection: close). Latency is measured from the request's *scheduled* send
time to the last byte of the response, so a stalled server is charged for the
requests queued behind it (no coordinated omission).

The scheduler thread sleeps until each due time (clock_nanosleep through
time.sleep, no busy polling) and hands the request to a pool of blocking
workers; the client uses ~1-2% of a core at 100 requests/s.

Output: one line per request "due_offset_s latency_us status" in --samples,
and a JSON summary on stdout (mean/p50/p90/p99/max in ms, throughput).
"""
import argparse
import json
import queue
import socket
import sys
import threading
import time

kWorkersMax = 128          # concurrent requests in flight
kRecvBytes = 65536


def oneRequest(host, port, path, timeoutS):
    """Returns the HTTP status code, or a negative code for a client error."""
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
               "Connection: close\r\nUser-Agent: allot-hog-loadgen\r\n\r\n").encode()
    try:
        with socket.create_connection((host, port), timeout=timeoutS) as s:
            s.sendall(request)
            head = b""
            while True:
                chunk = s.recv(kRecvBytes)
                if not chunk:
                    break
                if len(head) < 16:
                    head += chunk[:16]
        parts = head.split(b" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            return -2
        return int(parts[1])
    except socket.timeout:
        return -1
    except OSError:
        return -3


def percentile(sortedValues, p):
    if not sortedValues:
        return float("nan")
    k = min(len(sortedValues) - 1, max(0, int(round(p / 100.0 * len(sortedValues) + 0.5)) - 1))
    return sortedValues[k]


def run(args):
    total = int(args.rate * args.duration)
    warm = int(args.rate * args.warmup)
    results = [None] * (warm + total)
    jobs = queue.Queue()

    def worker():
        while True:
            item = jobs.get()
            if item is None:
                return
            index, due = item
            status = oneRequest(args.host, args.port, args.path, args.timeout)
            results[index] = (due, time.monotonic() - due, status)

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(kWorkersMax)]
    for w in workers:
        w.start()
    start = time.monotonic() + 0.05
    for i in range(warm + total):
        due = start + i / args.rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        jobs.put((i, due))
    for _ in workers:
        jobs.put(None)
    deadline = time.monotonic() + args.timeout + 5
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))

    measured = results[warm:]
    ok = []
    errors = 0
    lost = 0
    with open(args.samples, "w") if args.samples else open("/dev/null", "w") as out:
        for r in measured:
            if r is None:
                lost += 1
                continue
            due, latency, status = r
            out.write(f"{due - start:.6f} {latency * 1e6:.0f} {status}\n")
            if status == 200:
                ok.append(latency * 1e3)
            else:
                errors += 1
    ok.sort()
    # Throughput: answered requests over the span from the first measured
    # due time to the last measured completion.
    firstDue = start + warm / args.rate
    lastDone = max((r[0] + r[1] for r in measured if r is not None), default=firstDue)
    measuredSpan = max(1e-9, lastDone - firstDue)
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
    }
    json.dump(summary, sys.stdout)
    sys.stdout.write("\n")
    return 0


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
    args = parser.parse_args()
    if args.rate <= 0 or args.duration <= 0 or args.warmup < 0:
        parser.error("--rate and --duration must be positive, --warmup not negative")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
