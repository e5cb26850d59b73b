#!/bin/bash
# Runs inside the systemd VM (tests/systemd_vm/README.md) as the payload of
# allot-vm-payload.service, with the .deb beside it in /allot-vm. Installs
# the package and checks allot under systemd as an operator runs it. Prints
# "ok:"/"FAILED:" per check and exits with the number of failures (0: pass).
set -u
echo ALLOT-VM-PAYLOAD-START
tasks=${ALLOT_VM_TASKS:-20}  # ALLOT_VM_ISOLATION: the agent's --isolation (below)
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAILED: $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }
unit_cg=/allot.slice/allot-agent.service
exec_cg=/allot.slice/allot-executors.service
cg_of() { sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null; }
main_pid() { systemctl show -p MainPID --value "$1"; }
# The pids of the tasks (`sleep <marker>`): procps is not in the image.
task_pids() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(tr '\0' ' ' 2>/dev/null < "$p/cmdline")" = "sleep $1 " ] && echo "${p#/proc/}"
  done | sort -n
}
wait_for() {  # wait_for SECONDS COMMAND...: polls every 0.2 s
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -ge $deadline ] && return 1; sleep 0.2; done
}
dump() {
  echo "--- systemctl status"; systemctl --no-pager status allot-master allot-agent 2>&1 | tail -n 40
  echo "--- journal of allot-agent"; journalctl --no-pager -u allot-agent -n 60 2>&1
}
echo "booted: systemd reached the payload at $(uptime_s) s of uptime"

# --- The package installs and enables nothing by itself. ---------------------
deb=$(ls /allot-vm/allot_*.deb)
check "dpkg -i $(basename "$deb") (no network: dependencies from the image)" dpkg -i "$deb"
check "the package is installed" test "$(dpkg-query -W -f='${Status}' allot)" = "install ok installed"
check "no unit enabled by the package" test "$(systemctl is-enabled allot-agent allot-master | sort -u)" = disabled
check "/etc/default/allot-agent is a conffile" grep -q /etc/default/allot-agent /var/lib/dpkg/info/allot.conffiles
check "man page installed" test -f /usr/share/man/man8/allot-agent.8.gz

# --- Both units start (Type=notify: start returns at READY=1). ---------------
isolation=${ALLOT_VM_ISOLATION:-seccomp,cgroups/cpu,cgroups/mem,cgroups/pids}
echo "ALLOT_AGENT_FLAGS=\"--master=127.0.0.1:5050 --http-listen=127.0.0.1:5056 --isolation=$isolation\"" \
  > /etc/default/allot-agent
# The master waits 60 s for a silent agent before its tasks are LOST: an
# agent stopped and started again within that (under TCG on a loaded host a
# start alone takes ~10 s) gets its executors back; one stopped longer
# loses them (the master's decision, --agent-timeout).
echo 'ALLOT_MASTER_FLAGS="--listen=127.0.0.1:5050 --http-listen=127.0.0.1:5055 --agent-timeout=60"' \
  > /etc/default/allot-master
check "systemctl enable --now allot-master" systemctl enable --now allot-master
check "systemctl enable --now allot-agent" systemctl enable --now allot-agent
check "both units active" test "$(systemctl is-active allot-master allot-agent | sort -u)" = active
check "allot-executors.service started with the agent" test "$(systemctl is-active allot-executors)" = active
check "a task runs through allot-execute" \
  allot-execute --master 127.0.0.1:5050 --command 'echo hello-from-allot' --resources 'cpus:0.1;mem:32' --timeout 60
check "its output is in its sandbox" grep -rqs hello-from-allot /var/lib/allot-agent/sandboxes
echo "measured: package installed, units active and a task run at $(uptime_s) s of uptime"
[ $fails -eq 0 ] || { dump; exit "$fails"; }

# --- Placement: the agent in its unit, executors in allot-executors.service. ---
# One executor per task (allot-executor as a custom executor): 20 executors.
marker=$((3000 + RANDOM % 1000))
allot-execute --master 127.0.0.1:5050 --command "sleep $marker" --name long --instances "$tasks" \
  --executor /usr/bin/allot-executor --executor-per-task \
  --resources 'cpus:0.05;mem:32' --timeout 240 > /tmp/long.out 2>&1 &
