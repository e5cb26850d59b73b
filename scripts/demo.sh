#!/bin/bash
# demo.sh BUILD_DIR: a one-node allot cluster on loopback. Starts
# allot-master and allot-agent (with the cgroup isolators when this agent
# and host support them) in a temporary work dir, runs 3 instances of a
# short command through allot-execute, shows every state change and each
# task's stdout from its sandbox, and stops everything on exit: no process
# or cgroup is left behind.
set -euo pipefail

build=${1:?usage: scripts/demo.sh BUILD_DIR}
build=$(cd "$build" && pwd)
master_bin=$build/master/allot-master
agent_bin=$build/agent/allot-agent
execute_bin=$build/cli/allot-execute
for b in "$master_bin" "$agent_bin" "$execute_bin" "$build/cli/allot-executor"; do
  [[ -x $b ]] || { echo "demo: $b is not built (ninja -C $build)" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/allot-demo-XXXXXX)
chmod 711 "$tmp"  # tasks run as nobody: they must reach their sandboxes
work=$tmp/work
master_pid=
agent_pid=

# Processes whose working directory is under the demo's work dir
# (executors and their tasks run in their sandboxes).
processes_under_work() {
  local p cwd
  for p in /proc/[0-9]*; do
    cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
    [[ $cwd == "$work"* ]] && echo "${p#/proc/}"
  done
  return 0
}

wait_for() {  # wait_for SECONDS COMMAND...
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

no_executors() { [[ -z $(processes_under_work) ]]; }

cleanup() {
  local rc=$?
  # Executors exit on their own once idle; the agent then removes their
  # cgroups. Only then stop the agent and the master.
  if [[ -n $agent_pid ]]; then
    wait_for 10 no_executors || true
    kill -TERM "$agent_pid" 2>/dev/null || true
    wait "$agent_pid" 2>/dev/null || true
  fi
  local left
  left=$(processes_under_work)
  if [[ -n $left ]]; then
    echo "demo: killing leftover processes: $left"
    kill -KILL $left 2>/dev/null || true
  fi
  if [[ -n $master_pid ]]; then
    kill -TERM "$master_pid" 2>/dev/null || true
    wait "$master_pid" 2>/dev/null || true
  fi
  if ((rc != 0)); then
    echo "demo: FAILED (exit $rc); logs kept in $tmp"
    tail -n 20 "$tmp"/*.log 2>/dev/null || true
  else
    rm -rf "$tmp"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "demo: starting allot-master on 127.0.0.1 (work dir $tmp)"
"$master_bin" --listen 127.0.0.1:0 --port-file "$tmp/master.port" 2>"$tmp/master.log" &
master_pid=$!
wait_for 10 test -s "$tmp/master.port" || { echo "demo: master did not start" >&2; exit 1; }
master=127.0.0.1:$(cat "$tmp/master.port")

start_agent() {  # start_agent [ISOLATION]
  local args=(--master "$master" --work-dir "$work" --resources "cpus:2;mem:1024;disk:1024"
              --executor-idle-timeout 0.5)
  [[ -n ${1:-} ]] && args+=(--isolation "$1")
  : >"$tmp/agent.log"
  "$agent_bin" "${args[@]}" 2>"$tmp/agent.log" &
  agent_pid=$!
  if wait_for 15 grep -q "registered with master" "$tmp/agent.log"; then return 0; fi
  kill -TERM "$agent_pid" 2>/dev/null || true
  wait "$agent_pid" 2>/dev/null || true
  agent_pid=
  return 1
}

isolation=${ALLOT_DEMO_ISOLATION-cgroups/cpu,cgroups/mem}
if [[ $(id -u) -eq 0 ]] && start_agent "$isolation"; then
  echo "demo: allot-agent registered with isolation $isolation"
else
  [[ $(id -u) -eq 0 ]] && echo "demo: isolation $isolation unavailable here: $(grep -m1 -i 'isolation' "$tmp/agent.log" || true)"
  isolation=
  start_agent || { echo "demo: agent did not register" >&2; exit 1; }
  echo "demo: allot-agent registered without isolation"
fi

echo "demo: running 3 instances through allot-execute"
"$execute_bin" --master "$master" --name demo --instances 3 --resources "cpus:0.2;mem:64" \
  --command 'echo "task $ALLOT_TASK_ID on $(hostname), cgroups: $(grep -E "(cpu|memory)" /proc/self/cgroup | tr "\n" " ")"' \
  | sed 's/^/  allot-execute: /'
status=${PIPESTATUS[0]}
if ((status != 0)); then
  echo "demo: allot-execute exited with $status" >&2
  exit 1
fi

echo "demo: each task's stdout, from its sandbox:"
found=0
while IFS= read -r out; do
  echo "  ${out#"$work"/}: $(cat "$out")"
  found=$((found + 1))
done < <(find "$work/sandboxes" -name '*.stdout' | sort)
((found == 3)) || { echo "demo: expected 3 task outputs, found $found" >&2; exit 1; }

echo "demo: SUCCESS: 3 tasks ran and finished on a one-node allot cluster${isolation:+ (isolation: $isolation)}"
