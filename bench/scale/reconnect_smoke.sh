#!/bin/bash
# The emulator reconnects as the real agent does (bench suite smoke check):
#   1. the master is stopped (SIGSTOP) while the agents connect, so every
#      first attempt times out in the listen backlog; after SIGCONT all
#      register through retries (failed attempts and retries both > 0);
#   2. frameworks start long tasks on the agents and go away; the master is
#      killed and a new one started on the same port: every agent loses its
#      link and re-registers with its id, its secret and the tasks it runs,
#      so the new master's /state lists each of those tasks RUNNING on the
#      same agent (what reconciliation through it answers).
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
  rm -f "$dir/http-port"
  "$build/master/allot-master" --listen "$1" --port-file "$dir/port" --stats-interval 0 \
    --max-pending-handshakes 32 --http-listen 127.0.0.1:0 --http-port-file "$dir/http-port" \
    >>"$dir/master.log" 2>&1 &
  master_pid=$!
  pids+=("$master_pid")
  wait_for 10 test -s "$dir/port" || die "master did not start"
  wait_for 10 test -s "$dir/http-port" || die "master's HTTP endpoints did not start"
}
# "task agent" of every RUNNING task in the master's /state, sorted.
running_tasks() {
  "$build/cli/allotctl" --master "127.0.0.1:$(cat "$dir/http-port")" tasks --json |
    python3 -c 'import json, sys
for t in json.load(sys.stdin):
    if t.get("state") == "TASK_RUNNING": print(t["taskId"], t["agentId"])' | sort
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

"$build/bench/scale/load_frameworks" --master "127.0.0.1:$port" --frameworks 2 \
  --task-resources "cpus:1;mem:64" --task-mean 600 --task-stddev 0 >"$dir/frameworks.log" 2>&1 &
frameworks_pid=$!
pids+=("$frameworks_pid")
enough() { [ "$(running_tasks | wc -l)" -ge 20 ]; }
wait_for 30 enough || die "the frameworks' tasks did not start"
kill -KILL "$frameworks_pid"  # no more launches; the tasks keep running
wait "$frameworks_pid" 2>/dev/null || true
sleep 1
running_tasks > "$dir/before.txt"

kill -KILL "$master_pid"
wait "$master_pid" 2>/dev/null || true
rm -f "$dir/port"
start_master "127.0.0.1:$port"
rereg() { local n; n=$(last reregistrations); [ "${n:-0}" -ge "$agents" ]; }
wait_for 60 rereg || die "agents did not all re-register with the new master"
grep -q "registered with" "$dir/master.log" || die "the new master logged no registration"
echo "restarted master: $(grep -o 'registered=.*' "$dir/emulator.log" | tail -1)"
running_tasks > "$dir/after.txt"
cmp -s "$dir/before.txt" "$dir/after.txt" ||
  die "tasks RUNNING before the restart ($(wc -l < "$dir/before.txt")) are not those the new master lists RUNNING ($(wc -l < "$dir/after.txt")): $(diff "$dir/before.txt" "$dir/after.txt" | head -5)"
echo "restarted master lists all $(wc -l < "$dir/before.txt") running tasks RUNNING on their agents"
echo "reconnect smoke: ok"
