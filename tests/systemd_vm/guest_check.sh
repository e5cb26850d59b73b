#!/bin/bash
# Runs inside the systemd VM (tests/systemd_vm/README.md) as the payload of
# allot-vm-payload.service, with the .deb beside it in /allot-vm. Installs
# the package and checks allot under systemd as an operator runs it. Prints
# "ok:"/"FAILED:" per check and exits with the number of failures (0: pass).
set -u
echo ALLOT-VM-PAYLOAD-START
tasks=${ALLOT_VM_TASKS:-20}  # ALLOT_VM_ISOLATION: the agent's --isolation (seccomp)
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAILED: $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }
unit_cg=/system.slice/allot-agent.service
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
isolation=${ALLOT_VM_ISOLATION:-seccomp}
echo "ALLOT_AGENT_FLAGS=\"--master=127.0.0.1:5050 --http-listen=127.0.0.1:5056 --isolation=$isolation\"" \
  > /etc/default/allot-agent
check "systemctl enable --now allot-master" systemctl enable --now allot-master
check "systemctl enable --now allot-agent" systemctl enable --now allot-agent
check "both units active" test "$(systemctl is-active allot-master allot-agent | sort -u)" = active
check "a task runs through allot-execute" \
  allot-execute --master 127.0.0.1:5050 --command 'echo hello-from-allot' --resources 'cpus:0.1;mem:32' --timeout 60
check "its output is in its sandbox" grep -rqs hello-from-allot /var/lib/allot-agent/sandboxes
echo "measured: package installed, units active and a task run at $(uptime_s) s of uptime"
[ $fails -eq 0 ] || { dump; exit "$fails"; }

# --- Placement: the agent in a leaf, executors in sibling cgroups. ------------
marker=$((3000 + RANDOM % 1000))
allot-execute --master 127.0.0.1:5050 --command "sleep $marker" --name long --instances "$tasks" \
  --resources 'cpus:0.05;mem:16' --timeout 120 > /tmp/long.out 2>&1 &
long=$!
running() { [ "$(task_pids $marker | wc -l)" -eq "$tasks" ]; }
check "$tasks long tasks running" wait_for 240 running
before=$(task_pids $marker)
agent=$(main_pid allot-agent)
check "agent process in the unit's leaf ($(cg_of "$agent"))" test "$(cg_of "$agent")" = "$unit_cg/agent"
first=$(echo "$before" | head -n1)
check "executor cgroup $(cg_of "$first") is a sibling in the delegated subtree" \
  eval '[[ "$(cg_of "$first")" == "$unit_cg"/*.* ]]'
check "no process in the unit's own cgroup" test -z "$(cat /sys/fs/cgroup$unit_cg/cgroup.procs)"

# --- Restart while tasks run: re-attached, none restarted. --------------------
t0=$(uptime_s)
check "systemctl restart allot-agent" systemctl restart allot-agent
echo "measured: systemctl restart allot-agent returned after $(awk -v a="$t0" -v b="$(uptime_s)" "BEGIN{print b-a}") s"
check "allot-agent active after the restart" test "$(systemctl is-active allot-agent)" = active
check "a new agent process" test "$(main_pid allot-agent)" != "$agent"
check "the same $tasks task processes after the restart" test "$(task_pids $marker)" = "$before"
# allot-execute runs its tasks in one executor per agent: count the cgroups.
executors=$(for p in $before; do cg_of "$p"; done | sort -u | wc -l)
attached=$(journalctl --no-pager -u allot-agent -o cat _PID="$(main_pid allot-agent)" | grep -c 're-attaching to executor')
check "the new agent re-attached $attached of the $executors executors running the $tasks tasks" \
  test "$attached" -eq "$executors"
for p in $before; do kill "$p"; done  # the tasks end (exit by signal: failed, but not LOST)
wait "$long"
check "allot-execute saw every task end after the restart, none LOST" eval '! grep -q LOST /tmp/long.out'
grep -c 'FAILED\|FINISHED\|KILLED' /tmp/long.out | sed 's/^/terminal updates: /'

# --- Stop and start again. ------------------------------------------------------
check "systemctl stop allot-agent" systemctl stop allot-agent
check "allot-agent inactive" test "$(systemctl is-active allot-agent)" = inactive
check "systemctl start allot-agent" systemctl start allot-agent
check "a task runs after stop + start" \
  allot-execute --master 127.0.0.1:5050 --command 'echo after-start' --resources 'cpus:0.1;mem:32' --timeout 60

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
