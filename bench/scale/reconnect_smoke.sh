#!/bin/bash
# The emulator reconnects as the real agent does (bench suite smoke check):
#   1. the master is stopped (SIGSTOP) while the agents connect, so every
#      first attempt times out in the listen backlog; after SIGCONT all
#      register through retries (failed attempts and retries both > 0);
#   2. the master is killed and a new one started on the same port: every
#      agent loses its link and re-registers with its id and secret.
#
#   bench/scale/reconnect_smoke.sh --build-dir build --agents 300
set -euo pipefail

build=build agents=300
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    *) echo "reconnect_smoke.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/allot-reconnect.XXXXXX)
. "$here/../lib.sh"

start_master() {  # $1 = listen address
  "$build/master/allot-master" --listen "$1" --port-file "$dir/port" --stats-interval 0 \
    --max-pending-handshakes 32 >>"$dir/master.log" 2>&1 &
  master_pid=$!
  pids+=("$master_pid")
  wait_for 10 test -s "$dir/port" || die "master did not start"
}
last() {  # the latest value of counter $1 in the emulator's report lines
  grep -o "$1=[0-9]*" "$dir/emulator.log" | tail -1 | cut -d= -f2
}

start_master 127.0.0.1:0
port=$(cat "$dir/port")
kill -STOP "$master_pid"
"$build/bench/scale/agent_emulator" --master "127.0.0.1:$port" --agents "$agents" \
  --connect-burst 64 --attempt-timeout 1 --reconnect-max 2 >"$dir/emulator.log" 2>&1 &
pids+=($!)
sleep 2
kill -CONT "$master_pid"
wait_for 60 grep -qs "all $agents agents registered" "$dir/emulator.log" ||
  die "agents did not all register after the master resumed"
line=$(grep "all $agents agents registered" "$dir/emulator.log")
failed=$(echo "$line" | grep -o '[0-9]* failed attempts' | cut -d' ' -f1)
retries=$(echo "$line" | grep -o '[0-9]* retries' | cut -d' ' -f1)
[ "$failed" -gt 0 ] && [ "$retries" -ge "$failed" ] ||
  die "expected timed-out first attempts and their retries: $line"
echo "stopped master: $line"

kill -KILL "$master_pid"
wait "$master_pid" 2>/dev/null || true
rm -f "$dir/port"
start_master "127.0.0.1:$port"
rereg() { local n; n=$(last reregistrations); [ "${n:-0}" -ge "$agents" ]; }
wait_for 60 rereg || die "agents did not all re-register with the new master"
grep -q "registered with" "$dir/master.log" || die "the new master logged no registration"
echo "restarted master: $(grep -o 'registered=.*' "$dir/emulator.log" | tail -1)"
echo "reconnect smoke: ok"
