#!/usr/bin/env python3
"""A launch probe for bench/hog: while a hog phase runs, launch a short
task in a new executor every --interval-ms (each an allot-execute of its own:
a new framework, hence a new executor and container: prepare, clone, isolate,
and when it ends, the reap and cleanup), bounded by --duration and
--max-launches, at most --in-flight at a time (a launch due while that many
are running is skipped and counted). It reports:

- the launch latency the framework sees: from allot-execute's "task ...
  launching" (the offer accepted) to its "task ... RUNNING", and from the
  process's start to RUNNING (registration and offer included);
- from the agent's own /metrics, scraped before and after: per loop section
  (agent/agent_sections.h: "launcher start", "launch", "prepare cgroups/mem",
  "reaped", "cleanup cgroups/cpu", ...) the runs during the phase and their
  distribution (allot_agent_loop_section_seconds, by the difference of the
  two scrapes: p50/p99 as the upper bound of their bucket, the count past
  5 ms exactly, the longest run exactly when it was the longest since the
  agent started, else the bucket it lies in), and the agent's RunTask ->
  TASK_RUNNING histogram (allot_agent_launch_seconds) likewise.

  launch_probe.py --execute BIN --master HOST:PORT --metrics-port PORT
                  [--interval-ms 250] [--duration 30] [--max-launches 200]
                  [--in-flight 4] [--resources "cpus:0.1;mem:32"]
                  [--command true] [--name probe] > probe.json

--summarize FILE.json prints the phase's summary lines (as report.py does).
Everything it starts ends before it exits (SIGINT, then SIGKILL after 10 s).
"""
import argparse
import json
import math
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

OVER_MS = 5.0  # the brief's threshold for a loop section
STDBUF = ['stdbuf', '-oL'] if shutil.which('stdbuf') else []

