#!/bin/bash
# What health checks cost: --tasks sleeping tasks on one real agent (one
# built-in executor), first without checks, then with a TCP check and an
# HTTP check each at a 1 s interval against a loopback listener. For each
# phase the CPU time of the agent and its executors (with their reaped
# children) over --window seconds, as % of one core; the checks' cost is
# the difference to the phase without checks (target: under 2 % of one
# core for 1,000 tasks). The listener's own CPU is not counted: it plays
# the tasks' servers, with HTTP/1.1 keep-alive (--server keep-alive, the
# default) or closing the connection after each answer (--server close).
#
#   bench/health/run.sh --build-dir build --tasks 1000 --window 30
set -euo pipefail

build=build tasks=1000 window=30 phases="none tcp http" server=keep-alive
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --phases) phases=$2; shift 2 ;;
    --server) server=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$server" in keep-alive|close) ;; *) echo "run.sh: --server keep-alive|close" >&2; exit 2 ;; esac
[ "$(id -u)" -eq 0 ] || { echo "run.sh: the agent needs root" >&2; exit 2; }
build=$(realpath "$build")
dir=$(mktemp -d /tmp/allot-health-bench.XXXXXX)
chmod 755 "$dir"
source "$(dirname "$0")/../lib.sh"
hz=$(getconf CLK_TCK)

"$build/master/allot-master" --listen 127.0.0.1:0 --port-file "$dir/port" >"$dir/master.log" 2>&1 &
pids+=($!)
wait_for 10 test -s "$dir/port" || die "master did not start"
master="127.0.0.1:$(cat "$dir/port")"
# Its own cgroup root, removed on exit: an agent stopped by a signal keeps
# its executors' cgroups for its next start, which this run never makes.
cgroups_root="allot-health-bench.$(basename "$dir")"
on_exit remove_cgroups
"$build/agent/allot-agent" --master "$master" --work-dir "$dir/agent" --cgroups-root "$cgroups_root" \
  --resources "cpus:64;mem:65536;disk:1024" >"$dir/agent.log" 2>&1 &
agent=$!
pids+=($agent)
wait_for 15 grep -q "registered with master" "$dir/agent.log" || die "agent did not register"

# The tasks' server: answers each request with 200 and keeps the
# connection (HTTP/1.1 keep-alive, as most servers do) or closes it.
python3 - "$dir/listener.port" "$server" >"$dir/listener.log" 2>&1 <<'PY' &
import asyncio, sys
close = sys.argv[2] == "close"
answer = b"HTTP/1.1 200 OK\r\n" + (b"Connection: close\r\n" if close else b"") + b"Content-Length: 0\r\n\r\n"
async def serve(reader, writer):
    try:
        while True:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
            if close: break
    except Exception:
        pass
    writer.close()
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=4096)
    open(sys.argv[1], "w").write(str(server.sockets[0].getsockname()[1]))
    await server.serve_forever()
asyncio.run(main())
PY
pids+=($!)
wait_for 10 test -s "$dir/listener.port" || die "listener did not start"
port=$(cat "$dir/listener.port")

# CPU ticks of the agent and every executor of this run (found by the
# sandbox in their environment), with their reaped children.
ticks() {
  local total=0 p f
  for p in $agent $(executors); do
    f=$(cut -d')' -f2 "/proc/$p/stat" 2>/dev/null) || continue
    set -- $f
    total=$(( total + ${12} + ${13} + ${14} + ${15} ))
  done
  echo "$total"
}

# This run's executors (found by the sandbox in their environment).
executors() {
  local environs
  environs=$(pgrep -x allot-executor | sed 's|.*|/proc/&/environ|') || return 0
  # shellcheck disable=SC2086  # one path per executor
  grep -ls "$dir" $environs | cut -d/ -f3 || true
}
no_executors() { [ -z "$(executors)" ]; }

# Every cgroup of the agent's root, deepest first, in every hierarchy;
# only empty ones can go, and a live process is never touched.
remove_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/"$cgroups_root" /sys/fs/cgroup/"$cgroups_root"; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

# True once FILE has at least N lines holding PATTERN.
lines_at_least() { [ "$(grep -c -- "$1" "$2")" -ge "$3" ]; }

declare -A pct
phase() {
  local name=$1 flags=() out="$dir/execute-$1.log"
  case "$name" in
    tcp) flags=(--health-tcp "$port") ;;
    http) flags=(--health-http "$port/health") ;;
  esac
  [ "$name" = none ] || flags+=(--health-interval 1 --health-delay 0 --health-grace 0 --health-timeout 1)
  "$build/cli/allot-execute" --master "$master" --name "bench-$name" --instances "$tasks" \
    --command "sleep 3600" --resources "cpus:0.01;mem:2" --timeout 300 "${flags[@]}" >"$out" 2>&1 &
  local execute=$!
  local want="RUNNING"
  [ "$name" = none ] || want="healthy"
  wait_for 300 lines_at_least " $want" "$out" "$tasks" || die "$name: $tasks tasks not $want"
  sleep 5
  local t0 t1 w0 w1
  t0=$(ticks); w0=$(date +%s.%N)
  sleep "$window"
  t1=$(ticks); w1=$(date +%s.%N)
  local unhealthy
  unhealthy=$(grep -c " unhealthy" "$out" || true)
  pct[$name]=$(echo "($t1 - $t0) / $hz / ($w1 - $w0) * 100" | bc -l)
  printf "%s cpu_pct_of_one_core=%.3f unhealthy=%s\n" "$name" "${pct[$name]}" "$unhealthy"
  kill -INT "$execute"
  wait "$execute" || true
  # The tasks end with their framework: the next phase starts clean.
  wait_for 120 no_executors || echo "warning: $name: executors still running after 120 s" >&2
}

echo "tasks=$tasks window_s=$window loadavg=[$(cut -d' ' -f1-3 /proc/loadavg)]"
for p in $phases; do phase "$p"; done
# The checks' cost: each phase with checks against the phase without.
fields=()
for p in $phases; do
  [ "$p" = none ] || [ -z "${pct[none]:-}" ] || \
    fields+=("${p}_cost_pct=$(printf %.3f "$(echo "${pct[$p]} - ${pct[none]}" | bc -l)")")
done
result health_checks tasks="$tasks" window_s="$window" server="$server" "${fields[@]}" target_pct=2 \
  loadavg="$(cut -d' ' -f1-3 /proc/loadavg)"
