#!/bin/bash
# Placement throughput: K allot-batch frameworks feed T short tasks
# (`true`, 0 s on an emulated agent) onto N emulated agents (bench/scale's
# agent_emulator, 2 slots each) through one real allot-master. Prints tasks
# placed per second (first offer to the last task reaching RUNNING, which the
# emulator answers as soon as RunTask arrives) and the end-to-end rate (first
# offer to the last FINISHED), beside Nomad's C1M (3,750 containers/s) and
# kube-scheduler (810-1,100 pods/s).
#
#   bench/placement/run.sh --build-dir build --agents 10000 --tasks 100000 --frameworks 10
set -euo pipefail

build=build agents=10000 tasks=100000 frameworks=10 out="" plot=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --frameworks) frameworks=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --plot) plot=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$agents" -ge 1 ] && [ "$agents" -le 19000 ] || { echo "run.sh: --agents 1..19000 (RLIMIT_NOFILE)" >&2; exit 2; }

dir=$(mktemp -d /tmp/allot-placement.XXXXXX)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

ulimit -n "$(ulimit -Hn)"
"$build/master/allot-master" --listen 127.0.0.1:0 --port-file "$dir/port" \
  --agent-timeout 60 --heartbeat-interval 10 --offer-timeout 30 --stats-interval 5 \
  >"$dir/master.log" 2>&1 &
pids+=($!)
wait_for 10 test -s "$dir/port" || die "master did not start"
master="127.0.0.1:$(cat "$dir/port")"

"$build/bench/scale/agent_emulator" --master "$master" --agents "$agents" \
  --resources "cpus:2;mem:2048" --source-addresses "$(( agents / 20000 + 1 ))" \
  >"$dir/emulator.log" 2>&1 &
pids+=($!)
wait_for $(( agents / 200 + 60 )) registered || die "agents did not all register"

per=$(( tasks / frameworks ))
for f in $(seq "$frameworks"); do
  seq "$per" | sed "s/.*/true/" >"$dir/tasks$f.txt"
done
for f in $(seq "$frameworks"); do
  "$build/examples/allot-batch" --master "$master" --tasks "$dir/tasks$f.txt" --quiet \
    --name "placement-$f" --resources "cpus:1;mem:128" --retries 0 --timeout 60 \
    >"$dir/batch$f.log" 2>&1 &
  batch_pids+=($!)
done
for p in "${batch_pids[@]}"; do wait "$p" || die "a batch framework failed (exit $?)"; done

summary=$(cat "$dir"/batch*.log | grep '^result' | awk '
  { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    n += v["tasks"]; done += v["finished"]
    if (first == "" || v["first_offer_at"] < first) first = v["first_offer_at"]
    if (v["last_running_at"] > running) running = v["last_running_at"]
    if (v["end_at"] > end) end = v["end_at"] }
  END { printf "tasks=%d finished=%d placed_per_s=%.0f end_to_end_per_s=%.0f wall_s=%.2f",
        n, done, n / (running - first), done / (end - first), end - first }')
load=$(cut -d' ' -f1-3 /proc/loadavg)
[ -z "$out" ] || export BENCH_OUT=$out
# shellcheck disable=SC2086  # $summary: KEY=VALUE words
result placement agents="$agents" frameworks="$frameworks" $summary loadavg="$load"
awk -v s="$summary" 'BEGIN {
  split(s, f, " "); for (i in f) { split(f[i], kv, "="); v[kv[1]] = kv[2] }
  printf "placed/s: allot %s vs Nomad C1M 3750 (%.1fx) vs kube-scheduler 1100 (%.1fx)\n",
         v["placed_per_s"], v["placed_per_s"] / 3750, v["placed_per_s"] / 1100 }'
if [ -n "$plot" ]; then
  placed=$(echo "$summary" | grep -o 'placed_per_s=[0-9]*' | cut -d= -f2)
  printf '0 "allot (this machine)" %s\n1 "Nomad C1M" 3750\n2 "kube-scheduler" 1100\n' "$placed" >"$dir/plot.dat"
  gnuplot -e "set terminal png size 640,400; set output '$plot';
    set title 'Tasks placed per second ($tasks tasks, $agents agents)'; set ylabel 'tasks/s';
    set style fill solid 0.6; set boxwidth 0.5; set yrange [0:*]; set xrange [-0.5:2.5];
    plot '$dir/plot.dat' using 1:3:xtic(2) with boxes notitle"
  echo "plot: $plot"
fi
