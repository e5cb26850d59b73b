#!/bin/bash
# Python SDK against the C++ SDK: the same batch of --tasks short
# tasks launched through one real allot-master onto emulated agents, first by
# examples/batch (C++ SDK), then by bench/sdk/py_batch.py (Python SDK), in one
# run; prints both launch rates and their ratio (target: Python >= 0.5x).
# --out DIR: the result's CSV and JSON lines there too (bench/result.py).
#
#   bench/sdk/run.sh --build-dir build --tasks 1000 --rounds 3
set -euo pipefail

build=build agents=500 tasks=1000 rounds=3 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$(mktemp -d /tmp/allot-sdk-bench.XXXXXX)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"  # pids, die, wait_for, registered, median, result

"$build/master/allot-master" --listen 127.0.0.1:0 --port-file "$dir/port" \
  --agent-timeout 60 --heartbeat-interval 10 >"$dir/master.log" 2>&1 &
pids+=($!)
wait_for 10 test -s "$dir/port" || die "master did not start"
master="127.0.0.1:$(cat "$dir/port")"
"$build/bench/scale/agent_emulator" --master "$master" --agents "$agents" \
  --resources "cpus:2;mem:2048" >"$dir/emulator.log" 2>&1 &
pids+=($!)
wait_for 60 registered || die "agents did not all register"
seq "$tasks" | sed "s/.*/true/" >"$dir/tasks.txt"

rate() { grep '^result' | grep -o 'finished_per_s=[0-9]*' | cut -d= -f2; }
cpp=() py=()
for r in $(seq "$rounds"); do
  cpp+=("$("$build/examples/allot-batch" --master "$master" --tasks "$dir/tasks.txt" --quiet \
           --resources "cpus:1;mem:128" --retries 0 | rate)")
  py+=("$(/usr/bin/python3 "$here/py_batch.py" --master "$master" --tasks "$tasks" | rate)")
done
c=$(median "${cpp[@]}") p=$(median "${py[@]}")
[ -z "$out" ] || export BENCH_OUT=$out
result sdk_rate tasks="$tasks" rounds="$rounds" cpp_per_s="$c" python_per_s="$p" \
  python_over_cpp="$(printf '%.2f' "$(echo "$p / $c" | bc -l)")" target_ratio_min=0.5 \
  cpp="${cpp[*]}" python="${py[*]}" loadavg="$(cut -d' ' -f1-3 /proc/loadavg)"
