#!/bin/bash
# The paper's scale experiment (section 6.5) on this machine: a real
# allot-master, N emulated agents (2 task slots each), F load frameworks
# launching tasks of N(mean, stddev) seconds, then probes that each run one
# 10 s task and report their overhead. Prints the result (bench/result.py;
# --out DIR: its CSV and JSON lines there too).
#
#   bench/scale/run.sh --build-dir build --agents 50000 --frameworks 200
#
# --shards: the agents reach the master through link shards (allot-shard),
# one per emulator process, so no process holds more than 15,000 agent
# links; the frameworks and probes still talk to the master.
set -euo pipefail

build=build agents=2000 frameworks=20 mean=30 stddev=10 probes=5 warmup=30 out="" shards=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --frameworks) frameworks=$2; shift 2 ;;
    --task-mean) mean=$2; shift 2 ;;
    --task-stddev) stddev=$2; shift 2 ;;
    --probes) probes=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --shards) shards=1; shift ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

dir=$(mktemp -d /tmp/allot-scale.XXXXXX)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"  # pids, die, wait_for, registered, result

# Every agent is a socket in the emulator and one in the master.
ulimit -Hn 262144 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"
shard_flags=()
[ "$shards" = 0 ] || shard_flags=(--shard-listen 127.0.0.1:0 --shard-port-file "$dir/shard-listen.port")
"$build/master/allot-master" --listen 127.0.0.1:0 --port-file "$dir/port" "${shard_flags[@]}" \
  --agent-timeout 60 --heartbeat-interval 10 --offer-timeout 30 --stats-interval 5 \
  >"$dir/master.log" 2>&1 &
master_pid=$!
pids+=("$master_pid")
wait_for 10 test -s "$dir/port" || die "master did not start"
master="127.0.0.1:$(cat "$dir/port")"

# Agents are spread over emulator processes of at most 15,000 each (this
# machine caps every process at RLIMIT_NOFILE 20,000 and denies
# CAP_SYS_RESOURCE to raise it).
emulators=$(( (agents + 14999) / 15000 ))
for e in $(seq 0 $(( emulators - 1 ))); do
  n=$(( agents / emulators + (e < agents % emulators ? 1 : 0) ))
  target=$master
  if [ "$shards" = 1 ]; then
    "$build/shard/allot-shard" --listen 127.0.0.1:0 --port-file "$dir/shard$e.port" \
      --master "127.0.0.1:$(cat "$dir/shard-listen.port")" >"$dir/shard$e.log" 2>&1 &
    pids+=($!)
    wait_for 10 grep -qs "linked to the leader" "$dir/shard$e.log" || die "shard $e did not link"
    target="127.0.0.1:$(cat "$dir/shard$e.port")"
  fi
  "$build/bench/scale/agent_emulator" --master "$target" --agents "$n" \
    --resources "cpus:2;mem:2048" --source-addresses "$(( n / 20000 + 1 ))" \
    --first-source "$(( 2 + e * 2 ))" >"$dir/emulator$e.log" 2>&1 &
  pids+=($!)
done
wait_for $(( agents / 200 + 60 )) registered || die "agents did not all register"

"$build/bench/scale/load_frameworks" --master "$master" --frameworks "$frameworks" \
  --task-mean "$mean" --task-stddev "$stddev" >"$dir/load.log" 2>&1 &
pids+=($!)
sleep "$warmup"
full() {
  local tasks
  tasks=$(grep -o 'tasks=[0-9]*' "$dir/master.log" | tail -1 | cut -d= -f2)
  [ -n "$tasks" ] && [ "$tasks" -ge $(( agents * 2 * 95 / 100 )) ]
}
wait_for 180 full || die "the cluster never filled (95% of $((agents * 2)) slots)"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$master_pid/stat"; }
ticks0=$(cpu_ticks); t0=$(date +%s.%N)
overheads=()
for i in $(seq "$probes"); do
  line=$("$build/bench/scale/probe_framework" --master "$master" --task-seconds 10) ||
    die "probe $i failed: $line"
  echo "$line"
  overheads+=("$(echo "$line" | grep -o 'overhead_ms=[-0-9.]*' | cut -d= -f2)")
done
ticks1=$(cpu_ticks); t1=$(date +%s.%N)

hz=$(getconf CLK_TCK)
cpu=$(echo "($ticks1 - $ticks0) / $hz / ($t1 - $t0) * 100" | bc -l)
rss=$(awk '/VmHWM/ {print $2}' "/proc/$master_pid/status")
stats=$(grep 'stats:' "$dir/master.log" | tail -1)
load=$(grep '^load:' "$dir/load.log" | tail -1)
sorted=$(printf '%s\n' "${overheads[@]}" | sort -g)
mid=$(echo "$sorted" | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
worst=$(echo "$sorted" | tail -1)
msgs_in=$(echo "$stats" | grep -o 'msgs_in_per_s=[0-9]*' | cut -d= -f2)
msgs_out=$(echo "$stats" | grep -o 'msgs_out_per_s=[0-9]*' | cut -d= -f2)
o2r() { echo "$load" | grep -o "offer_to_running_ms p50=[0-9.]* p99=[0-9.]*" | grep -o "$1=[0-9.]*" | cut -d= -f2; }

[ -z "$out" ] || export BENCH_OUT=$out
result scale agents="$agents" shards="$(( shards * emulators ))" frameworks="$frameworks" probes_ms="${overheads[*]}" median_ms="$mid" \
  worst_ms="$worst" paper_overhead_ms_max=1000 master_cpu_pct="$(printf '%.0f' "$cpu")" \
  master_peak_rss_mib=$(( rss / 1024 )) msgs_in_per_s="$msgs_in" msgs_out_per_s="$msgs_out" \
  offer_to_running_ms_p50="$(o2r p50)" offer_to_running_ms_p99="$(o2r p99)" \
  launches_per_s="$(echo "$load" | grep -o 'launches_per_s=[0-9]*' | cut -d= -f2)"
