#!/bin/bash
# What link shards save the master: the paper's scale experiment
# (bench/scale/run.sh) at one size twice in a row, the agents connected to
# the master directly and then through link shards, and the master's CPU
# (during the probes) and peak RSS of each, per 10,000 agents. 19,000 is
# the largest size a direct run fits under RLIMIT_NOFILE 20,000 here.
#
#   bench/scale/shard_cost.sh --build-dir build --agents 19000 --frameworks 200
set -euo pipefail
build=build agents=19000 frameworks=200 probes=3
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --frameworks) frameworks=$2; shift 2 ;;
    --probes) probes=$2; shift 2 ;;
    *) echo "shard_cost.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
dir=$(mktemp -d /tmp/allot-shard-cost.XXXXXX)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"  # die, result

run=("$bench_dir/scale/run.sh" --build-dir "$build" --agents "$agents" --frameworks "$frameworks"
     --probes "$probes" --warmup 10)
BENCH_OUT="$dir/direct" "${run[@]}" >"$dir/direct.log" 2>&1 || die "the direct run failed"
BENCH_OUT="$dir/shards" "${run[@]}" --shards >"$dir/shards.log" 2>&1 || die "the run through shards failed"

field() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])[sys.argv[2]])' "$dir/$1/scale.jsonl" "$2"; }
per10k() { awk -v v="$1" -v n="$agents" 'BEGIN {printf "%.2f", v * 10000 / n}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
cpu_d=$(field direct master_cpu_pct) cpu_s=$(field shards master_cpu_pct)
rss_d=$(field direct master_peak_rss_mib) rss_s=$(field shards master_peak_rss_mib)
unset BENCH_OUT
result shard_cost agents="$agents" frameworks="$frameworks" shards="$(field shards shards)" \
  direct_cpu_pct_per_10k="$(per10k "$cpu_d")" shards_cpu_pct_per_10k="$(per10k "$cpu_s")" \
  direct_rss_mib_per_10k="$(per10k "$rss_d")" shards_rss_mib_per_10k="$(per10k "$rss_s")" \
  cpu_ratio="$(ratio "$cpu_s" "$cpu_d")" rss_ratio="$(ratio "$rss_s" "$rss_d")" \
  direct_median_ms="$(field direct median_ms)" shards_median_ms="$(field shards median_ms)"
