#!/bin/bash
# /state under load (the target: served in under 200 ms at 10,000
# emulated agents without delaying offers by more than 10 ms). A real
# allot-master with --http-listen, N emulated agents (2 task slots each), F
# load frameworks launching short tasks so that offers keep flowing; then
# GET /state serially and from a few concurrent clients, timed by curl.
# What /state costs the offers: the master's loop stall meter
# (allot_master_loop_lateness_seconds on /metrics: every tick that runs late
# is work - an offer, a reply - that waited as long), counted over the
# probe window and over a quiet window of the same length right after it.
# Prints one WINDOW line per window (ticks, ticks > 10 ms late, how much of
# their lateness was waiting for a CPU and how much the loop's own work,
# the longest and its split) and one RESULT line (appended to --out when
# given).
#
# The emulator, the load frameworks and the probe's curl stand in for other
# machines (agents, frameworks, an operator). Two configurations, named in
# the RESULT line (config=):
#   installed  --master-cpus 0 --load-cpus 1: the master alone on its CPUs
#              (taskset), every stand-in (and perf) on the others, as a
#              master on its own machine with its agents, frameworks and
#              operator elsewhere. The master's /state rendering worker
#              shares the master's CPUs (SCHED_IDLE, so it yields to the loop).
#   shared     (no --master-cpus): everything on every CPU, the stand-ins
#              taking the master's CPU as remote machines never would.
# --nice-load N runs the stand-ins N nice levels down in either (RESULT:
# load_nice=N; 0 is the default).
# --metrics-probe N adds a window of N GET /metrics, one every
# --metrics-interval seconds (0.1), between the /state window and the quiet
# one: a WINDOW line like the others and a METRICS line with curl's times
# and the master's own account of each scrape's loop time
# (allot_master_metrics_scrape_seconds: setting the gauges + writing the
# text, by part).
# --sched-trace records the scheduler (perf sched_switch/sched_waking) in
# each window and prints the master's loop thread's waits for a CPU and who
# ran on its CPU while it waited 5 ms or more (bench/sched_delays.py, the
# hog bench's tool).
#
#   bench/scale/state_probe.sh --build-dir build --agents 10000 --frameworks 50
set -euo pipefail

build=build agents=10000 frameworks=50 mean=10 stddev=3 serial=20 concurrent=4 per_client=5 warmup=20 out=""
load_nice=0 sched_trace=0 master_cpus="" load_cpus="" metrics_probe=0 metrics_interval=0.1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --frameworks) frameworks=$2; shift 2 ;;
    --task-mean) mean=$2; shift 2 ;;
    --task-stddev) stddev=$2; shift 2 ;;
    --serial) serial=$2; shift 2 ;;            # GET /state one after another
    --concurrent) concurrent=$2; shift 2 ;;    # then this many clients at once...
    --per-client) per_client=$2; shift 2 ;;    # ...of this many GETs each
    --warmup) warmup=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --nice-load) load_nice=$2; shift 2 ;;     # the emulator, load frameworks and curl, niced
    --sched-trace) sched_trace=1; shift ;;
    --master-cpus) master_cpus=$2; shift 2 ;;  # taskset -c list for the master
    --load-cpus) load_cpus=$2; shift 2 ;;      # ... and for everything else the bench runs
    --metrics-probe) metrics_probe=$2; shift 2 ;;
    --metrics-interval) metrics_interval=$2; shift 2 ;;
    *) echo "state_probe.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

for pair in "agents:$agents" "frameworks:$frameworks" "serial:$serial" "concurrent:$concurrent" \
            "per-client:$per_client" "warmup:$warmup" "metrics-probe:$metrics_probe"; do
  [[ "${pair#*:}" =~ ^[0-9]+$ ]] || { echo "state_probe.sh: --${pair%%:*} must be a whole number, not '${pair#*:}'" >&2; exit 2; }
