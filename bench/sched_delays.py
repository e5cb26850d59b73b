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

    perf record -a -g -e sched:sched_switch --filter 'prev_pid == 1234 || next_pid == 1234' \
        -e sched:sched_waking --filter 'pid == 1234' \
        -e timer:hrtimer_start --filter 'function.function == timerfd_tmrproc' \
        -e timer:hrtimer_expire_entry --filter 'function.function == timerfd_tmrproc' -o F
    perf script -i F -F comm,tid,cpu,time,event,trace,ip,sym | sched_delays.py --sleeps-of 1234 [--sleep-ms 6]

--sleeps-of: one thread's sleeps instead (off the CPU, not runnable: from
its switch-out until its wakeup), for a loop that should never sleep longer
than its own timer's period: every sleep of --sleep-ms or more with the
kernel stack it slept in (the idle epoll_wait, or a call that blocked: a
page fault, a lock, a write) and what woke it; when the wakeup came from a
timerfd's expiry, how late that expiry was against the time it was armed
for (the timer interrupt's own lateness: on a virtual machine, the host's).
Also the lateness of every timerfd expiry in the trace (p50 / p99 / max).

    sched_delays.py --sample-steal F [--every-ms 10] [--seconds 600] [--fifo N]
    ... | sched_delays.py --track ... | --sleeps-of ... --steal-timeline F

