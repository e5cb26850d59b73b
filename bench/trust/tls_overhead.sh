#!/bin/bash
# What mutual TLS costs, plaintext and TLS in one run, same
# binaries, same machine minute:
#   1. registrations/s: a real allot-master and --agents emulated agents
#      connecting at once (256 in flight), as after a failover; with the
#      master's CPU per registration and the time it spent runnable but
#      waiting for a core (/proc/PID/schedstat: on a busy machine that, not
#      TLS, is where the wall clock goes);
#   2. probe overhead: --probes runs of bench/scale/probe_framework (one
#      1 s task each) against that master and its agents; the overhead
#      includes the framework's own connect + handshake + registration;
#   3. launch latency: bench/agent/agent_bench (a real allot-agent, its
#      master link plaintext or TLS), RunTask sent -> RUNNING received.
# Prints one table with the TLS/plaintext ratio of each figure.
#
#   bench/trust/tls_overhead.sh --build-dir build --agents 2000
#   bench/trust/tls_overhead.sh --build-dir build --agents 10000 --source-addresses 4
set -euo pipefail

build=build agents=2000 sources=4 probes=5 launches=300
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --source-addresses) sources=$2; shift 2 ;;
    --probes) probes=$2; shift 2 ;;
    --launches) launches=$2; shift 2 ;;
    *) echo "tls_overhead.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "tls_overhead.sh: the agent bench needs root" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/allot-tls-overhead.XXXXXX)
. "$here/../lib.sh"
"$here/../../scripts/allot-certs" "$dir/c" >/dev/null || die "scripts/allot-certs failed"
ulimit -n "$(ulimit -Hn)"