SAMPLE = re.compile(r'^(\w+)\{([^}]*)\} (\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """{(name, frozenset(labels)): value} of every sample in the text format."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if m:
            name, labels, value = m.group(1), dict(LABEL.findall(m.group(2))), m.group(3)
        else:
            name, _, value = line.partition(' ')
            labels = {}
        try:
            out[(name, frozenset(labels.items()))] = float(value)
        except ValueError:
            continue
    return out


def scrape(port):
    with urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics', timeout=10) as r:
        return parse_metrics(r.read().decode())


def histograms(samples, name, by=None):
    """{label value of `by` (or '' without labels): {'buckets': [(le, cumulative)], 'count', 'sum'}}."""
    out = {}
    for (metric, labels), value in samples.items():
        labels = dict(labels)
        key = labels.get(by, '') if by else ''
        if metric == name + '_bucket':
            le = math.inf if labels['le'] == '+Inf' else float(labels['le'])
            out.setdefault(key, {'buckets': [], 'count': 0, 'sum': 0.0})['buckets'].append((le, value))
        elif metric in (name + '_count', name + '_sum'):
            out.setdefault(key, {'buckets': [], 'count': 0, 'sum': 0.0})[metric[len(name) + 1:]] = value
    for h in out.values():
        h['buckets'].sort()
    return out


def difference(after, before):
    """after - before, bucket by bucket (a histogram absent before counts as empty)."""
    prior = dict(before['buckets']) if before else {}
    return {'buckets': [(le, c - prior.get(le, 0)) for le, c in after['buckets']],
            'count': after['count'] - (before['count'] if before else 0),
            'sum': after['sum'] - (before['sum'] if before else 0.0)}


def bucket_of(h, rank):
    """(lower, upper) bound in ms of the bucket holding the rank-th run (1-based)."""
    lower = 0.0
    for le, cumulative in h['buckets']:
        if cumulative >= rank:
            return lower, le * 1000
        lower = le * 1000
    return lower, math.inf


def distribution(h, longest_before=None, longest_after=None):
    n = int(h['count'])
    if n <= 0:
        return None
    over = n - next((c for le, c in h['buckets'] if abs(le * 1000 - OVER_MS) < 1e-9), n)
    d = {'runs': n, 'mean_ms': round(h['sum'] * 1000 / n, 3),
         'p50_le_ms': bucket_of(h, math.ceil(0.5 * n))[1],
         'p99_le_ms': bucket_of(h, math.ceil(0.99 * n))[1],
         f'over_{OVER_MS:g}ms': int(over)}
    if longest_after is not None and longest_after > (longest_before or 0):
        d['max_ms'] = round(longest_after * 1000, 3)   # a new longest: this phase's
    else:
        lo, hi = bucket_of(h, n)
        d['max_in_ms'] = [lo, hi]
    return d


def section_report(before, after):
    name = 'allot_agent_loop_section_seconds'
    hb, ha = histograms(before, name, 'section'), histograms(after, name, 'section')
    longest = 'allot_agent_loop_section_longest_seconds'
    out = {}
    for section, h in sorted(ha.items()):
        key = frozenset({('section', section)})
        d = distribution(difference(h, hb.get(section)), before.get((longest, key)), after.get((longest, key)))
        if d:
            out[section] = d
    return out


def percentile(values, q):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def latency_summary(values):
    if not values:
        return None
    return {'n': len(values), 'p50_ms': round(percentile(values, 0.5), 2),
            'p99_ms': round(percentile(values, 0.99), 2), 'max_ms': round(max(values), 2)}


class Launch:
    def __init__(self, proc, started):
        self.proc = proc
        self.started = started
        self.launching = None
        self.running = None
        self.buffer = b''
        self.lines = []


def run_probe(args):
    before = scrape(args.metrics_port)
    sel = selectors.DefaultSelector()
    live, done = [], []
    started = skipped = 0
    t0 = time.monotonic()
    deadline = t0 + args.duration
    next_at = t0

    def read(launch):
        chunk = os.read(launch.proc.stdout.fileno(), 65536)
        if not chunk:
            sel.unregister(launch.proc.stdout)
            return
        now = time.monotonic()
        launch.buffer += chunk
        while b'\n' in launch.buffer:
            line, launch.buffer = launch.buffer.split(b'\n', 1)
            text = line.decode(errors='replace')
            if len(launch.lines) < 20:
                launch.lines.append(text)
            if launch.launching is None and re.match(r'task \S+ launching', text):
                launch.launching = now
            if launch.running is None and re.match(r'task \S+ RUNNING', text):
                launch.running = now

    def reap():
        for launch in list(live):
            if launch.proc.poll() is not None:
                while launch.proc.stdout in sel.get_map():
                    read(launch)
                live.remove(launch)
                done.append(launch)

    while True:
        now = time.monotonic()
        if now >= deadline and not live:
            break
        if now < deadline and now >= next_at and started < args.max_launches:
            next_at += args.interval_ms / 1000
            if len(live) >= args.in_flight:
                skipped += 1
            else:
                # Line-buffered (allot-execute flushes its state lines, not
                # "launching"): each line's time is when it was printed.
                cmd = STDBUF + [args.execute, '--master', args.master, '--name', f'{args.name}-{started}',
                       '--resources', args.resources, '--command', args.command,
                       '--timeout', str(args.launch_timeout)]
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
                os.set_blocking(proc.stdout.fileno(), False)
                launch = Launch(proc, time.monotonic())
                sel.register(proc.stdout, selectors.EVENT_READ, launch)
                live.append(launch)
                started += 1
        if now >= deadline + args.launch_timeout + 10:
            for launch in live:
                launch.proc.send_signal(signal.SIGINT)
            end = time.monotonic() + 10
            while live and time.monotonic() < end:
                time.sleep(0.1)
                reap()
            for launch in live:
                launch.proc.kill()
                launch.proc.wait()
                done.append(launch)
            live.clear()
            break
        wait = max(0.0, min(next_at - time.monotonic(), 0.1)) if now < deadline else 0.1
        for key, _ in sel.select(timeout=wait):
            read(key.data)
        reap()
        if started >= args.max_launches and not live:
            break
    after = scrape(args.metrics_port)

    ok = [l for l in done if l.running is not None]
    failed = [l for l in done if l.running is None or l.proc.returncode != 0]
    agent_launch = histograms(after, 'allot_agent_launch_seconds').get('')
    agent_launch_before = histograms(before, 'allot_agent_launch_seconds').get('')
    return {
        'interval_ms': args.interval_ms, 'duration_s': args.duration, 'launches': started,
        'skipped': skipped, 'running': len(ok), 'failed': len(failed),
        'failures': [' | '.join(l.lines[-3:]) for l in failed][:5],
        'framework_launch': latency_summary([(l.running - l.launching) * 1000 for l in ok if l.launching]),
        'framework_start_to_running': latency_summary([(l.running - l.started) * 1000 for l in ok]),
        'agent_launch': distribution(difference(agent_launch, agent_launch_before)) if agent_launch else None,
        'sections': section_report(before, after),
    }


# The sections the probe is about, first in the summary (the rest follow).
FOCUS = ('launcher start', 'launch', 'prepare', 'isolate', 'reaped', 'cleanup', 'executor exit')


def summarize(probe, indent='    '):
    """Lines for the report: the probe's launches and the focus sections."""
    lines = []
    fl, sr = probe.get('framework_launch'), probe.get('framework_start_to_running')
    head = (f"{probe['launches']} launches every {probe['interval_ms']} ms ({probe['running']} RUNNING, "
            f"{probe['failed']} failed, {probe['skipped']} skipped: {probe.get('in_flight', '?')} in flight)")
    lines.append(indent + head)
    if fl:
        lines.append(indent + f"framework launch (accepted -> RUNNING) p50 {fl['p50_ms']} p99 {fl['p99_ms']} "
                              f"max {fl['max_ms']} ms; start -> RUNNING p50 {sr['p50_ms']} max {sr['max_ms']} ms")
    al = probe.get('agent_launch')
    if al:
        lines.append(indent + f"agent RunTask -> RUNNING: {al['runs']} runs, p50 <= {al['p50_le_ms']:g} ms, "
                              f"p99 <= {al['p99_le_ms']:g} ms")
    sections = probe.get('sections', {})
    def order(name):
        for i, prefix in enumerate(FOCUS):
            if name == prefix or name.startswith(prefix + ' '):
                return (i, name)
        return (len(FOCUS), name)
    for name in sorted(sections, key=order):
        if order(name)[0] == len(FOCUS):
            continue
        d = sections[name]
        top = f"max {d['max_ms']:g} ms" if 'max_ms' in d else \
            f"max in ({d['max_in_ms'][0]:g}, {d['max_in_ms'][1]:g}] ms"
        lines.append(indent + f"  {name:<24} {d['runs']:>5} runs  mean {d['mean_ms']:7.3f}  "
                              f"p50 <= {d['p50_le_ms']:g}  p99 <= {d['p99_le_ms']:g}  "
                              f"> {OVER_MS:g} ms: {d[f'over_{OVER_MS:g}ms']}  {top}")
    for f in probe.get('failures', [])[:2]:
        lines.append(indent + f"  failed: {f[:200]}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--execute')
    ap.add_argument('--master')
    ap.add_argument('--metrics-port', type=int)
    ap.add_argument('--interval-ms', type=float, default=250)
    ap.add_argument('--duration', type=float, default=30)
    ap.add_argument('--max-launches', type=int, default=200)
    ap.add_argument('--in-flight', type=int, default=4)
    ap.add_argument('--resources', default='cpus:0.1;mem:32')
    ap.add_argument('--command', default='true')
    ap.add_argument('--name', default='probe')
    ap.add_argument('--launch-timeout', type=float, default=30)
    ap.add_argument('--summarize', metavar='FILE')
    args = ap.parse_args()
    if args.summarize:
        print('\n'.join(summarize(json.load(open(args.summarize)))))
        return 0
    if not (args.execute and args.master and args.metrics_port):
        ap.error('--execute, --master and --metrics-port are required')
    if args.interval_ms <= 0 or args.duration <= 0 or args.max_launches <= 0 or args.in_flight <= 0:
        ap.error('--interval-ms, --duration, --max-launches and --in-flight must be positive')
    result = run_probe(args)
    result['in_flight'] = args.in_flight
    result['name'] = args.name
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == '__main__':
    sys.exit(main())