done
[[ "$load_nice" =~ ^-?[0-9]+$ ]] || { echo "state_probe.sh: --nice-load must be a nice value, not '$load_nice'" >&2; exit 2; }
[[ "$metrics_interval" =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "state_probe.sh: --metrics-interval must be seconds, not '$metrics_interval'" >&2; exit 2; }

if { [ -n "$master_cpus" ] && [ -z "$load_cpus" ]; } || { [ -z "$master_cpus" ] && [ -n "$load_cpus" ]; }; then
  echo "state_probe.sh: --master-cpus and --load-cpus go together" >&2; exit 2
fi
config=shared
master_run=()
load_run=(nice -n "$load_nice")
if [ -n "$master_cpus" ]; then
  config=installed
  taskset -c "$master_cpus" true 2>/dev/null || { echo "state_probe.sh: bad --master-cpus $master_cpus" >&2; exit 2; }
  taskset -c "$load_cpus" true 2>/dev/null || { echo "state_probe.sh: bad --load-cpus $load_cpus" >&2; exit 2; }
  master_run=(taskset -c "$master_cpus")
  load_run=(taskset -c "$load_cpus" nice -n "$load_nice")
fi

dir=$(mktemp -d /tmp/allot-state-probe.XXXXXX)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"  # pids, cleanup, die, wait_for, registered

ulimit -Hn 262144 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"
"${master_run[@]}" "$build/master/allot-master" --listen 127.0.0.1:0 --port-file "$dir/port" \
  --http-listen 127.0.0.1:0 --http-port-file "$dir/http-port" \
  --agent-timeout 60 --heartbeat-interval 10 --offer-timeout 30 --stats-interval 5 \
  >"$dir/master.log" 2>&1 &
master_pid=$!
pids+=("$master_pid")
wait_for 10 test -s "$dir/port" || die "master did not start"
wait_for 10 test -s "$dir/http-port" || die "master's HTTP port did not open"
master="127.0.0.1:$(cat "$dir/port")"
http="http://127.0.0.1:$(cat "$dir/http-port")"

# At most 15,000 agents per emulator (RLIMIT_NOFILE 20,000 here).
emulators=$(( (agents + 14999) / 15000 ))
for e in $(seq 0 $(( emulators - 1 ))); do
  n=$(( agents / emulators + (e < agents % emulators ? 1 : 0) ))
  "${load_run[@]}" "$build/bench/scale/agent_emulator" --master "$master" --agents "$n" \
    --resources "cpus:2;mem:2048" --source-addresses "$(( n / 20000 + 1 ))" \
    --first-source "$(( 2 + e * 2 ))" >"$dir/emulator$e.log" 2>&1 &
  pids+=($!)
done
wait_for $(( agents / 100 + 120 )) registered || die "agents did not all register"

"${load_run[@]}" "$build/bench/scale/load_frameworks" --master "$master" --frameworks "$frameworks" \
  --task-mean "$mean" --task-stddev "$stddev" >"$dir/load.log" 2>&1 &
pids+=($!)
sleep "$warmup"
half_full() {
  local tasks
  tasks=$(grep -o 'tasks=[0-9]*' "$dir/master.log" | tail -1 | cut -d= -f2)
  [ -n "$tasks" ] && [ "$tasks" -ge "$agents" ]
}
wait_for 240 half_full || die "the cluster never reached half of its $((agents * 2)) slots"

# Counters from /metrics: "<ticks> <ticks late > 10 ms> <offers sent>".
metric() { grep "^$1 " <<< "$2" | awk '{print $2}' | head -n1; }
snapshot() {  # snapshot NAME: also keeps the whole text in $dir/metrics.NAME
  local m
  m=$("${load_run[@]}" curl -sf "$http/metrics") || die "GET /metrics failed"
  echo "$m" > "$dir/metrics.$1"
  printf '%.0f %.0f %.0f\n' "$(metric allot_master_loop_lateness_seconds_count "$m")" \
    "$(( $(printf '%.0f' "$(metric allot_master_loop_lateness_seconds_count "$m")") - \
         $(printf '%.0f' "$(metric 'allot_master_loop_lateness_seconds_bucket{le="0.01"}' "$m")") ))" \
    "$(metric allot_master_offers_sent_total "$m")"
}
now() { date +%s.%N; }

get_state() {  # prints "seconds bytes" per GET
  "${load_run[@]}" curl -s -o /dev/null -w '%{time_total} %{size_download} %{http_code}\n' "$http/state"
}
get_metrics() {
  "${load_run[@]}" curl -s -o /dev/null -w '%{time_total} %{size_download} %{http_code}\n' "$http/metrics"
}
# perf's scheduler events in one window: trace_start NAME ... trace_stop.
trace_pid=""
trace_start() {
  [ "$sched_trace" = 1 ] || return 0
  "${load_run[@]}" perf record -q -e sched:sched_switch -e sched:sched_waking -e sched:sched_wakeup_new -a \
    -o "$dir/sched.$1.data" >/dev/null 2>"$dir/perf.$1.log" &
  trace_pid=$!
  sleep 1  # perf's start-up (mmap of every CPU's buffer) out of the window
}
trace_stop() {
  [ -n "$trace_pid" ] || return 0
  kill -INT "$trace_pid"; wait "$trace_pid" 2>/dev/null || true
  trace_pid=""
}
trace_start probe
p0=$(snapshot p0); tp0=$(now)
for _ in $(seq "$serial"); do get_state; done > "$dir/serial.txt"
for c in $(seq "$concurrent"); do
  ( for _ in $(seq "$per_client"); do get_state; done > "$dir/concurrent$c.txt" ) &
done
wait_clients() { [ "$(cat "$dir"/concurrent*.txt 2>/dev/null | wc -l)" -ge $((concurrent * per_client)) ]; }
wait_for 600 wait_clients || die "the concurrent clients did not finish"
p1=$(snapshot p1); tp1=$(now)
trace_stop
probe_s=$(echo "$tp1 - $tp0" | bc -l)
# The /metrics window (--metrics-probe N): N scrapes, one every interval.
if [ "$metrics_probe" -gt 0 ]; then
  trace_start metrics
  m0=$(snapshot m0); tm0=$(now)
  for _ in $(seq "$metrics_probe"); do get_metrics; sleep "$metrics_interval"; done > "$dir/metrics_gets.txt"
  m1=$(snapshot m1); tm1=$(now)
  trace_stop
  metrics_s=$(echo "$tm1 - $tm0" | bc -l)
fi
# A quiet window as long again right after it, without /state.
trace_start quiet
q0=$(snapshot q0); tq0=$(now)
sleep "$(printf '%.1f' "$probe_s")"
q1=$(snapshot q1); tq1=$(now)
trace_stop
read -r pt0 pl0 po0 <<< "$p0"; read -r pt1 pl1 po1 <<< "$p1"
read -r qt0 ql0 qo0 <<< "$q0"
read -r qt1 ql1 qo1 <<< "$q1"

grep -v ' 200$' "$dir"/serial.txt "$dir"/concurrent*.txt && die "a GET /state did not answer 200"
[ "$metrics_probe" = 0 ] || ! grep -v ' 200$' "$dir/metrics_gets.txt" || die "a GET /metrics did not answer 200"
pct() {  # pct FILE... : p50 p99 max of the first column, in ms
  cat "$@" | awk '{print $1 * 1000}' | sort -g |
    awk '{a[NR]=$1} END {i50=int((NR+1)/2); i99=int(NR*0.99+0.999); if (i99<1) i99=1;
                         printf "p50=%.1f p99=%.1f max=%.1f n=%d", a[i50], a[i99], a[NR], NR}'
}
bytes=$(head -n1 "$dir/serial.txt" | awk '{print $2}')
loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
rss=$(awk '/VmHWM/ {print $2}' "/proc/$master_pid/status")
tasks=$(grep -o 'tasks=[0-9]*' "$dir/master.log" | tail -1 | cut -d= -f2)
quiet_s=$(echo "$tq1 - $tq0" | bc -l)
result=$(printf "config=%s master_cpus=%s load_cpus=%s load_nice=%s agents=%s frameworks=%s tasks=%s state_bytes=%s serial_ms(%s) concurrent%s_ms(%s) probe_window_s=%.1f loop_ticks_late_over_10ms=%s/%s offers_sent_per_s=%.0f quiet_window_s=%.1f quiet_loop_ticks_late_over_10ms=%s/%s quiet_offers_sent_per_s=%.0f master_peak_rss_mib=%d loadavg=%s" \
  "$config" "${master_cpus:-all}" "${load_cpus:-all}" "$load_nice" "$agents" "$frameworks" "$tasks" "$bytes" "$(pct "$dir/serial.txt")" "$concurrent" \
  "$(pct "$dir"/concurrent*.txt)" "$probe_s" "$((pl1 - pl0))" "$((pt1 - pt0))" \
  "$(echo "($po1 - $po0) / $probe_s" | bc -l)" "$quiet_s" "$((ql1 - ql0))" "$((qt1 - qt0))" \
  "$(echo "($qo1 - $qo0) / $quiet_s" | bc -l)" $(( rss / 1024 )) "${loadavg// /,}")
