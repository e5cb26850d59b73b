#!/bin/bash
# The paper's experiment 6.3 (data locality through delay scheduling):
# --frameworks instances of examples/locality share --agents emulated nodes
# of 4 slots each (bench/scale's agent_emulator, like the paper's 93 nodes of
# 4 cores); each instance scans --blocks blocks whose 3 replicas sit on nodes
# picked at random; tasks last --task-seconds. Runs the job with 0 s, 1 s and
# 5 s delay and prints, per delay, the share of local tasks and the mean job
# run time beside the paper's figures (1 s: over 90%, 5 s: 95%).
#
#   bench/locality/run.sh --build-dir build
set -euo pipefail

build=build agents=93 frameworks=16 blocks=100 task_s=5 delays="0 1 5" seed=7 out="" plot=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --frameworks) frameworks=$2; shift 2 ;;
    --blocks) blocks=$2; shift 2 ;;
    --task-seconds) task_s=$2; shift 2 ;;
    --delays) delays=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --plot) plot=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
dir=$(mktemp -d /tmp/allot-locality.XXXXXX)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

"$build/master/allot-master" --listen 127.0.0.1:0 --port-file "$dir/port" \
  --agent-timeout 60 --heartbeat-interval 10 >"$dir/master.log" 2>&1 &
pids+=($!)
wait_for 10 test -s "$dir/port" || die "master did not start"
master="127.0.0.1:$(cat "$dir/port")"
"$build/bench/scale/agent_emulator" --master "$master" --agents "$agents" \
  --resources "cpus:4;mem:15360" >"$dir/emulator.log" 2>&1 &
pids+=($!)
wait_for 60 registered || die "agents did not all register"

# Block placement: 3 distinct random nodes (emu-<i>, the emulator's host
# names) per block, the same for every delay.
for f in $(seq "$frameworks"); do
  awk -v n="$blocks" -v agents="$agents" -v seed="$((seed * 1000 + f))" 'BEGIN {
    srand(seed)
    for (b = 0; b < n; b++) {
      delete used; hosts = ""
      for (r = 0; r < 3 && r < agents; ) {
        h = int(rand() * agents); if (h in used) continue
        used[h] = 1; hosts = hosts (r ? "," : "") "emu-" h; r++
      }
      printf "b%d %s\n", b, hosts
    }
  }' >"$dir/blocks$f.txt"
done

echo "delay_s  locality  mean_run_s  paper"
results=()
for delay in $delays; do
  jobs=()
  for f in $(seq "$frameworks"); do
    "$build/examples/allot-locality" --master "$master" --blocks "$dir/blocks$f.txt" \
      --delay "$delay" --task-seconds "$task_s" --resources "cpus:1;mem:1024" \
      --name "scan-$f-d$delay" --timeout 900 >"$dir/job-$delay-$f.log" 2>&1 &
    jobs+=($!)
  done
  for j in "${jobs[@]}"; do wait "$j" || die "a locality job failed (delay $delay)"; done
  line=$(cat "$dir"/job-"$delay"-*.log | grep '^result' | awk '
    { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      tasks += v["tasks"]; local += v["local"]; run += v["run_s"]; n++ }
    END { printf "%.4f %.2f", local / tasks, run / n }')
  set -- $line
  paper="-"; [ "$delay" = 0 ] && paper="(no delay: below 90%)"
  [ "$delay" = 1 ] && paper=">90%"; [ "$delay" = 5 ] && paper="95%"
  printf "%7s  %7.1f%%  %10s  %s\n" "$delay" "$(echo "$1 * 100" | bc -l)" "$2" "$paper"
  results+=("locality_delay_${delay}s=$1" "mean_run_s_delay_${delay}s=$2")
  echo "$delay $(echo "$1 * 100" | bc -l) $2" >>"$dir/plot.dat"
done
[ -z "$out" ] || export BENCH_OUT=$out
result locality agents="$agents" slots_per_agent=4 frameworks="$frameworks" blocks="$blocks" \
  task_s="$task_s" "${results[@]}" loadavg="$(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "$plot" ]; then
  printf '1 90\n5 95\n' >"$dir/paper.dat"
  gnuplot -e "set terminal png size 640,400; set output '$plot';
    set title 'Data locality with delay scheduling (paper 6.3)'; set xlabel 'delay (s)';
    set ylabel 'local tasks (%)'; set yrange [0:105]; set key bottom right;
    plot '$dir/plot.dat' using 1:2 with linespoints lw 2 title 'allot (this machine)',
         '$dir/paper.dat' using 1:2 with points pt 7 ps 2 title 'paper (Mesos, EC2)'"
  echo "plot: $plot"
fi
