#!/usr/bin/env python3
"""Scheduling delays of chosen threads, and who ran while they waited.

    perf record -e sched:sched_switch -e sched:sched_waking -e sched:sched_wakeup_new -a -o F
    perf script -i F -F cpu,time,event,trace | sched_delays.py --track web=comm:apache2 \
        --track loop=tid:1234 [--attribute-ms 5] [--json]

A thread is waiting for a CPU from its wakeup (sched_waking, traced before
the wakeup can be seen on another CPU: sched_wakeup is traced after it and
may come after the woken thread's switch-in; or from the moment it was
preempted: switched out still runnable) until it is switched in. For each
--track group (comm:NAME, every thread with that name; tid:N, one thread)
it prints how long it ran, how many waits there were and their p50 / p99 /
max, and for the waits of --attribute-ms or more which tasks outside the
group ran on the CPU the thread then ran on during the wait (the CPU it
waited for), summed over those waits: the answer to "who kept it from a
CPU" (a web server process waiting behind its siblings is its own queue,
not counted there). Waits still open at the end of the trace are not
counted, nor those of a thread seen switched out before it was seen
switched in (events lost under load, perf's buffer full: "discarded").
Input: the text of `perf script` with the fields above (the default fields
work too).
"""
import argparse
import collections
import json
import re
import sys

kSwitch = re.compile(
    r"prev_comm=(?P<pcomm>.*?) prev_pid=(?P<ppid>\d+) prev_prio=\d+ prev_state=(?P<pstate>\S+) ==> "
    r"next_comm=(?P<ncomm>.*?) next_pid=(?P<npid>\d+) next_prio=\d+")
kWakeup = re.compile(r"comm=(?P<comm>.*?) pid=(?P<pid>\d+) prio=\d+ target_cpu=(?P<cpu>\d+)")
kHead = re.compile(r"\[(?P<cpu>\d+)\]\s+(?P<time>\d+\.\d+):\s+sched:(?P<event>sched_\w+):")


class Group:
    def __init__(self, name, kind, value):
        self.name, self.kind, self.value = name, kind, value
        self.delays = []                               # seconds
        self.ranS = 0.0                                # time on a CPU
        self.attributed = collections.Counter()        # "comm/pid" -> seconds
        self.attributedWaits = 0
        self.discarded = 0                             # waits whose end was not seen
        self.longest = []                              # (delay, cpu, top three)

    def matches(self, comm, tid):
        return comm == self.value if self.kind == "comm" else tid == self.value


class Waiter:
    __slots__ = ("group", "since", "tally")

    def __init__(self, group, since):
        self.group, self.since = group, since
        self.tally = collections.defaultdict(collections.Counter)   # cpu -> task -> s


def percentile(sortedValues, p):
    if not sortedValues:
        return float("nan")
    return sortedValues[min(len(sortedValues) - 1, int(p * len(sortedValues)))]