long=$!
running() { [ "$(task_pids $marker | wc -l)" -eq "$tasks" ]; }
check "$tasks long tasks running" wait_for 300 running
before=$(task_pids $marker)
# Every process of the executors' cgroups (executors and tasks), by cgroup.
members() { local d; for d in /sys/fs/cgroup$exec_cg/*/; do sed "s|^|${d%/} |" "$d/cgroup.procs"; done | sort; }
executors_before=$(members)
agent=$(main_pid allot-agent)
check "agent process in its unit's cgroup ($(cg_of "$agent"))" test "$(cg_of "$agent")" = "$unit_cg"
check "no executor in the agent's unit" test "$(cat /sys/fs/cgroup$unit_cg/cgroup.procs)" = "$agent"
cgroups=$(for p in $before; do cg_of "$p"; done | sort -u)
check "the $tasks tasks run in $tasks executor cgroups ($(wc -l <<< "$cgroups"))" test "$(wc -l <<< "$cgroups")" -eq "$tasks"
check "every executor cgroup is in $exec_cg" eval '! grep -v "^$exec_cg/[^/]*$" <<< "$cgroups"'
check "cpu, memory and pids enabled for the executors" \
  eval 'for c in cpu memory pids; do grep -qw $c /sys/fs/cgroup$exec_cg/cgroup.subtree_control || exit 1; done'
first=$(head -n1 <<< "$cgroups")
check "an executor's memory limit is set ($(cat /sys/fs/cgroup$first/memory.max))" \
  test "$(cat /sys/fs/cgroup$first/memory.max)" != max
check "the executors' unit weighs CPUWeight=10000" test "$(cat /sys/fs/cgroup$exec_cg/cpu.weight)" = 10000
check "the agent's unit weighs CPUWeight=10000 too" test "$(cat /sys/fs/cgroup$unit_cg/cpu.weight)" = 10000
reattached() {  # reattached PID: how many executors that agent process re-attached to
  journalctl --no-pager -u allot-agent -o cat _PID="$1" | grep -c 're-attaching to executor'
}

# --- Restart while tasks run: re-attached, none restarted. --------------------
t0=$(uptime_s)
check "systemctl restart allot-agent" systemctl restart allot-agent
echo "measured: systemctl restart allot-agent with $tasks executors (cgroups ${isolation}) returned after $(awk -v a="$t0" -v b="$(uptime_s)" "BEGIN{print b-a}") s"
check "allot-agent active after the restart" test "$(systemctl is-active allot-agent)" = active
check "a new agent process" test "$(main_pid allot-agent)" != "$agent"
check "the same $tasks task processes after the restart" test "$(task_pids $marker)" = "$before"
check "the same executor processes in the same cgroups after the restart" test "$(members)" = "$executors_before"
wait_for 30 eval '[ "$(reattached "$(main_pid allot-agent)")" -ge "$tasks" ]'
check "the new agent re-attached $(reattached "$(main_pid allot-agent)") of the $tasks executors" \
  test "$(reattached "$(main_pid allot-agent)")" -eq "$tasks"

# --- Stop and start: executors keep running while the agent is down. -----------
agent=$(main_pid allot-agent)
check "systemctl stop allot-agent" systemctl stop allot-agent
check "allot-agent inactive" test "$(systemctl is-active allot-agent)" = inactive
sleep 2
check "the $tasks tasks and their executors still run with the agent stopped" \
  test "$(task_pids $marker)" = "$before" -a "$(members)" = "$executors_before"
check "systemctl start allot-agent" systemctl start allot-agent
wait_for 30 eval '[ "$(reattached "$(main_pid allot-agent)")" -ge "$tasks" ]'
check "the started agent re-attached $(reattached "$(main_pid allot-agent)") of the $tasks executors" \
  test "$(reattached "$(main_pid allot-agent)")" -eq "$tasks"
check "the same task processes after stop + start" test "$(task_pids $marker)" = "$before"
check "the same executor processes after stop + start" test "$(members)" = "$executors_before"
for p in $before; do kill "$p"; done  # the tasks end (exit by signal: failed, but not LOST)
wait "$long"
check "allot-execute saw every task end, none LOST" eval '! grep -q LOST /tmp/long.out'
grep LOST /tmp/long.out | head -n 3
grep -c 'FAILED\|FINISHED\|KILLED' /tmp/long.out | sed 's/^/terminal updates: /'
check "a task runs after stop + start" \
  allot-execute --master 127.0.0.1:5050 --command 'echo after-start' --resources 'cpus:0.1;mem:32' --timeout 60

# --- Stopping the executors' unit ends every executor (and the agent with it). --
allot-execute --master 127.0.0.1:5050 --command "sleep $((marker + 1))" --name doomed \
  --resources 'cpus:0.05;mem:32' --timeout 120 > /tmp/doomed.out 2>&1 &
doomed=$!
check "a task runs before the executors' unit stops" wait_for 60 eval '[ -n "$(task_pids $((marker + 1)))" ]'
check "systemctl stop allot-executors" systemctl stop allot-executors
check "the agent stopped with it (Requires=)" test "$(systemctl is-active allot-agent)" = inactive
check "its task ended" test -z "$(task_pids $((marker + 1)))"
check "its cgroup is gone" test ! -d /sys/fs/cgroup$exec_cg
check "systemctl start allot-agent starts allot-executors" systemctl start allot-agent
check "allot-executors active again" test "$(systemctl is-active allot-executors)" = active
check "allot-execute heard how the task ended" wait_for 90 eval '! kill -0 $doomed 2>/dev/null'
kill "$doomed" 2>/dev/null; wait "$doomed"
echo "the task's end as allot-execute saw it: $(tail -n 2 /tmp/doomed.out | tr '\n' ' ')"
check "a task runs after the executors' unit restarted" \
  allot-execute --master 127.0.0.1:5050 --command 'echo after-executors' --resources 'cpus:0.1;mem:32' --timeout 60

# --- journald priorities: the agent's warnings are warnings. ---------------------
systemctl stop allot-master
wait_for 30 eval 'journalctl --no-pager -u allot-agent -p warning -o cat | grep -q "link to master closed"'
systemctl start allot-master
warn=$(journalctl --no-pager -u allot-agent -p warning -o cat)
echo "journalctl -u allot-agent -p warning:"; sed 's/^/  | /' <<< "$warn" | tail -n 8
check "the master's loss is a warning in the journal" grep -q 'link to master closed' <<< "$warn"
check "info lines are not warnings" eval '! grep -q "registered with master" <<< "$warn"'
check "info lines are in the journal at info" \
  eval 'journalctl --no-pager -u allot-agent -p info..info -o cat | grep -q "registered with master"'
check "the <N> prefix is stripped" eval '! grep -q "^<[0-7]>" <<< "$warn"'
check "PRIORITY=4 recorded" eval 'journalctl --no-pager -u allot-agent -p warning..warning -o verbose | grep -q PRIORITY=4'

[ $fails -eq 0 ] || dump
echo "checks failed: $fails"
exit "$fails"
