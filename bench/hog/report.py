#!/usr/bin/env python3
"""Turns the hog benchmark's phase summaries into its table and plot data.

Input: a JSON-lines file, one loadgen.py summary per phase plus its mode
(iso / noiso), phase (alone / cpu / mem / fork / disk) and hog outcome.
Output in --out: hog-results.txt (the table printed by run.sh),
hog-results.json (everything), hog-results.dat (gnuplot data).
Increases are over the victim alone under isolation (alone-iso): the same
allot task with the same resources and limits; the unisolated rows also give
the increase over alone-noiso.
"""
import argparse
import collections
import json
import math
import os
import re

kPaper = {("cpu", "iso"): "+30% (containers)", ("cpu", "noiso"): "+550% (none)"}
kPhaseNames = {"alone": "alone", "cpu": "CPU hog", "mem": "memory bomb",
               "fork": "fork bomb", "disk": "disk writer", "bare": "spinners outside allot"}


def pct(value, base):
    if not base or math.isnan(value) or math.isnan(base):
        return "n/a"
    return f"{(value / base - 1) * 100:+.0f}%"


def ratio(value, base):
    if not base or math.isnan(value) or math.isnan(base):
        return "n/a"
    return f"{value / base:.2f}x"


def loadPhases(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def table(rows, baseline, noisoBaseline):
    head = ("| phase | isolation | mean ms | p50 ms | p99 ms | max ms | req/s | errors "
            "| mean vs alone | p99 vs alone | paper (mean) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        base = baseline
        extra = ""
        if r["mode"] == "noiso" and noisoBaseline is not None and r["phase"] != "alone":
            extra = f" ({pct(r['mean_ms'], noisoBaseline['mean_ms'])} vs alone-noiso)"
        lines.append(
            f"| {kPhaseNames.get(r['phase'], r['phase'])} | {'allot cgroups' if r['mode'] == 'iso' else 'none'} "
            f"| {r['mean_ms']:.2f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['max_ms']:.1f} "
            f"| {r['throughput_rps']:.1f} | {r['errors']} "
            f"| {pct(r['mean_ms'], base['mean_ms']) if base else 'n/a'}{extra} "
            f"| {ratio(r['p99_ms'], base['p99_ms']) if base else 'n/a'} "
            f"| {kPaper.get((r['phase'], r['mode']), '')} |")
    return lines


def schedTable(rows, requestsPerPhase):
    """Per phase, from the scheduling trace (sched_delays.py) and the client's own
    numbers: how long the web server and the agent's loop waited for a CPU; the
    web server's CPU time per request (its work: when it grows, the hardware or
    the host ran it slower) and the mean latency minus it (waiting and the
    network); who ran on the loop's CPU while it waited 5 ms or more; and
    whether the client itself was held up (a late send is the client's delay,
    charged to the server)."""
    if not any("sched" in r or "client_send_late_max_ms" in r for r in rows):
        return []
    head = ("| phase | isolation | web waits for a CPU: p99 / max ms | agent loop waits: p99 / max ms "
            "| web CPU per request ms | mean minus it ms | while the loop waited >= 5 ms, ran on its CPU (ms) "
            "| client: sends late max ms, CPU, cpus |")
    lines = ["scheduling per phase (perf sched over the phase, hog launch to kill; the client's own counters):",
             head, "|" + "---|" * (head.count("|") - 1)]
    num = lambda v: "n/a" if v is None else f"{v:.2f}"
    for r in rows:
        sched = r.get("sched", {})
        web, loop = sched.get("web", {}), sched.get("loop", {})
        lost = f" ({loop['discarded']} not seen to end)" if loop.get("discarded") else ""
        perRequest = web["ran_ms"] / requestsPerPhase if web.get("ran_ms") and requestsPerPhase else None
        ours = {f"python3/{r.get('client_pid')}": "the client", f"python3/{r.get('sampler_pid')}": "loop sampler"}
        who = ", ".join(f"{ours.get(k, k)} {v:.1f}"
                        for k, v in list(loop.get("who_ran_meanwhile_ms", {}).items())[:3]) or "-"
        cpus = ",".join(map(str, r.get("client_cpus", []))) or "any"
        clientCol = (f"{num(r.get('client_send_late_max_ms'))}, "
                     f"{r['client_cpu_share'] * 100:.1f}%, {cpus}" if "client_cpu_share" in r else "n/a")
        lines.append(
            f"| {kPhaseNames.get(r['phase'], r['phase'])} | {'allot cgroups' if r['mode'] == 'iso' else 'none'} "
            f"| {num(web.get('p99_ms'))} / {num(web.get('max_ms'))} "
            f"| {num(loop.get('p99_ms'))} / {num(loop.get('max_ms'))}{lost} | {num(perRequest)} "
            f"| {num(r['mean_ms'] - perRequest if perRequest is not None else None)} | {who} | {clientCol} |")
    sleeps = [r for r in rows if r.get("sleeps")]
    if sleeps:
        lines += ["", "the agent loop's sleeps longer than its tick (+1 ms) per phase, where it slept and what woke "
                  "it (a timerfd's expiry: how late that expiry was; every timerfd's lateness, all processes):"]
        for r in sleeps:
            s = r["sleeps"]
            lines.append(f"- {kPhaseNames.get(r['phase'], r['phase'])} ({r['mode']}): {s['count']} sleeps of "
                         f"{s['sleeps_over_ms']:g} ms or more, {s['in_idle_wait']} of them in the idle wait; "
                         f"timerfd expiries late p99 {num(s.get('timerfd_late_p99_ms'))} / max "
                         f"{num(s.get('timerfd_late_max_ms'))} ms")
            for x in s["longest"][:2]:
                woke = (f"woken by a timerfd expiry {x['woken_by_timerfd_late_ms']:.2f} ms late"
                        if x.get("woken_by_timerfd_late_ms") is not None else
                        "woken by something else" if x.get("waking_seen") else "its wakeup not seen")
                lines.append(f"    {x['ms']:.2f} ms on cpu {x.get('cpu', '?')}, {woke}, in "
                             f"{' < '.join(x['stack'][:3]) or '?'}")
    return lines


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def combined(repeats):
    """One phase's rows (a phase listed more than once in --phases) as one:
    the median of their means and p99s, all their errors and hog outcomes."""
    if len(repeats) < 2:
        return repeats[0] if repeats else None
    row = dict(repeats[0])
    row["mean_ms"] = median([r["mean_ms"] for r in repeats])
    row["p99_ms"] = median([r["p99_ms"] for r in repeats])
    row["errors"] = sum(r["errors"] for r in repeats)
    row["hog"] = " | ".join(r["hog"] for r in repeats)
    return row


def spread(rows):
    """For each phase run more than once: its means and p99s, run by run."""
    groups = {}
    for r in rows:
        groups.setdefault((r["mode"], r["phase"]), []).append(r)
    lines = []
    for (mode, phase), repeats in groups.items():
        if len(repeats) < 2:
            continue
        means = [r["mean_ms"] for r in repeats]
        lines.append(f"- {phase}-{mode}, {len(repeats)} runs: mean ms "
                     f"{', '.join(f'{m:.2f}' for m in means)} (median {median(means):.2f}, "
                     f"spread {(max(means) - min(means)) / median(means) * 100:.0f}% of it); p99 ms "
                     f"{', '.join(f'{p99:.2f}' for p99 in (r['p99_ms'] for r in repeats))}")
    return ["phases run more than once (the checks use the medians):"] + lines + [""] if lines else []


def atPidsMax(evidence):
    """True when some container's "pids N/N" shows it full."""
    return any(cur == cap for cur, cap in re.findall(r"pids (\d+)/(\d+)", evidence))


def checks(rows, find):
    """The issue's targets, each PASS / FAIL / n/a (phase not run)."""
    alone, cpu, cpuNoiso = find("iso", "alone"), find("iso", "cpu"), find("noiso", "cpu")
    mem, fork = find("iso", "mem"), find("iso", "fork")
    out = ["checks (targets):"]

    def line(name, ok):
        out.append(f"- {'n/a ' if ok is None else ('PASS' if ok else 'FAIL')} {name}")

    both = alone is not None and cpu is not None
    line("isolated CPU hog: mean at most +10% over alone",
         both and cpu["mean_ms"] <= 1.10 * alone["mean_ms"] if both else None)
    line("isolated CPU hog: p99 at most 1.5x alone",
         both and cpu["p99_ms"] <= 1.5 * alone["p99_ms"] if both else None)
    line("isolated CPU hog p99 below the unisolated one (same run)",
         cpu["p99_ms"] < cpuNoiso["p99_ms"] if cpu and cpuNoiso else None)
    line("memory bomb: no web errors, bomb ended by its executor's memory limit",
         mem["errors"] == 0 and "MEMORY_LIMIT" in mem["hog"] if mem else None)
    line("fork bomb: no web errors, bomb held at its executor's pids.max",
         fork["errors"] == 0 and atPidsMax(fork["hog"]) if fork else None)
    return out


kMeterLine = re.compile(r"the loop ran (?P<late>[-\d.e+]+) ms late \((?P<wait>[-\d.e+]+) ms of it waiting for a CPU")
kStealPart = re.compile(r"host steal (?P<steal>[\d.]+) ms on cpu (?P<cpu>\d+)")
kTickAt = re.compile(r"since the tick (?P<interval>[\d.]+) ms before.*tick at (?P<at>[\d.]+) s monotonic")
kTickLine = re.compile(r"loop tick (?P<late>[-\d.e+]+) ms late; timed since the previous tick: .*?(?:\((?P<cause>[a-z ]+)\))?$")


def lateTicks(lines, timeline=None):
    """The agent's late ticks in its log (base/loop_stall_meter.cpp's warning,
    at most one a second; a tick 10 ms late or more): the longest, its wait
    for a CPU and its host steal, and the longest with its host steal taken
    off; the untimed causes the agent named (agent/agent.cpp's line). With a
    steal timeline (sched_delays.Timeline), each tick that says when it ran
    also gets the timeline's steal per CPU over its interval
    ("timeline_steal_ms")."""
    ticks, causes = [], collections.Counter()
    for line in lines:
        m = kMeterLine.search(line)
        if m:
            late, wait = float(m["late"]), float(m["wait"])
            st = kStealPart.search(line, m.end())
            steal = min(float(st["steal"]), late) if st else None
            tick = {"late_ms": late, "cpu_wait_ms": wait, "steal_ms": steal,
                    "steal_cpu": int(st["cpu"]) if st else None, "less_steal_ms": round(late - (steal or 0), 3)}
            at = kTickAt.search(line, m.end())
            if at:
                tick["at"] = float(at["at"])
                if timeline is not None:
                    steal = timeline.between(tick["at"] - float(at["interval"]) / 1e3, tick["at"])
                    tick["timeline_steal_ms"] = {str(c): v for c, v in steal.items()}
            ticks.append(tick)
            continue
        m = kTickLine.search(line)
        if m and m["cause"]:
            causes[m["cause"]] += 1
    longest = max(ticks, key=lambda t: t["late_ms"], default=None)
    return {"logged": len(ticks), "longest": longest,
            "longest_less_steal_ms": max((t["less_steal_ms"] for t in ticks), default=None),
            "steal_known": sum(t["steal_ms"] is not None for t in ticks),
            "steal_ms_total": round(sum(t["steal_ms"] or 0 for t in ticks), 3),
            "untimed_causes": dict(causes),
            "ticks": sorted(ticks, key=lambda t: -t["late_ms"])[:10]}


def loopStealSection(rows):
    """Per phase: the agent loop's longest late tick and that tick less the
    host's steal (the agent's own account, /proc/stat on the loop's CPU), the
    machine's steal per CPU over the phase (the steal timeline), and the
    loop's longest sleeps and waits for a CPU with the steal beside them."""
    if not any("late_ticks" in r or "steal" in r for r in rows):
        return []
    num = lambda v, f="{:.1f}": "n/a" if v is None else f.format(v)
    perCpu = lambda d: ", ".join(f"cpu{c} {v:.0f}" for c, v in d.items()) if d else "n/a"
    head = ("| phase | isolation | late ticks logged | longest ms: waiting for a CPU / host steal | "
            "longest less its host steal ms | host steal in logged late ticks ms | host steal per CPU over "
            "the phase ms |")
    lines = ["", "the agent loop's late ticks and the host's steal (a vCPU runnable on the host but not run; "
             "/proc/stat, 10 ms ticks; the agent's reading per late tick, at most one logged a second; the "
             "phase's from a sampler every 10 ms):", head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lt, st = r.get("late_ticks", {}), r.get("steal", {})
        top = lt.get("longest")
        longest = (f"{top['late_ms']:.1f}: {top['cpu_wait_ms']:.1f} / {num(top['steal_ms'])}" if top else "none")
        if top and top.get("timeline_steal_ms"):
            longest += f" (timeline: {perCpu(top['timeline_steal_ms'])})"
        lines.append(
            f"| {kPhaseNames.get(r['phase'], r['phase'])} | {'allot cgroups' if r['mode'] == 'iso' else 'none'} "
            f"| {lt.get('logged', 'n/a')} | {longest} | {num(lt.get('longest_less_steal_ms'))} "
            f"| {num(lt.get('steal_ms_total'))} | {perCpu(st.get('per_cpu_ms'))} |")
    for r in rows:
        beside = []
        for what, entries in (("sleep", r.get("sleeps", {}).get("longest", [])),
                              ("wait for a CPU", r.get("sched", {}).get("loop", {}).get("longest", []))):
            for x in entries[:2]:
                if "steal_ms" in x:
                    beside.append(f"{what} {x['ms']:.1f} ms on cpu {x.get('cpu', '?')}: host steal "
                                  f"{perCpu(x['steal_ms'])} ms")
        if beside:
            lines.append(f"- {kPhaseNames.get(r['phase'], r['phase'])} ({r['mode']}), the loop's longest from the "
                         f"trace, steal from the timeline over each: " + "; ".join(beside))
    return lines


def probeSection(rows):
    """The launch probe's section (run.sh --launch-probe): per phase, the
    executors started during it and how long the loop's launch sections ran
    (bench/hog/launch_probe.py)."""
    probed = [r for r in rows if r.get("probe")]
    if not probed:
        return []
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from launch_probe import summarize, OVER_MS
    text = ["", f"launch probe (a short task in a new executor at a fixed interval during each phase; the "
                f"agent's loop sections from its /metrics: p50/p99 as the upper bound of their bucket, "
                f"'> {OVER_MS:g} ms' exact, max exact when it was the agent's longest so far):"]
    for r in probed:
        label = r["probe"].get("name") or f"{r['phase']}-{r['mode']}"
        text.append(f"- {label}:")
        text += summarize(r["probe"])
    return text


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--phases")
    parser.add_argument("--out")
    parser.add_argument("--late-ticks", metavar="AGENT_LOG",
                        help="print the late ticks of the agent's log after line --from as JSON and exit")
    parser.add_argument("--from", dest="fromLine", type=int, default=0)
    parser.add_argument("--steal-timeline", metavar="FILE",
                        help="with --late-ticks: a sched_delays.py --sample-steal file, its steal beside each tick")
    parser.add_argument("--command", default="bench/hog/run.sh")
    parser.add_argument("--rate", default="")
    parser.add_argument("--duration", default="")
    parser.add_argument("--warmup", default="")
    parser.add_argument("--spinners", default="")
    parser.add_argument("--page-cost", default="")
    parser.add_argument("--isolation", default="")
    parser.add_argument("--node", default="")
    parser.add_argument("--uptime-start", default="")
    parser.add_argument("--uptime-end", default="")
    args = parser.parse_args()
    if args.late_ticks:
        timeline = None
        if args.steal_timeline and os.path.exists(args.steal_timeline):
            import sys
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
            from sched_delays import Timeline
            with open(args.steal_timeline) as f:
                timeline = Timeline(f)
        with open(args.late_ticks, errors="replace") as f:
            print(json.dumps(lateTicks((line for i, line in enumerate(f) if i >= args.fromLine), timeline)))
        return 0
    if not args.phases or not args.out:
        parser.error("--phases and --out (or --late-ticks)")

    rows = loadPhases(args.phases)
    find = lambda mode, phase: combined([r for r in rows if r["mode"] == mode and r["phase"] == phase])
    baseline = find("iso", "alone") or find("noiso", "alone")
    try:   # the web server's CPU in the trace is for the warm-up's and the measured requests
        requests = float(args.rate) * (float(args.warmup or 0) + float(args.duration))
    except ValueError:
        requests = 0
    noisoBaseline = find("noiso", "alone")

    text = [
        f"command: {args.command}",
        f"open-loop client: {args.rate} requests/s for {args.duration} s per phase, one connection per "
        f"request, latency from the scheduled send time; runs on the same machine outside allot, "
        f"at SCHED_FIFO only in its timing window, on the CPUs in the last column below",
        f"victim: Apache prefork + mod_php page of ~{args.page_cost} ms php-cli CPU (SQLite + rendering)",
        f"CPU hog: {args.spinners} spinning processes; isolation: {args.isolation or 'none'}",
        f"allot's node (agent and its executors in both modes): {args.node}",
        f"load before: {args.uptime_start.strip()}",
        f"load after:  {args.uptime_end.strip()}",
        "",
    ] + table(rows, baseline, noisoBaseline) + [""] + schedTable(rows, requests) + loopStealSection(rows) + [""] + spread(rows) + checks(rows, find) + [
        "", "hog outcomes:"]
    for r in rows:
        if r["phase"] != "alone":
            text.append(f"- {r['phase']}-{r['mode']}: {r['hog']}")
    text += probeSection(rows)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "hog-results.txt"), "w") as f:
        f.write("\n".join(text) + "\n")
    with open(os.path.join(args.out, "hog-results.json"), "w") as f:
        json.dump({"command": args.command, "rate": args.rate, "duration": args.duration,
                   "spinners": args.spinners, "isolation": args.isolation,
                   "page_cost_ms": args.page_cost, "phases": rows}, f, indent=1)
    with open(os.path.join(args.out, "hog-results.dat"), "w") as f:
        f.write("# phase mean p50 p90 p99\n")
        for r in rows:
            label = f"{r['phase']}-{r['mode']}"
            f.write(f"{label} {r['mean_ms']:.3f} {r['p50_ms']:.3f} {r['p90_ms']:.3f} {r['p99_ms']:.3f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