def analyse(lines, groups, attributeS):
    waiting = {}                    # tid -> Waiter
    running = {}                    # cpu -> (tid, comm, since)
    groupOf = {}                    # tid -> Group or None (cache)

    def group(comm, tid):
        if tid not in groupOf:
            groupOf[tid] = next((g for g in groups if g.matches(comm, tid)), None)
        return groupOf[tid]

    for line in lines:
        head = kHead.search(line)
        if not head:
            continue
        cpu, t, event = int(head["cpu"]), float(head["time"]), head["event"]
        if event in ("sched_waking", "sched_wakeup", "sched_wakeup_new"):
            m = kWakeup.search(line, head.end())
            if not m:
                continue
            tid = int(m["pid"])
            g = group(m["comm"], tid)
            if g and tid not in waiting and running.get(int(m["cpu"]), (None,))[0] != tid:
                waiting[tid] = Waiter(g, t)
            continue
        if event != "sched_switch":
            continue
        m = kSwitch.search(line, head.end())
        if not m:
            continue
        prevTid, nextTid = int(m["ppid"]), int(m["npid"])
        prev = running.get(cpu)
        since = prev[2] if prev and prev[0] == prevTid else None
        if since is not None:
            g = group(m["pcomm"], prevTid) if prevTid else None
            if g:
                g.ranS += t - since
            # The CPU idle while a thread waited: it was waiting for another
            # CPU (or for a migration), not behind anyone here.
            who = f"{m['pcomm']}/{prevTid}" if prevTid else "idle"
            for w in waiting.values():
                if w.group is g:
                    continue
                start = max(since, w.since)
                if t > start:
                    w.tally[cpu][who] += t - start
        running[cpu] = (nextTid, m["ncomm"], t)
        stale = waiting.pop(prevTid, None)
        if stale:   # it ran without a switch-in seen (events lost): not a wait
            stale.group.discarded += 1
        if m["pstate"].startswith("R"):
            g = group(m["pcomm"], prevTid)
            if g and prevTid not in waiting:
                waiting[prevTid] = Waiter(g, t)
        w = waiting.pop(nextTid, None)
        if w:
            delay = t - w.since
            g = w.group
            g.delays.append(delay)
            if delay >= attributeS:
                g.attributedWaits += 1
                top = w.tally.get(cpu, collections.Counter())
                g.attributed.update(top)
                g.longest.append((delay, cpu, top.most_common(3)))


def report(groups, attributeMs):
    out = {}
    for g in groups:
        d = sorted(g.delays)
        ms = lambda s: round(s * 1e3, 3)
        longest = sorted(g.longest, key=lambda x: -x[0])[:5]
        out[g.name] = {
            "waits": len(d),
            "p50_ms": ms(percentile(d, 0.50)) if d else None,
            "p99_ms": ms(percentile(d, 0.99)) if d else None,
            "max_ms": ms(d[-1]) if d else None,
            "total_ms": ms(sum(d)),
            "ran_ms": ms(g.ranS),
            "discarded": g.discarded,
            f"waits_over_{attributeMs:g}ms": g.attributedWaits,
            "who_ran_meanwhile_ms": {k: ms(v) for k, v in g.attributed.most_common(6)},
            "longest": [{"ms": ms(x[0]), "cpu": x[1], "who": {k: ms(v) for k, v in x[2]}} for x in longest],
        }
    return out


def text(result, attributeMs):
    lines = []
    for name, r in result.items():
        if not r["waits"]:
            lines.append(f"{name}: no waits seen")
            continue
        lines.append(f"{name}: {r['waits']} waits for a CPU, p50 {r['p50_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms, "
                     f"max {r['max_ms']:.3f} ms, total {r['total_ms']:.1f} ms, ran {r['ran_ms']:.1f} ms; "
                     f"{r[f'waits_over_{attributeMs:g}ms']} of {attributeMs:g} ms or more")
        if r["who_ran_meanwhile_ms"]:
            who = ", ".join(f"{k} {v:.1f} ms" for k, v in r["who_ran_meanwhile_ms"].items())
            lines.append(f"  ran on its CPU during those: {who}")
        for x in r["longest"][:3]:
            who = ", ".join(f"{k} {v:.1f}" for k, v in x["who"].items())
            lines.append(f"  {x['ms']:.1f} ms on cpu {x['cpu']}: {who}")
    return "\n".join(lines)


def parseTrack(spec):
    name, _, what = spec.partition("=")
    kind, _, value = what.partition(":")
    if not name or kind not in ("comm", "tid") or not value:
        raise argparse.ArgumentTypeError(f"--track NAME=comm:COMM or NAME=tid:N, not {spec!r}")
    return Group(name, kind, int(value) if kind == "tid" else value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--track", type=parseTrack, action="append", required=True)
    parser.add_argument("--attribute-ms", type=float, default=5.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("input", nargs="?", help="perf script text (default: stdin)")
    args = parser.parse_args()
    with (open(args.input) if args.input else sys.stdin) as f:
        analyse(f, args.track, args.attribute_ms / 1e3)
    result = report(args.track, args.attribute_ms)
    print(json.dumps(result) if args.json else text(result, args.attribute_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