The host's steal time (a virtual machine's vCPUs runnable on the host but
not running; /proc/stat's 8th value per cpuN line, USER_HZ ticks): the
sampler writes "MONOTONIC_S STEAL_CPU0 STEAL_CPU1 ..." every --every-ms
until --seconds pass or SIGTERM/SIGINT, at most kStealSamplesMax lines. With
--steal-timeline (a sampler's file; record the trace with perf's
`-k CLOCK_MONOTONIC` so both share a clock) every listed wait and sleep gets
the steal per CPU over it (from the last sample at or before its start to
the first at or after its end: up to one sample period more on each side,
and /proc/stat's own 10 ms granularity), and the result the whole
timeline's steal per CPU. Malformed lines are counted and skipped.
"""
import argparse
import bisect
import collections
import json
import os
import re
import signal
import sys
import time

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
                g.longest.append((delay, cpu, top.most_common(3), t))


def report(groups, attributeMs, timeline=None):
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
            "longest": [withSteal({"ms": ms(x[0]), "cpu": x[1], "who": {k: ms(v) for k, v in x[2]},
                                   "at": round(x[3] - x[0], 6)}, timeline, x[3] - x[0], x[3])
                        for x in longest],
        }
    if timeline is not None:
        out["steal"] = timelineSummary(timeline)
    return out


def text(result, attributeMs):
    lines = []
    for name, r in result.items():
        if name == "steal":
            lines.append(timelineText(r))
            continue
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
            lines.append(f"  {x['ms']:.1f} ms on cpu {x['cpu']}: {who}{stealText(x)}")
    return "\n".join(lines)


kHrtimer = re.compile(r"hrtimer=(?P<timer>\S+) function=\S+ (?:expires=(?P<expires>\d+)|now=(?P<now>\d+))")
kAnyHead = re.compile(r"\[(?P<cpu>\d+)\]\s+(?P<time>\d+\.\d+):\s+(?:sched|timer):(?P<event>\w+):")
kIdleFrames = ("do_epoll_wait", "io_cqring_wait")
kSkipFrames = ("__schedule", "schedule", "__traceiter_sched_switch", "__sched_text_start")


def sleeps(lines, tid, sleepS, timeline=None):
    """The sleeps of thread `tid` of sleepS or more (see --sleeps-of)."""
    events = []                     # [cpu, time, event, text, frames]
    for line in lines:
        head = kAnyHead.search(line)
        if head:
            events.append([int(head["cpu"]), float(head["time"]), head["event"], line[head.end():], []])
        elif events and line.strip():
            parts = line.strip().split(None, 1)   # "ffffffff81234567 schedule+0x5e ([kernel.kallsyms])"
            if len(parts) == 2:
                events[-1][4].append(parts[1].split("+", 1)[0].split(" (", 1)[0])
    armed = {}                      # hrtimer -> expires (ns, the timer's clock)
    lastExpiry = {}                 # cpu -> (trace time, lateness s)
    timerLate = []
    out, waking = None, None
    found, count, idleCount = [], 0, 0
    for cpu, t, event, text, frames in events:
        if event in ("hrtimer_start", "hrtimer_expire_entry"):
            m = kHrtimer.search(text)
            if not m:
                continue
            if m["expires"] is not None:
                armed[m["timer"]] = int(m["expires"])
            elif m["timer"] in armed:
                expires = armed.pop(m["timer"])
                if expires > 10**12:      # not an "expire now" ({0, 1} absolute)
                    late = (int(m["now"]) - expires) / 1e9
                    timerLate.append(late)
                    lastExpiry[cpu] = (t, late)
            continue
        if event == "sched_waking":
            m = kWakeup.search(text)
            if m and int(m["pid"]) == tid and out and waking is None:
                expiry = lastExpiry.get(cpu)
                waking = (t, cpu, expiry[1] if expiry and 0 <= t - expiry[0] < 0.0005 else None)
            continue
        if event != "sched_switch":
            continue
        m = kSwitch.search(text)
        if not m:
            continue
        if int(m["ppid"]) == tid:
            out = ((t, m["pstate"], [f for f in frames if f not in kSkipFrames], cpu)
                   if not m["pstate"].startswith("R") else None)
            waking = None
        elif int(m["npid"]) == tid and out:
            end = waking[0] if waking else t
            slept = end - out[0]
            if slept >= sleepS:
                count += 1
                idle = any(f in kIdleFrames for f in out[2])
                idleCount += idle
                found.append({"ms": round(slept * 1e3, 3), "at": round(out[0], 6), "end": round(end, 6),
                              "state": out[1], "idle_wait": idle, "cpu": out[3],
                              "woken_on_cpu": waking[1] if waking else None,
                              "stack": out[2][:8],
                              "woken_by_timerfd_late_ms": round(waking[2] * 1e3, 3) if waking and waking[2] is not None else None,
                              "waking_seen": waking is not None})
            out, waking = None, None
    late = sorted(timerLate)
    ms = lambda s: round(s * 1e3, 3)
    longest = [withSteal(x, timeline, x["at"], x["end"]) for x in sorted(found, key=lambda x: -x["ms"])[:5]]
    result = {"sleeps_over_ms": round(sleepS * 1e3, 3), "count": count, "in_idle_wait": idleCount,
            "longest": longest,
            "timerfd_expiries": len(late),
            "timerfd_late_p50_ms": ms(percentile(late, 0.5)) if late else None,
            "timerfd_late_p99_ms": ms(percentile(late, 0.99)) if late else None,
            "timerfd_late_max_ms": ms(late[-1]) if late else None}
    if timeline is not None:
        result["steal"] = timelineSummary(timeline)
    return result


def sleepsText(r):
    lines = [f"sleeps of {r['sleeps_over_ms']:g} ms or more: {r['count']} ({r['in_idle_wait']} in the idle wait); "
             f"timerfd expiries {r['timerfd_expiries']}, late p50 {r['timerfd_late_p50_ms']} / "
             f"p99 {r['timerfd_late_p99_ms']} / max {r['timerfd_late_max_ms']} ms"]
    for x in r["longest"]:
        woke = (f"woken by a timerfd expiry {x['woken_by_timerfd_late_ms']:.2f} ms late"
                if x["woken_by_timerfd_late_ms"] is not None else
                "woken by something else" if x["waking_seen"] else "its wakeup not seen")
        lines.append(f"  {x['ms']:.2f} ms ({x['state']}, cpu {x['cpu']}), {woke}: "
                     f"{' < '.join(x['stack'][:5]) or 'no stack'}{stealText(x)}")
    if "steal" in r:
        lines.append(timelineText(r["steal"]))
    return "\n".join(lines)


# The host's steal time (see --sample-steal).
kStealSamplesMax = 400_000      # 10 ms for 66 minutes
kStealSecondsMax = 4 * 3600


def stealTicks(procStat):
    """The steal column of each cpuN line of /proc/stat's text, as a list by
    CPU number (None for a CPU without a line); ValueError when a cpuN line
    is malformed or there is none."""
    ticks = {}
    for line in procStat.splitlines():
        if not (line.startswith("cpu") and line[3:4].isdigit()):
            continue
        fields = line.split()
        cpu = fields[0][3:]
        if not cpu.isdigit() or len(fields) < 9 or not all(f.isdigit() for f in fields[1:9]):
            raise ValueError(f"malformed cpu line: {line[:60]!r}")
        ticks[int(cpu)] = int(fields[8])
    if not ticks:
        raise ValueError("no cpuN line")
    return [ticks.get(c) for c in range(max(ticks) + 1)]


def sampleSteal(out, everyS, seconds, path="/proc/stat", fifo=0):
    """Writes a steal timeline to the file `out` (see --sample-steal);
    returns the number of samples. A sample whose read fails is skipped.
    fifo > 0: SCHED_FIFO at that priority once started (the interpreter's
    start-up at FIFO kept its CPU's other threads waiting for 50-70 ms)."""
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    seconds = min(seconds, kStealSecondsMax)
    fd = os.open(path, os.O_RDONLY)
    count = 0
    with open(out, "w", buffering=1 << 16) as f:
        if fifo > 0:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(fifo))
        end = time.monotonic() + seconds
        due = time.monotonic()
        while not stop and count < kStealSamplesMax:
            now = time.monotonic()
            if now >= end:
                break
            try:
                ticks = stealTicks(os.pread(fd, 1 << 16, 0).decode("ascii", "replace"))
            except ValueError:
                ticks = None
            if ticks is not None:
                f.write(f"{now:.6f} " + " ".join("-" if t is None else str(t) for t in ticks) + "\n")
                count += 1
            due += everyS
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                due = time.monotonic()   # behind (the sampler itself was kept from a CPU): no burst
    os.close(fd)
    return count


class Timeline:
    """A steal timeline read back: times, steal per CPU in ms at each."""

    def __init__(self, lines, tickMs=None):
        self.tickMs = tickMs or 1000 / os.sysconf("SC_CLK_TCK")
        self.times, self.steal, self.malformed = [], [], 0
        for line in lines:
            fields = line.split()
            if not fields:
                continue
            try:
                t = float(fields[0])
                steal = [None if v == "-" else int(v) * self.tickMs for v in fields[1:]]
            except ValueError:
                self.malformed += 1
                continue
            if not steal or (self.times and t < self.times[-1]):
                self.malformed += 1
                continue
            self.times.append(t)
            self.steal.append(steal)

    def between(self, start, end):
        """Steal per CPU in ms from the last sample at or before `start` to the
        first at or after `end` (the nearest samples inside when the timeline
        does not reach that far); {} without two samples."""
        if len(self.times) < 2 or end < start:
            return {}
        i = max(bisect.bisect_right(self.times, start) - 1, 0)
        j = min(bisect.bisect_left(self.times, end), len(self.times) - 1)
        if j <= i:
            j = min(i + 1, len(self.times) - 1)
            i = j - 1
        first, last = self.steal[i], self.steal[j]
        out = {}
        for cpu in range(min(len(first), len(last))):
            if first[cpu] is not None and last[cpu] is not None:
                out[cpu] = round(max(last[cpu] - first[cpu], 0.0), 3)
        return out

    def span(self, i, j):
        return self.times[j] - self.times[i] if self.times else 0.0


def withSteal(entry, timeline, start, end):
    """`entry` with the steal per CPU over [start, end] ("steal_ms"), when
    there is a timeline."""
    if timeline is None:
        return entry
    steal = timeline.between(start, end)
    entry["steal_ms"] = {str(c): v for c, v in steal.items()}
    return entry


def timelineSummary(timeline):
    n = len(timeline.times)
    gaps = [b - a for a, b in zip(timeline.times, timeline.times[1:])]
    return {"samples": n, "malformed": timeline.malformed,
            "seconds": round(timeline.span(0, n - 1), 3) if n else 0,
            "sample_gap_max_ms": round(max(gaps) * 1e3, 3) if gaps else None,
            "per_cpu_ms": {str(c): v for c, v in
                           (timeline.between(timeline.times[0], timeline.times[-1]) if n >= 2 else {}).items()}}


def stealText(entry):
    if "steal_ms" not in entry:
        return ""
    return "; host steal " + (", ".join(f"cpu{c} {v:.0f} ms" for c, v in entry["steal_ms"].items()) or "unknown")


def timelineText(s):
    per = ", ".join(f"cpu{c} {v:.0f} ms" for c, v in s["per_cpu_ms"].items()) or "unknown"
    return (f"host steal over the timeline ({s['samples']} samples, {s['seconds']:.1f} s, longest gap "
            f"{s['sample_gap_max_ms']} ms, {s['malformed']} malformed lines): {per}")


def parseTrack(spec):
    name, _, what = spec.partition("=")
    kind, _, value = what.partition(":")
    if not name or kind not in ("comm", "tid") or not value:
        raise argparse.ArgumentTypeError(f"--track NAME=comm:COMM or NAME=tid:N, not {spec!r}")
    return Group(name, kind, int(value) if kind == "tid" else value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--track", type=parseTrack, action="append", default=[])
    parser.add_argument("--sleeps-of", type=int, help="a thread id: its sleeps instead (see above)")
    parser.add_argument("--sleep-ms", type=float, default=6.0)
    parser.add_argument("--attribute-ms", type=float, default=5.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sample-steal", metavar="FILE", help="write a steal timeline (see above) and exit")
    parser.add_argument("--every-ms", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--fifo", type=int, default=0, help="the sampler at SCHED_FIFO N once started (root)")
    parser.add_argument("--steal-timeline", metavar="FILE", help="a --sample-steal file: steal beside each wait")
    parser.add_argument("--steal-summary", action="store_true",
                        help="print the --steal-timeline's summary (JSON) and exit")
    parser.add_argument("input", nargs="?", help="perf script text (default: stdin)")
    args = parser.parse_args()
    if args.sample_steal:
        if not 1 <= args.every_ms <= 10_000 or not 0 < args.seconds <= kStealSecondsMax or not 0 <= args.fifo <= 99:
            parser.error(f"--every-ms 1..10000, --seconds up to {kStealSecondsMax}, --fifo 0..99")
        n = sampleSteal(args.sample_steal, args.every_ms / 1e3, args.seconds, fifo=args.fifo)
        print(f"{n} steal samples in {args.sample_steal}", file=sys.stderr)
        return 0
    timeline = None
    if args.steal_timeline:
        with open(args.steal_timeline) as f:
            timeline = Timeline(f)
        if args.steal_summary:
            print(json.dumps(timelineSummary(timeline)))
            return 0
    if args.sleeps_of is not None:
        with (open(args.input) if args.input else sys.stdin) as f:
            result = sleeps(f, args.sleeps_of, args.sleep_ms / 1e3, timeline)
        print(json.dumps(result) if args.json else sleepsText(result))
        return 0
    if not args.track:
        parser.error("--track (or --sleeps-of) is required")
    with (open(args.input) if args.input else sys.stdin) as f:
        analyse(f, args.track, args.attribute_ms / 1e3)
    result = report(args.track, args.attribute_ms, timeline)
    print(json.dumps(result) if args.json else text(result, args.attribute_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
