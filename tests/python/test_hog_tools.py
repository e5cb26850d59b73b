"""The hog benchmark's measuring tools (bench/hog; bench/sched_delays.py, the
state probe's too): sched_delays.py on a
trace with known answers, loadgen.py against a real local HTTP server and
against a port nobody listens on (no daemons of allot)."""

import http.server
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
HOG = BENCH / "hog"


def _switch(cpu, t, prev, prevPid, state, nxt, nextPid, prevPrio=120, nextPrio=120):
    return (f"[{cpu:03d}] {t:.6f}: sched:sched_switch: prev_comm={prev} prev_pid={prevPid} "
            f"prev_prio={prevPrio} prev_state={state} ==> next_comm={nxt} next_pid={nextPid} next_prio={nextPrio}")


def _wakeup(cpu, t, comm, pid, target):
    return f"[{cpu:03d}] {t:.6f}: sched:sched_wakeup: comm={comm} pid={pid} prio=120 target_cpu={target:03d}"


def _delays(lines, *tracks):
    args = [sys.executable, str(BENCH / "sched_delays.py"), "--json"]
    for t in tracks:
        args += ["--track", t]
    out = subprocess.run(args, input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_sched_delays_measures_waits_and_names_who_ran_meanwhile():
    lines = [
        # cpu 0: cc1plus runs from 1.000; the loop (tid 50) wakes at 1.002 and
        # runs at 1.010 after cc1plus (6 ms of it) and ld (2 ms): an 8 ms wait.
        _switch(0, 1.000, "swapper/0", 0, "R", "cc1plus", 70),
        _wakeup(0, 1.002, "agent", 50, 0),
        _switch(0, 1.008, "cc1plus", 70, "R", "ld", 71),
        _switch(0, 1.010, "ld", 71, "R", "agent", 50),
        # the loop runs 1 ms and sleeps; then it is preempted at 1.020 by
        # apache2 and waits 0.5 ms.
        _switch(0, 1.011, "agent", 50, "S", "swapper/0", 0),
        _wakeup(0, 1.019, "agent", 50, 0),
        _switch(0, 1.019, "swapper/0", 0, "R", "agent", 50),
        _switch(0, 1.020, "agent", 50, "R", "apache2", 80),
        _switch(0, 1.0205, "apache2", 80, "S", "agent", 50),
        # apache2 (another pid) waits 2 ms on cpu 1 behind its sibling: its own
        # queue, not named as who kept it.
        _switch(1, 1.000, "swapper/1", 0, "R", "apache2", 81),
        _wakeup(1, 1.001, "apache2", 82, 1),
        _switch(1, 1.003, "apache2", 81, "S", "apache2", 82),
        _switch(1, 1.004, "apache2", 82, "S", "swapper/1", 0),
    ]
    r = _delays(lines, "loop=tid:50", "web=comm:apache2")
    loop, web = r["loop"], r["web"]
    assert loop["waits"] == 3                      # 8 ms, 0 (woken onto an idle CPU), 0.5 ms
    assert loop["max_ms"] == pytest.approx(8.0)
    assert loop["p50_ms"] == pytest.approx(0.5)
    assert loop["total_ms"] == pytest.approx(8.5)
    assert loop["waits_over_5ms"] == 1
    assert loop["who_ran_meanwhile_ms"] == {"cc1plus/70": pytest.approx(6.0), "ld/71": pytest.approx(2.0)}
    assert loop["ran_ms"] == pytest.approx(2.0)    # 1.010-1.011 and 1.019-1.020
    assert web["waits"] == 1 and web["max_ms"] == pytest.approx(2.0)
    assert web["who_ran_meanwhile_ms"] == {}      # under 5 ms, and its sibling would not count
    assert web["ran_ms"] == pytest.approx(3.0 + 0.5 + 1.0)


def test_sched_delays_discards_a_wait_whose_end_it_did_not_see():
    lines = [
        _switch(1, 2.000, "swapper/1", 0, "R", "bash", 90),
        _wakeup(1, 2.001, "agent", 50, 1),
        # the loop's switch-in was lost: it is next seen leaving the CPU
        _switch(1, 2.300, "agent", 50, "S", "bash", 90),
    ]
    loop = _delays(lines, "loop=tid:50")["loop"]
    assert loop["waits"] == 0 and loop["discarded"] == 1


def test_sched_delays_refuses_a_bad_track():
    out = subprocess.run([sys.executable, str(BENCH / "sched_delays.py"), "--track", "loop=pid:1"],
                         input="", capture_output=True, text=True)
    assert out.returncode != 0 and "--track" in out.stderr


def _event(cpu, t, comm, tid, event, text, stack=()):
    """One event of `perf script -F comm,tid,cpu,time,event,trace,ip,sym`
    with its kernel callchain, innermost frame first."""
    lines = [f"{comm:>16} {tid:>6} [{cpu:03d}] {t:.6f}: {event}: {text}"]
    lines += [f"\tffffffff81000000 {frame}+0x10 ([kernel.kallsyms])" for frame in stack]
    return "\n".join(lines + [""])


def _sleeps(lines, tid, sleepMs=6):
    args = [sys.executable, str(BENCH / "sched_delays.py"), "--json", "--sleeps-of", str(tid),
            "--sleep-ms", str(sleepMs)]
    out = subprocess.run(args, input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


IDLE = ("__schedule", "schedule", "schedule_hrtimeout_range_clock", "do_epoll_wait", "__x64_sys_epoll_wait")
FAULT = ("__schedule", "schedule", "io_schedule", "folio_wait_bit_common", "filemap_fault", "handle_mm_fault",
         "do_user_addr_fault", "exc_page_fault")


def test_sched_delays_sleeps_names_where_the_loop_slept_and_how_late_its_timer_was():
    switchOut = lambda t, cpu, stack, state="S": _event(
        cpu, t, "allot-agent", 50, "sched:sched_switch",
        f"prev_comm=allot-agent prev_pid=50 prev_prio=120 prev_state={state} ==> next_comm=cc1plus "
        f"next_pid=70 next_prio=120", stack)
    switchIn = lambda t, cpu: _event(
        cpu, t, "cc1plus", 70, "sched:sched_switch",
        "prev_comm=cc1plus prev_pid=70 prev_prio=120 prev_state=R ==> next_comm=allot-agent next_pid=50 "
        "next_prio=120")
    waking = lambda t, cpu: _event(cpu, t, "cc1plus", 70, "sched:sched_waking",
                                   f"comm=allot-agent pid=50 prio=120 target_cpu={cpu:03d}")
    armed = lambda t, cpu, expiresNs: _event(
        cpu, t, "allot-agent", 50, "timer:hrtimer_start",
        f"hrtimer=0xffff8881 function=timerfd_tmrproc expires={expiresNs} softexpires={expiresNs} mode=0x1 "
        f"was_armed=0")
    expired = lambda t, cpu, nowNs: _event(cpu, t, "cc1plus", 70, "timer:hrtimer_expire_entry",
                                           f"hrtimer=0xffff8881 function=timerfd_tmrproc now={nowNs}")
    base = 5_000_000_000_000   # the timers' clock, ns
    lines = [
        # a 5 ms tick whose timerfd expired 12 ms late: 17 ms asleep in the idle wait
        armed(10.000, 0, base + 5_000_000),
        switchOut(10.000, 0, IDLE),
        expired(10.017, 0, base + 17_000_000),
        waking(10.0171, 0),
        switchIn(10.0175, 0),
        # 3 ms asleep: under --sleep-ms, not listed
        switchOut(10.020, 0, IDLE),
        waking(10.023, 0),
        switchIn(10.023, 0),
        # 8 ms in a page fault waiting for the disk, woken by the I/O's end
        switchOut(10.030, 1, FAULT, state="D"),
        waking(10.038, 1),
        switchIn(10.039, 1),
        # preempted (runnable): a wait for a CPU, not a sleep
        switchOut(10.040, 1, (), state="R"),
        switchIn(10.060, 1),
    ]
    r = _sleeps(lines, 50)
    assert r["count"] == 2 and r["in_idle_wait"] == 1
    first, second = r["longest"]
    assert first["ms"] == pytest.approx(17.1) and first["idle_wait"]
    assert first["woken_by_timerfd_late_ms"] == pytest.approx(12.0)
    assert first["stack"][:2] == ["schedule_hrtimeout_range_clock", "do_epoll_wait"]
    assert second["ms"] == pytest.approx(8.0) and not second["idle_wait"] and second["state"] == "D"
    assert second["woken_by_timerfd_late_ms"] is None and second["waking_seen"]
    assert second["stack"][:2] == ["io_schedule", "folio_wait_bit_common"]
    assert r["timerfd_expiries"] == 1 and r["timerfd_late_max_ms"] == pytest.approx(12.0)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _loadgen(port, *extra):
    out = subprocess.run([sys.executable, str(HOG / "loadgen.py"), "--port", str(port), "--rate", "50",
                          "--duration", "1", "--warmup", "0.2", "--timeout", "2", *extra],
                         capture_output=True, text=True, check=True, timeout=30)
    return json.loads(out.stdout)


def test_loadgen_times_every_request_of_its_schedule(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        cpu = sorted(os.sched_getaffinity(0))[-1]
        samples = tmp_path / "samples.txt"
        began = time.time()
        r = _loadgen(server.server_address[1], "--cpus", str(cpu), "--samples", str(samples),
                     "--start-at", f"{began + 1:.3f}")
        elapsed = time.time() - began
    finally:
        server.shutdown()
    assert r["sent"] == 50 and r["ok"] == 50 and r["errors"] == 0
    assert elapsed >= 1 + 1.2      # waited for --start-at, then 0.2 s warm-up and 1 s measured
    assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"]
    assert r["client_cpus"] == [cpu] and r["client_fifo"] == 0
    assert 0 <= r["client_send_late_max_ms"] < 1000
    rows = [line.split() for line in samples.read_text().splitlines()]
    assert len(rows) == 50 and all(row[2] == "200" for row in rows)
    # Due times on the fixed schedule: 20 ms apart from the end of the warm-up.
    assert [float(row[0]) for row in rows[:3]] == pytest.approx([0.2, 0.22, 0.24])


def test_loadgen_counts_refused_connections_as_errors():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # bound, not listening: connections are refused
        r = _loadgen(port)
    assert r["ok"] == 0 and r["errors"] == 50


# The host's steal time (sched_delays.py --sample-steal / --steal-timeline;
# report.py's loop section): parsers on malformed input, the arithmetic on
# made-up timelines and logs, the sampler on this machine's /proc/stat.
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(HOG))
import report as hogReport          # noqa: E402
import sched_delays                 # noqa: E402


def test_steal_ticks_reads_the_steal_column_and_refuses_malformed_lines():
    text = ("cpu  10 0 0 0 0 0 0 99 0 0\n"
            "cpu0 1 2 3 4 5 6 7 8618 0 0\n"
            "cpu2 1 2 3 4 5 6 7 8978\n"
            "intr 1 2 3\n")
    assert sched_delays.stealTicks(text) == [8618, None, 8978]
    for bad in ("cpu0 1 2 3 4 5 6 7\n", "cpu0 1 2 3 4 5 6 7 x 0\n", "cpu0 1 2 3 4 5 6 7 -8\n",
                "cpuX 1 2 3 4 5 6 7 8\n", "intr 1\n", ""):
        with pytest.raises(ValueError):
            sched_delays.stealTicks(bad)


def test_steal_timeline_gives_the_steal_over_a_window_and_skips_malformed_lines():
    tl = sched_delays.Timeline([
        "100.000 10 20\n",
        "100.010 10 20\n",
        "garbage line\n",
        "100.020 13 20\n",
        "100.030 16 -\n",
        "99.000 1 1\n",            # backwards in time: malformed
        "100.040 16 21\n",
    ], tickMs=10)
    assert tl.malformed == 2 and len(tl.times) == 5
    # a wait from 100.012 to 100.028: samples 100.010 and 100.030 bracket it
    assert tl.between(100.012, 100.028) == {0: 60.0}        # cpu1 unknown at 100.030
    assert tl.between(100.000, 100.040) == {0: 60.0, 1: 10.0}
    # past the ends: the nearest samples inside
    assert tl.between(90.0, 200.0) == {0: 60.0, 1: 10.0}
    assert sched_delays.Timeline(["1.0 5\n"]).between(0, 2) == {}
    summary = sched_delays.timelineSummary(tl)
    assert summary["per_cpu_ms"] == {"0": 60.0, "1": 10.0}
    assert summary["samples"] == 5 and summary["sample_gap_max_ms"] == pytest.approx(10.0)


def test_sleeps_get_the_hosts_steal_beside_them(tmp_path):
    timeline = tmp_path / "steal.txt"
    tick = 1000 / os.sysconf("SC_CLK_TCK")
    # cpu 0 is stolen for 6 ticks between 10.000 and 10.020, nothing after
    timeline.write_text("9.990 100 50\n10.000 100 50\n10.020 106 50\n10.030 106 50\n10.040 106 50\n")
    lines = [
        _event(0, 10.000, "allot-agent", 50, "sched:sched_switch",
               "prev_comm=allot-agent prev_pid=50 prev_prio=120 prev_state=S ==> next_comm=swapper/0 "
               "next_pid=0 next_prio=120", IDLE),
        _event(0, 10.017, "swapper/0", 0, "sched:sched_waking", "comm=allot-agent pid=50 prio=120 target_cpu=000"),
        _event(0, 10.0175, "swapper/0", 0, "sched:sched_switch",
               "prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=allot-agent "
               "next_pid=50 next_prio=120"),
    ]
    args = [sys.executable, str(BENCH / "sched_delays.py"), "--json", "--sleeps-of", "50",
            "--steal-timeline", str(timeline)]
    out = subprocess.run(args, input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    (sleep,) = r["longest"]
    assert sleep["ms"] == pytest.approx(17.0) and sleep["at"] == pytest.approx(10.0)
    assert sleep["steal_ms"] == {"0": pytest.approx(6 * tick), "1": 0.0}
    assert r["steal"]["per_cpu_ms"] == {"0": pytest.approx(6 * tick), "1": 0.0}


def test_the_steal_sampler_samples_this_machine_and_stops_on_time(tmp_path):
    out = tmp_path / "steal.txt"
    began = time.monotonic()
    subprocess.run([sys.executable, str(BENCH / "sched_delays.py"), "--sample-steal", str(out),
                    "--every-ms", "10", "--seconds", "0.3"], check=True, timeout=10)
    assert time.monotonic() - began < 5
    tl = sched_delays.Timeline(out.read_text().splitlines())
    assert tl.malformed == 0 and 5 <= len(tl.times) <= 31
    assert tl.times == sorted(tl.times) and len(tl.steal[0]) == os.cpu_count()
    refused = subprocess.run([sys.executable, str(BENCH / "sched_delays.py"), "--sample-steal", str(out),
                              "--every-ms", "0"], capture_output=True, text=True)
    assert refused.returncode != 0


METER = ("<4>allot W the loop ran {late} ms late ({wait} ms of it waiting for a CPU; {wait} ms waiting for a CPU, "
         "0.20 ms running, 60.00 ms off the CPU in 1 sleep and 0 major page faults, since the tick 99.00 ms "
         "before{steal}{at})")


def test_late_ticks_take_the_hosts_steal_off_each_logged_tick():
    log = [
        "<6>allot-agent I registered\n",
        METER.format(late="94.2", wait="33.5", steal="; host steal 60.00 ms on cpu 0",
                     at="; tick at 500.100000 s monotonic") + "\n",
        "<4>allot-agent W loop tick 94.2 ms late; timed since the previous tick: nothing (host steal)\n",
        METER.format(late="12.8", wait="0.04", steal="; host steal 0.00 ms on cpu 1", at="") + "\n",
        "<4>allot-agent W loop tick 12.8 ms late; timed since the previous tick: nothing (late wakeup)\n",
        METER.format(late="11", wait="0", steal="; host steal 30.00 ms on cpu 1", at="") + "\n",   # capped at 11
        METER.format(late="10.5", wait="1", steal="", at="") + "\n",       # an agent without steal readings
    ]
    # a timeline: cpu0 stolen 7 ticks over the 94.2 ms tick's 99 ms interval (500.001-500.100)
    timeline = sched_delays.Timeline(["499.990 100 5\n", "500.000 100 5\n", "500.050 104 5\n",
                                      "500.100 107 5\n", "500.200 107 9\n"], tickMs=10)
    r = hogReport.lateTicks(log, timeline)
    assert r["logged"] == 4 and r["steal_known"] == 3
    assert r["longest"]["at"] == 500.1 and r["longest"]["timeline_steal_ms"] == {"0": 70.0, "1": 0.0}
    assert "timeline_steal_ms" not in r["ticks"][1]
    assert r["longest"]["late_ms"] == 94.2 and r["longest"]["steal_ms"] == 60.0 and r["longest"]["steal_cpu"] == 0
    assert r["longest_less_steal_ms"] == pytest.approx(34.2)
    assert r["steal_ms_total"] == pytest.approx(71.0)
    assert r["untimed_causes"] == {"host steal": 1, "late wakeup": 1}
    rows = [{"phase": "cpu", "mode": "iso", "late_ticks": r,
             "steal": {"per_cpu_ms": {"0": 120.0, "1": 30.0}},
             "sleeps": {"longest": [{"ms": 65.5, "cpu": 0, "steal_ms": {"0": 60.0, "1": 0.0}}]}}]
    text = "\n".join(hogReport.loopStealSection(rows))
    assert ("| CPU hog | allot cgroups | 4 | 94.2: 33.5 / 60.0 (timeline: cpu0 70, cpu1 0) | 34.2 | 71.0 "
            "| cpu0 120, cpu1 30 |") in text
    assert "sleep 65.5 ms on cpu 0: host steal cpu0 60, cpu1 0 ms" in text
    assert hogReport.loopStealSection([{"phase": "alone", "mode": "iso"}]) == []
