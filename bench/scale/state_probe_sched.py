#!/usr/bin/env python3
"""Who held the CPUs while one thread waited for a CPU.

Reads `perf script -F comm,tid,cpu,time,event,trace` of sched:sched_switch
and sched:sched_wakeup (all CPUs) on stdin. For the thread --tid (the
master's loop thread), every wait from becoming runnable (woken, or
preempted while running) to running again; for the waits of --long-ms or
more, how long each other thread ran on any CPU meanwhile. Prints:

  waits=N total_ms=.. max_ms=.. over_<long>ms=K
  preempted_by comm:count,...     (who took the CPU from the thread)
  held_during_long_waits comm ms (share),...   (all CPUs, summed)
  long_wait at=<s> wait_ms=.. cpu0=comm ms,.. cpu1=..   (the longest few)
  cpu_time comm ms,...            (the whole trace, for context)
"""
import argparse
import collections
import re
import sys

LINE = re.compile(r'^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)$')
SWITCH = re.compile(r'prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> '
                    r'next_comm=(.*?) next_pid=(\d+) next_prio=\d+')
WAKEUP = re.compile(r'comm=(.*?) pid=(\d+) prio=\d+ target_cpu=(\d+)')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tid', type=int, required=True)
    ap.add_argument('--long-ms', type=float, default=5.0)
    ap.add_argument('--show', type=int, default=5)
    args = ap.parse_args()
    target = args.tid

    segments = []             # (cpu, start, end, tid, comm): who ran where
    current = {}              # cpu -> (tid, comm, since)
    waits = []                # (start, end, cpu it ran on next)
    preempted_by = collections.Counter()
    runnable_since = None
    first = last = None
    for line in sys.stdin:
        m = LINE.match(line)
        if not m:
            continue
        cpu, t, event, trace = int(m.group(3)), float(m.group(4)), m.group(5), m.group(6)
        first = t if first is None else first
        last = t
        if event.endswith('sched_wakeup'):
            w = WAKEUP.match(trace)
            if w and int(w.group(2)) == target and runnable_since is None:
                runnable_since = t
            continue
        if not event.endswith('sched_switch'):
            continue
        s = SWITCH.match(trace)
        if not s:
            continue
        prev_comm, prev_pid, prev_state = s.group(1), int(s.group(2)), s.group(3)
        next_comm, next_pid = s.group(4), int(s.group(5))
        if cpu in current:
            tid, comm, since = current[cpu]
            segments.append((cpu, since, t, tid, comm))
        elif first is not None:
            segments.append((cpu, first, t, prev_pid, prev_comm))
        current[cpu] = (next_pid, next_comm, t)
        if prev_pid == target and prev_state.startswith('R'):
            runnable_since = t
            preempted_by[next_comm] += 1
        if next_pid == target:
            if runnable_since is not None:
                waits.append((runnable_since, t, cpu))
            runnable_since = None
    for cpu, (tid, comm, since) in current.items():
        if last is not None:
            segments.append((cpu, since, last, tid, comm))

    def ms(x):
        return x * 1000.0

    total = sum(e - s for s, e, _ in waits)
    longest = max((e - s for s, e, _ in waits), default=0.0)
    long_waits = [w for w in waits if ms(w[1] - w[0]) >= args.long_ms]
    print('waits=%d total_ms=%.1f max_ms=%.2f over_%gms=%d trace_s=%.1f' %
          (len(waits), ms(total), ms(longest), args.long_ms, len(long_waits),
           (last - first) if first is not None else 0))
    print('preempted_by ' + (','.join('%s:%d' % kv for kv in preempted_by.most_common(8)) or '-'))

    segments.sort(key=lambda x: x[1])

    def held(start, end, per_cpu=False):
        out = collections.defaultdict(float)
        for cpu, s, e, tid, comm in segments:
            if s >= end:
                break
            o = min(e, end) - max(s, start)
            if o > 0 and tid != target:
                key = (cpu, comm if tid else 'idle') if per_cpu else (comm if tid else 'idle')
                out[key] += o
        return out

    heldsum = collections.defaultdict(float)
    for s, e, _ in long_waits:
        for k, v in held(s, e).items():
            heldsum[k] += v
    span = sum(e - s for s, e, _ in long_waits) * 2  # two CPUs' worth
    tops = sorted(heldsum.items(), key=lambda kv: -kv[1])[:8]
    print('held_during_long_waits ' + (', '.join(
        '%s %.1f ms (%.0f%%)' % (k, ms(v), 100 * v / span if span else 0) for k, v in tops) or '-'))
    for s, e, cpu in sorted(long_waits, key=lambda w: w[0] - w[1])[:args.show]:
        per = held(s, e, per_cpu=True)
        cols = []
        for c in sorted({k[0] for k in per}):
            items = sorted(((k[1], v) for k, v in per.items() if k[0] == c), key=lambda kv: -kv[1])[:3]
            cols.append('cpu%d=%s' % (c, ','.join('%s %.1f' % (n, ms(v)) for n, v in items)))
        print('long_wait at=%.3f wait_ms=%.2f ran_on=cpu%d %s' % (s - (first or 0), ms(e - s), cpu, ' '.join(cols)))
    cputime = collections.defaultdict(float)
    for cpu, s, e, tid, comm in segments:
        cputime[comm if tid else 'idle'] += e - s
    print('cpu_time ' + ', '.join('%s %.0f ms' % (k, ms(v)) for k, v in
                                  sorted(cputime.items(), key=lambda kv: -kv[1])[:10]))


if __name__ == '__main__':
    main()