tls_args() {  # $1 = mode, $2 = certificate name
  [ "$1" = tls ] || return 0
  echo "--tls-cert $dir/c/$2.crt --tls-key $dir/c/$2.key --tls-ca $dir/c/ca.crt"
}
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }
wait_s() { awk '{printf "%.2f", $2 / 1e9}' "/proc/$1/schedstat"; }
all_registered() { grep -qs 'all .* agents registered' "$dir/emulator.log"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

declare -A R
measure_master() {  # $1 = plain|tls
  local mode=$1 master_pid emulator_pid master line o
  rm -f "$dir/port" "$dir/emulator.log"
  # shellcheck disable=SC2046
  "$build/master/allot-master" --listen 127.0.0.1:0 --port-file "$dir/port" --stats-interval 0 \
    $(tls_args "$mode" master) >"$dir/master-$mode.log" 2>&1 &
  master_pid=$!
  pids+=("$master_pid")
  wait_for 10 test -s "$dir/port" || die "master ($mode) did not start"
  master="127.0.0.1:$(cat "$dir/port")"
  # shellcheck disable=SC2046
  "$build/bench/scale/agent_emulator" --master "$master" --agents "$agents" \
    --connect-burst 256 --source-addresses "$sources" $(tls_args "$mode" agent) \
    >"$dir/emulator.log" 2>&1 &
  emulator_pid=$!
  pids+=("$emulator_pid")
  wait_for $(( agents / 5 + 60 )) all_registered || die "agents ($mode) did not all register"
  R[$mode,rate]=$(grep -o '([0-9]* registrations/s' "$dir/emulator.log" | tr -dc 0-9)
  R[$mode,seconds]=$(grep -o 'registered in [0-9.]* s' "$dir/emulator.log" | awk '{print $3}')
  R[$mode,master_cpu]=$(cpu_s "$master_pid")
  R[$mode,master_wait]=$(wait_s "$master_pid")
  R[$mode,emulator_cpu]=$(cpu_s "$emulator_pid")
  R[$mode,load]=$(cut -d' ' -f1 /proc/loadavg)
  local overheads=()
  for i in $(seq "$probes"); do
    # shellcheck disable=SC2046
    line=$("$build/bench/scale/probe_framework" --master "$master" --task-seconds 1 \
      --task-resources "cpus:1;mem:512" $(tls_args "$mode" framework) 2>>"$dir/probe.log") ||
      die "probe $i ($mode) failed: $line"
    o=$(echo "$line" | grep -o 'overhead_ms=[-0-9.]*' | cut -d= -f2)
    overheads+=("$o")
  done
  R[$mode,probes]=$(IFS=,; echo "${overheads[*]}")
  R[$mode,probe]=$(printf '%s\n' "${overheads[@]}" | median)
  kill "$emulator_pid" "$master_pid" 2>/dev/null || true
  wait "$emulator_pid" "$master_pid" 2>/dev/null || true
}

measure_agent() {  # $1 = plain|tls
  local mode=$1 out tlsdir=()
  [ "$mode" = tls ] && tlsdir=(--tls-dir "$dir/c")
  out=$("$build/bench/agent/agent_bench" --agent "$build/agent/allot-agent" \
    --launches "$launches" --running 10 --window 2 "${tlsdir[@]}" 2>&1) ||
    die "agent_bench ($mode) failed: $out"
  R[$mode,p50]=$(echo "$out" | grep 'launch latency p50' | grep -o '| [0-9.]* ms' | tr -dc 0-9.)
  R[$mode,p99]=$(echo "$out" | grep 'launch latency p99' | grep -o '| [0-9.]* ms' | tr -dc 0-9.)
  R[$mode,agent_cpu]=$(echo "$out" | grep 'CPU per launch' | grep -o '| [0-9.]* /' | tr -dc 0-9.)
}

for mode in plain tls; do measure_master "$mode"; done
for mode in plain tls; do measure_agent "$mode"; done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a > 0) printf "%.2f", b / a; else print "-"}'; }
per_reg_ms() { awk -v c="$1" -v n="$agents" 'BEGIN {printf "%.3f", 1000 * c / n}'; }
row() { printf "| %s | %s | %s | %s |\n" "$1" "$2" "$3" "$(ratio "$4" "$5")"; }
echo "| measure ($agents agents) | plaintext | mutual TLS 1.3 | TLS / plaintext |"
echo "|---|---|---|---|"
row "registrations/s (all $agents in)" "${R[plain,rate]} (${R[plain,seconds]} s)" \
  "${R[tls,rate]} (${R[tls,seconds]} s)" "${R[plain,rate]}" "${R[tls,rate]}"
pm=$(per_reg_ms "${R[plain,master_cpu]}") tm=$(per_reg_ms "${R[tls,master_cpu]}")
row "master CPU per registration" "$pm ms" "$tm ms" "$pm" "$tm"
pe=$(per_reg_ms "${R[plain,emulator_cpu]}") te=$(per_reg_ms "${R[tls,emulator_cpu]}")
row "emulator CPU per registration (client side)" "$pe ms" "$te ms" "$pe" "$te"
row "master run-queue wait while registering" "${R[plain,master_wait]} s" \
  "${R[tls,master_wait]} s" "${R[plain,master_wait]}" "${R[tls,master_wait]}"
row "probe overhead, median of $probes" "${R[plain,probe]} ms [${R[plain,probes]}]" \
  "${R[tls,probe]} ms [${R[tls,probes]}]" "${R[plain,probe]}" "${R[tls,probe]}"
row "launch latency p50 (agent_bench, $launches launches)" "${R[plain,p50]} ms" \
  "${R[tls,p50]} ms" "${R[plain,p50]}" "${R[tls,p50]}"
row "launch latency p99" "${R[plain,p99]} ms" "${R[tls,p99]} ms" "${R[plain,p99]}" "${R[tls,p99]}"
row "agent CPU per launch" "${R[plain,agent_cpu]} ms" "${R[tls,agent_cpu]} ms" \
  "${R[plain,agent_cpu]}" "${R[tls,agent_cpu]}"
echo
echo "load average (1 min) at registration: plaintext ${R[plain,load]}, TLS ${R[tls,load]};" \
  "now $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