# Late ticks by what the loop spent the most time on since the tick before
# (allot_master_loop_late_ticks_total{section}): "section:N,..." of a window.
late_by() {  # late_by FROM TO
  awk '/^allot_master_loop_late_ticks_total\{/ {
      match($0, /section="[^"]*"/); s = substr($0, RSTART + 9, RLENGTH - 10)
      if (FNR == NR) before[s] = $NF; else after[s] = $NF }
    END { sep = ""; for (s in after) { d = after[s] - before[s]; if (d > 0) { printf "%s%s:%d", sep, s, d; sep = "," } } }' \
    "$dir/metrics.$1" "$dir/metrics.$2" | tr ' ' '_'
}
result="$result late_by_section_probe=$(late_by p0 p1) late_by_section_quiet=$(late_by q0 q1)"
# What /state adds: late ticks of the probe window less the quiet window's.
result="$result state_adds_late_over_10ms=$(( (pl1 - pl0) - (ql1 - ql0) ))"

# One line per window: its ticks, those > 10 ms late, how much of their
# lateness the loop's thread spent waiting for a CPU and how much was its
# own work (allot_master_loop_late_seconds_total{part}), the ticks whose
# own part alone was > 10 ms (allot_master_loop_own_lateness_seconds), and
# the longest late tick the master logged in the window (its log names the
# tick's number; the window's numbers are the lateness count's).
window() {  # window NAME FROM TO SECONDS
  local a="$dir/metrics.$2" b="$dir/metrics.$3" t0 t1
  d() { awk -v x="$(metric "$1" "$(cat "$b")")" -v y="$(metric "$1" "$(cat "$a")")" 'BEGIN { printf "%.9f", x - y }'; }
  t0=$(printf '%.0f' "$(metric allot_master_loop_lateness_seconds_count "$(cat "$a")")")
  t1=$(printf '%.0f' "$(metric allot_master_loop_lateness_seconds_count "$(cat "$b")")")
  local late own wait loop longest
  late=$(printf '%.0f' "$(echo "$(d allot_master_loop_lateness_seconds_count) - $(d 'allot_master_loop_lateness_seconds_bucket{le="0.01"}')" | bc -l)")
  own=$(printf '%.0f' "$(echo "$(d allot_master_loop_own_lateness_seconds_count) - $(d 'allot_master_loop_own_lateness_seconds_bucket{le="0.01"}')" | bc -l)")
  wait=$(d 'allot_master_loop_late_seconds_total{part="cpu_wait"}')
  loop=$(d 'allot_master_loop_late_seconds_total{part="loop"}')
  longest=$(awk -v t0="$t0" -v t1="$t1" '
      match($0, /loop tick #[0-9]+ [0-9.e+-]+ ms late, [0-9.e+-]+ ms of it/) {
        split(substr($0, RSTART, RLENGTH), f, /[# ]+/); n = f[3] + 0
        if (n > t0 && n <= t1) { c++; if (f[4] + 0 > max) { max = f[4] + 0; w = f[7] + 0 } } }
      END { if (c) printf "longest_ms=%.1f longest_cpu_wait_ms=%.1f logged=%d", max, w, c;
            else printf "longest_ms=- longest_cpu_wait_ms=- logged=0" }' "$dir/master.log")
  printf "WINDOW %s s=%.1f ticks=%d late_over_10ms=%d late_cpu_wait_ms=%.1f late_loop_ms=%.1f own_late_over_10ms=%d %s\n" \
    "$1" "$4" "$((t1 - t0))" "$late" "$(echo "$wait * 1000" | bc -l)" "$(echo "$loop * 1000" | bc -l)" "$own" "$longest"
}
window probe p0 p1 "$probe_s"
[ "$metrics_probe" = 0 ] || window metrics m0 m1 "$metrics_s"
window quiet q0 q1 "$quiet_s"
if [ "$metrics_probe" -gt 0 ]; then
  # The scrapes' loop time from the master's histogram over the window (the
  # window's two snapshots excluded: each scrape is counted from the next
  # one on, so m0's counts in the window and m1's does not).
  # (awk, not bc: prometheus-cpp writes small values as 7.5e-05)
  md() { awk -v x="$(metric "$1" "$(cat "$dir/metrics.m1")")" -v y="$(metric "$1" "$(cat "$dir/metrics.m0")")" 'BEGIN { printf "%.9f", x - y }'; }
  mn=$(printf '%.0f' "$(md allot_master_metrics_scrape_seconds_count)")
  metrics_line=$(printf "METRICS config=%s scrapes=%d bytes=%s curl_ms(%s) loop_mean_ms=%.3f gauges_mean_ms=%.4f serialize_mean_ms=%.3f loop_max_ms_since_start=%.3f loop_over_1ms=%d" \
    "$config" "$mn" "$(head -n1 "$dir/metrics_gets.txt" | awk '{print $2}')" "$(pct "$dir/metrics_gets.txt")" \
    "$(echo "$(md allot_master_metrics_scrape_seconds_sum) * 1000 / $mn" | bc -l)" \
    "$(echo "$(md 'allot_master_metrics_scrape_part_seconds_total{part="gauges"}') * 1000 / $mn" | bc -l)" \
    "$(echo "$(md 'allot_master_metrics_scrape_part_seconds_total{part="serialize"}') * 1000 / $mn" | bc -l)" \
    "$(awk -v x="$(metric allot_master_metrics_scrape_max_seconds "$(cat "$dir/metrics.m1")")" 'BEGIN { print x * 1000 }')" \
    "$(printf '%.0f' "$(echo "$mn - $(md 'allot_master_metrics_scrape_seconds_bucket{le="0.001"}')" | bc -l)")")
  echo "$metrics_line"
  read -r mt0 ml0 _ <<< "$m0"; read -r mt1 ml1 _ <<< "$m1"
  result="$result metrics_window_late_over_10ms=$((ml1 - ml0))/$((mt1 - mt0))"
fi
echo "RESULT $result"
# The master's own account of its late ticks (at most one line a second,
# and any later than the last logged).
grep -E 'loop tick #' "$dir/master.log" | tail -n 20 | sed 's/^/LATE /' || true
if [ "$sched_trace" = 1 ]; then
  windows="probe quiet"
  [ "$metrics_probe" = 0 ] || windows="probe metrics quiet"
  for w in $windows; do
    echo "SCHED $w: who held the CPUs while the master's loop thread (tid $master_pid) waited"
    perf script -i "$dir/sched.$w.data" -F cpu,time,event,trace 2>/dev/null |
      python3 "$(dirname "${BASH_SOURCE[0]}")/../sched_delays.py" --track "loop=tid:$master_pid" --attribute-ms 5 |
      sed "s/^/SCHED $w /"
  done
fi
[ -z "$out" ] || { echo "$result" >>"$out"; [ -z "${metrics_line:-}" ] || echo "$metrics_line" >>"$out"; }
