#!/bin/bash
# The paper's experiment 6.2 (overhead): the same CPU-bound job run directly
# on this machine (xargs -P <cpus>) and through allot (a real master and
# agent with --isolation cgroups/cpu,cgroups/mem, one executor per task,
# examples/batch as the framework, each task cpus:1 so the same number run
# at once). The job: --long tasks of ~--long-s seconds and --short tasks of
# ~--short-s seconds of awk arithmetic (calibrated on this machine first).
# Rounds alternate the order; prints both completion times and the overhead
# (paper: under 4%; target here: under 2%). --out DIR: the result's CSV and
# JSON lines there too (bench/result.py).
#
#   bench/overhead/run.sh --build-dir build --rounds 3
set -euo pipefail

build=build rounds=3 short=40 short_s=0.5 long=4 long_s=5 out="" plot=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --short) short=$2; shift 2 ;;
    --short-s) short_s=$2; shift 2 ;;
    --long) long=$2; shift 2 ;;
    --long-s) long_s=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --plot) plot=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "run.sh: the agent needs root" >&2; exit 2; }
cpus=$(nproc)
dir=$(mktemp -d /tmp/allot-overhead.XXXXXX)
chmod 755 "$dir"
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"  # pids, cleanup, die, wait_for, median, result
# Executors and tasks run with their sandbox under $dir.
on_exit 'pkill -KILL -f "$dir" 2>/dev/null'
now() { date +%s.%N; }

# Calibrate: awk loop iterations per second on this machine.
probe=20000000
t0=$(now); awk -v n="$probe" 'BEGIN { for (i = 0; i < n; i++) s += i }'; t1=$(now)
per_s=$(echo "$probe / ($t1 - $t0)" | bc)
work() { printf "awk -v n=%d 'BEGIN { for (i = 0; i < n; i++) s += i }'\n" "$(echo "$per_s * $1 / 1" | bc)"; }
: >"$dir/job.txt"
for _ in $(seq "$long"); do work "$long_s" >>"$dir/job.txt"; done
for _ in $(seq "$short"); do work "$short_s" >>"$dir/job.txt"; done

"$build/master/allot-master" --listen 127.0.0.1:0 --port-file "$dir/port" >"$dir/master.log" 2>&1 &
pids+=($!)
wait_for 10 test -s "$dir/port" || die "master did not start"
master="127.0.0.1:$(cat "$dir/port")"
"$build/agent/allot-agent" --master "$master" --work-dir "$dir/agent" \
  --resources "cpus:$cpus;mem:4096" --isolation cgroups/cpu,cgroups/mem >"$dir/agent.log" 2>&1 &
pids+=($!)
sleep 1

direct() { xargs -d '\n' -n 1 -P "$cpus" sh -c <"$dir/job.txt"; }
through() {
  "$build/examples/allot-batch" --master "$master" --tasks "$dir/job.txt" --quiet \
    --resources "cpus:1;mem:64" --retries 0 >>"$dir/batch.log" || die "the batch job failed"
}
timed() { local t0 t1; t0=$(now); "$@"; t1=$(now); echo "$t1 - $t0" | bc -l; }
d=() a=()
for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then d+=("$(timed direct)"); a+=("$(timed through)")
  else a+=("$(timed through)"); d+=("$(timed direct)"); fi
done
dm=$(median "${d[@]}") am=$(median "${a[@]}")
overhead=$(echo "($am - $dm) / $dm * 100" | bc -l)
[ -z "$out" ] || export BENCH_OUT=$out
result overhead job="${long}x${long_s}s+${short}x${short_s}s" cpus="$cpus" \
  direct_s="$(printf '%.2f' "$dm")" allot_s="$(printf '%.2f' "$am")" \
  overhead_pct="$(printf '%.2f' "$overhead")" paper_overhead_pct_max=4 \
  direct="$(printf '%.2f ' "${d[@]}")" allot="$(printf '%.2f ' "${a[@]}")" \
  loadavg="$(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "$plot" ]; then
  printf '0 direct %s\n1 allot %s\n' "$dm" "$am" >"$dir/plot.dat"
  gnuplot -e "set terminal png size 640,400; set output '$plot';
    set title 'Job completion time, directly and through allot (paper 6.2)';
    set ylabel 'seconds (median of $rounds)'; set style fill solid 0.6; set boxwidth 0.5;
    set yrange [0:*]; set xrange [-0.5:1.5];
    plot '$dir/plot.dat' using 1:3:xtic(2) with boxes notitle"
  echo "plot: $plot"
fi
