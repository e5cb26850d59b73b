#!/usr/bin/env bash
# The Mesos paper's isolation experiment (section 6.7) and the noisy
# neighbours of Matthews et al., on allot. One command, as root:
#
#   bench/hog/run.sh [--build DIR] [--out DIR] [--rate N] [--duration S]
#                    [--spinners N] [--phases "alone cpu mem fork disk"]
#                    [--modes "iso noiso"] [--isolation LIST] [--no-install]
#                    [--no-build] [--agent-flags "FLAGS for the iso agent"] [--no-node]
#                    [--sample-loop] [--client-cpus auto|none|LIST] [--client-fifo N]
#                    [--no-sched-trace] [--launch-probe MS] [--steal-sample-ms MS]
#                    [--unit-placement]
#
# It installs what is missing (Debian packages), builds allot-master,
# allot-agent, allot-execute and allot-executor into --build (default
# ./build-hog), starts a local master and agent, runs the victim (Apache
# prefork + mod_php serving page.php, ~5 ms of CPU per request) as a task of
# one framework and each hog as a task of another, both through
# allot-execute with equal cpus, and drives the victim with loadgen.py, an
# open-loop client at --rate requests/s. Per agent mode:
#   iso    the agent runs with --isolation (cgroups cpu/mem/pids/blkio[/cpuset])
#   noiso  the same agent binary with --isolation empty: tasks share the
#          agent's cgroups (the paper's "no isolation")
# and per phase: alone (victim only: the baseline, with its own limits),
# cpu (N spinners), mem (memory bomb), fork (fork bomb), disk (O_DIRECT writer),
# bare (the N spinners started by hand outside allot, on the CPUs the web task
# may not use: the hardware's share of what the CPU hog costs; not default).
# allot (agent and executors, both modes) runs in one "node" cgroup weighted
# like a machine dedicated to it (--no-node: in this shell's cgroups, where
# other load and the kernel's autogroup also count). The client runs outside
# allot, pinned by default to the CPUs the web task may not use (auto; the
# last CPU when it may use all), at SCHED_FIFO 50 only while it sends and
# receives (start-up, before the phase's window, and statistics as an
# ordinary process). Each phase is
# traced with `perf sched` (unless --no-sched-trace or no perf): the web
# server's, the agent loop's and the client's waits for a CPU, and who ran
# while the loop waited (sched_delays.py). Logs of the last run:
# ${TMPDIR:-/tmp}/allot-hog-logs.
# Results: DIR/hog-results.txt (table and target checks), hog-results.json,
# hog-results.dat, hog-latency.png. --sample-loop also samples the agent's
# loop thread every ms (bench/agent/loop_sampler.py) and appends what it was
# doing when it ran late (attribution; it costs a few % of a core).
# --unit-placement (implies --no-node): the isolated agent as the packaged
# systemd units place it, emulated in the cgroup trees (this machine's PID 1
# is not systemd): a top-level slice hogunits-PID.slice standing for
# allot.slice (CPUWeight=10000: cpu.shares 102400), in it
# allot-executors.service (cpu.shares 102400; a `sleep infinity`
# placeholder; trusted.delegate=1 on its cgroup2 directory, as systemd marks
# Delegate=yes) and allot-agent.service (cpu.shares 102400) where the agent
# starts, with --cgroups-root=hogunits-PID.slice/allot-executors.service as
# the unit passes it.
# --launch-probe MS: during every phase, launch_probe.py starts a short task
# in a new executor every MS ms (the agent gets --http-listen and 0.5 cpus,
# 256 MiB more to offer for them) and the report gets a "launch probe"
# section: per phase, the starts and the loop's launch sections
# (launcher start, launch, prepare/isolate, reaped/cleanup) from the agent's
# /metrics, and the launch latency the probe saw.
# --steal-sample-ms MS (default 10, 0: none): during every phase a sampler
# (sched_delays.py --sample-steal, on the client's CPUs, at SCHED_FIFO 40 once
# started: ~50 us each 10 ms) records the host's
# steal per CPU (/proc/stat) every MS ms; the traces are recorded on
# CLOCK_MONOTONIC so each of the loop's long sleeps and waits gets the steal
# over it, and the report's loop section gives per phase the agent's longest
# late tick, that tick less its host steal (the agent's own reading) and the
# machine's steal per CPU over the phase.
# Everything it starts is stopped, and its cgroups removed, on exit or ^C.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

build="$repo/build-hog"
out="$repo/docs/results"
rate=100
duration=30
warmup=3
settle=5
spinners=256
phases="alone cpu mem fork disk"
modes="iso noiso"
isolation="cgroups/cpu,cgroups/mem,cgroups/pids,cgroups/blkio,cgroups/cpuset"
install=1
buildIt=1
agentFlags=""
useNode=1
sampleLoop=0
samplerPid=""
clientCpus=auto
clientFifo=50
clientLead=2      # s between the client's start and the phase's window
schedTrace=1
perfPid=""
sleepsPid=""
pageRows=50
webResources="cpus:1;mem:1024"
hogResources="cpus:1;mem:1024"
agentResources="cpus:2;mem:4096;disk:8192"
memCapUnisolatedMib=4096     # safety cap of the memory bomb when nothing else stops it
forkNprocCap=2048            # safety cap of the fork bomb (RLIMIT_NPROC of its user)
hogUser=allot-hog
probeMs=0          # --launch-probe: ms between the probe's launches (0: no probe)
stealMs=10         # --steal-sample-ms: ms between steal samples (0: no sampler)
probePid=""
unitPlacement=0    # --unit-placement: the packaged units' cgroups, emulated
unitSliceShares=102400  # allot.slice's CPUWeight=10000 as cpu.shares

origArgs="$*"
usage() { sed -n '2,41p' "$0"; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --spinners) spinners=$2; shift 2 ;;
    --phases) phases=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --isolation) isolation=$2; shift 2 ;;
    --no-install) install=0; shift ;;
    --no-build) buildIt=0; shift ;;
    --agent-flags) agentFlags=$2; shift 2 ;;
    --no-node) useNode=0; shift ;;
    --sample-loop) sampleLoop=1; shift ;;
    --client-cpus) clientCpus=$2; shift 2 ;;
    --client-fifo) clientFifo=$2; shift 2 ;;
    --no-sched-trace) schedTrace=0; shift ;;
    --launch-probe) probeMs=$2; shift 2 ;;
    --steal-sample-ms) stealMs=$2; shift 2 ;;
    --unit-placement) unitPlacement=1; useNode=0; shift ;;
    -h|--help) usage ;;
    *) echo "run.sh: unknown argument $1" >&2; usage ;;
  esac
done

log() { printf '[hog %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
. "$here/../lib.sh"  # die, on_exit (the set-up's own cleanup below runs at exit)

[ "$(id -u)" -eq 0 ] || die "run as root (cgroups, apache, packages)"
[[ "$probeMs" =~ ^[0-9]+$ ]] || die "--launch-probe takes a whole number of ms (0: none)"
[[ "$stealMs" =~ ^[0-9]+$ ]] && [ "$stealMs" -le 10000 ] ||
  die "--steal-sample-ms takes a whole number of ms up to 10000 (0: none)"
# The probe's tasks (cpus:0.1;mem:32, at most 4 at a time) fit beside the
# web task and the hog without taking from either.
[ "$probeMs" -gt 0 ] && agentResources="cpus:2.5;mem:4352;disk:8192"

# ---------------------------------------------------------------- set-up

packages=(apache2 libapache2-mod-php php-sqlite3 python3 util-linux procps gnuplot-nox linux-perf)
buildPackages=(g++ meson ninja-build pkg-config protobuf-compiler libprotobuf-dev libboost-dev
  liburing-dev libcgroup-dev libseccomp-dev libnl-3-dev libnl-route-3-dev libzookeeper-mt-dev)

installMissing() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return
  log "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

buildAllot() {
  local targets=(master/allot-master agent/allot-agent cli/allot-execute cli/allot-executor)
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$repo" --buildtype=debugoptimized >/dev/null
  fi
  log "building ${targets[*]} in $build"
  if ! ninja -C "$build" "${targets[@]}" > "$build/hog-build.log" 2>&1; then
    tail -15 "$build/hog-build.log" >&2
    local t
    for t in "${targets[@]}"; do [ -x "$build/$t" ] || die "build failed and $build/$t is missing"; done
    log "warning: the build failed (above); using the binaries already in $build"
  fi
}

if [ "$install" -eq 1 ]; then
  installMissing "${packages[@]}" "${buildPackages[@]}"
fi
[ "$buildIt" -eq 1 ] && buildAllot
master="$build/master/allot-master"
agent="$build/agent/allot-agent"
execute="$build/cli/allot-execute"
id "$hogUser" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$hogUser"

run=$(mktemp -d /tmp/allot-hog.XXXXXX)
dir=$run  # lib.sh: die shows its logs
chmod 755 "$run"  # tasks run unprivileged: the web as the agent's --default-user, hogs as $hogUser
taskUser=nobody    # the agent's --default-user
mkdir -p "$run/web" "$run/disk"
chown "$taskUser" "$run/web"
chown "$hogUser" "$run/disk"
# Private copies under names of their own: a `pkill allot-execute` or
# `killall allot-agent` run by someone else on this shared machine must not
# end the benchmark's daemons or tasks in the middle of a phase.
mkdir -p "$run/bin"
cp "$master" "$run/bin/hogm-master"
cp "$agent" "$run/bin/hogm-agent"
cp "$execute" "$run/bin/hogm-execute"
cp "$build/cli/allot-executor" "$run/bin/hogm-executor"
master="$run/bin/hogm-master"
agent="$run/bin/hogm-agent"
execute="$run/bin/hogm-execute"
# Everything allot runs here lives in one "node" cgroup weighted like a
# machine dedicated to allot (cpu.shares 262144, the v1 maximum), so the
# other work on this shared machine (compilers) does not decide the result:
# the agent, hence its executors, in both modes; the isolated agent's
# --cgroups-root is nested inside it. The client stays outside (SCHED_FIFO).
nodeCgroup="allot-hog-$$"
nodeShares=262144
cgroupsRoot="$nodeCgroup/allot"
# --no-node: the agent stays in this shell's cgroups, the isolated root is
# top-level, and the stock kernel's autogroup (one CPU group per session)
# applies to the unisolated tasks; other load on the machine then counts.
[ "$useNode" -eq 1 ] || cgroupsRoot="$nodeCgroup"
unitSlice="hogunits-$$.slice"
[ "$unitPlacement" -eq 1 ] && cgroupsRoot="$unitSlice/allot-executors.service"
mkdir -p "$out"
log "run directory $run; results to $out"

# ---------------------------------------------------------------- cleanup

bgPids=()          # allot-execute, agent, master: stopped in reverse order
stopPid() {        # stopPid PID SECONDS: SIGTERM, wait, then SIGKILL
  local pid=$1 waitS=$2 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < waitS * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# Processes of the hog user (the fork bomb) and processes whose working
# directory is inside this run's directory (executors and their tasks).
killOurProcesses() {
  local round pids p cwd
  for round in 1 2 3 4 5 6 7 8 9 10; do
    pids=$(ps -u "$hogUser" -o pid= 2>/dev/null || true)
    for p in /proc/[0-9]*; do
      cwd=$(readlink "$p/cwd" 2>/dev/null || true)
      case "$cwd" in "$run"/*) pids+=" ${p#/proc/}" ;; esac
    done
    if [ -f "$run/web/httpd.pid" ]; then
      p=$(cat "$run/web/httpd.pid" 2>/dev/null || true)
      [ -n "$p" ] && pids+=" $p $(ps --ppid "$p" -o pid= 2>/dev/null || true)"
    fi
    pids=$(echo $pids)
    [ -z "$pids" ] && return 0
    kill -STOP $pids 2>/dev/null || true
    kill -KILL $pids 2>/dev/null || true
    sleep 0.2
  done
}

makeNodeCgroup() {
  local h
  [ "$useNode" -eq 1 ] || return 0
  for h in /sys/fs/cgroup/*/; do
    [ -f "$h/cgroup.procs" ] || continue
    case "$h" in */unified/|*/systemd/) continue ;; esac
    mkdir -p "$h/$nodeCgroup"
    if [ -f "$h/cpuset.cpus" ]; then
      cat "$h/cpuset.cpus" > "$h/$nodeCgroup/cpuset.cpus"
      cat "$h/cpuset.mems" > "$h/$nodeCgroup/cpuset.mems"
    fi
  done
  echo "$nodeShares" > "/sys/fs/cgroup/cpu/$nodeCgroup/cpu.shares"
}

# --unit-placement: the slice and the two units' cgroups in every
# hierarchy, as systemd makes them for the packaged units; the placeholder
# in allot-executors.service. Sets holderPid.
holderPid=""
makeUnitCgroups() {
  [ "$unitPlacement" -eq 1 ] || return 0
  local h unit
  for h in /sys/fs/cgroup/*/; do
    [ -f "$h/cgroup.procs" ] || continue
    case "$h" in */systemd/) continue ;; esac
    for unit in "" allot-executors.service allot-agent.service; do
      mkdir -p "$h/$unitSlice/$unit"
      if [ -f "$h/cpuset.cpus" ]; then
        cat "$h/cpuset.cpus" > "$h/$unitSlice/$unit/cpuset.cpus"
        cat "$h/cpuset.mems" > "$h/$unitSlice/$unit/cpuset.mems"
      fi
    done
  done
  echo "$unitSliceShares" > "/sys/fs/cgroup/cpu/$unitSlice/cpu.shares"
  echo 102400 > "/sys/fs/cgroup/cpu/$unitSlice/allot-executors.service/cpu.shares"
  echo 102400 > "/sys/fs/cgroup/cpu/$unitSlice/allot-agent.service/cpu.shares"
  [ -d /sys/fs/cgroup/unified ] &&
    python3 -c 'import os, sys; os.setxattr(sys.argv[1], "trusted.delegate", b"1")' \
      "/sys/fs/cgroup/unified/$unitSlice/allot-executors.service"
  sleep infinity &
  holderPid=$!
  bgPids+=($holderPid)
  joinUnit "$holderPid" allot-executors.service
}

# joinUnit PID UNIT: the process into the unit's cgroup in every hierarchy.
joinUnit() {
  local h
  for h in /sys/fs/cgroup/*/; do
    [ -d "$h/$unitSlice/$2" ] && echo "$1" > "$h/$unitSlice/$2/cgroup.procs"
  done
  return 0
}

# joinNode PID: the process (and the children it starts later) into the node.
joinNode() {
  [ "$unitPlacement" -eq 1 ] && { joinUnit "$1" allot-agent.service; return 0; }
  [ "$useNode" -eq 1 ] || return 0
  echo "$1" > "/sys/fs/cgroup/cpu/$nodeCgroup/cgroup.procs"
}

# The node cgroup (or the isolated agent's root), and the roots an agent
# picks by default from its work dir ("allot." + the work dir with '.' as
# %2E and '/' as '.'): the unisolated agent's cgroup2 tracking root, and the
# cgroups of executors still running when their agent was stopped (an
# agent keeps those on purpose: executors outlive an agent restart).
removeCgroups() {
  local dir defaultRoots
  defaultRoots="allot.$(printf '%s' "${run#/}" | sed 's/\./%2E/g; s|/|.|g')."
  for dir in /sys/fs/cgroup/*/"$nodeCgroup" /sys/fs/cgroup/*/"$unitSlice" /sys/fs/cgroup/*/"$defaultRoots"*; do
    [ -d "$dir" ] || continue
    find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ -d "$dir" ] && log "warning: could not remove $dir"
  done
  return 0
}

cleanedUp=0
hogCleanup() {
  [ "$cleanedUp" -eq 1 ] && return
  cleanedUp=1
  set +e
  local i
  for ((i = ${#bgPids[@]} - 1; i >= 0; i--)); do stopPid "${bgPids[$i]}" 15; done
  killOurProcesses
  removeCgroups
  local logs="${TMPDIR:-/tmp}/allot-hog-logs"
  rm -rf "$logs" && mkdir -p "$logs"
  cp "$run"/*.log "$run"/*.json "$run"/*.args "$run"/samples-*.txt "$run"/loop-sample-*.txt "$run"/phases.jsonl \
    "$run"/sched-*.json "$run"/sched-*.perf.log "$run"/probe-*.json "$run"/probe-*.log \
    "$logs"/ 2>/dev/null
  rm -rf "$run"
  log "logs of this run kept in $logs"
  log "cleaned up"
}
on_exit hogCleanup
trap 'log "interrupted"; exit 130' INT TERM HUP

# ---------------------------------------------------------------- pieces

freePort() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

prepareVictim() {
  webPort=$(freePort)
  mkdir -p "$run/www"
  cp "$here/page.php" "$run/www/page.php"
  php "$here/make_db.php" "$run/www/wiki.sqlite"
  chmod -R a+rX "$run/www"
  sed -e "s|@RUN@|$run|g; s|@PORT@|$webPort|g; s|@ROWS@|$pageRows|g" \
    "$here/httpd.conf.in" > "$run/httpd.conf"
  apache2 -t -f "$run/httpd.conf" 2>/dev/null || die "apache2 -t rejects $run/httpd.conf"
  local cost
  cost=$(cd "$run/www" && HOG_ROWS=$pageRows php -r '
    $t = hrtime(true);
    for ($i = 0; $i < 50; $i++) { ob_start(); include "page.php"; ob_end_clean(); }
    printf("%.2f", (hrtime(true) - $t) / 50 / 1e6);' 2>/dev/null)
  log "victim page costs ${cost} ms of php-cli CPU per request here"
  echo "$cost" > "$run/page-cost-ms"
}

startMaster() {
  "$master" --listen 127.0.0.1:0 --port-file "$run/master.port" --stats-interval 0 \
    > "$run/master.log" 2>&1 &
  bgPids+=($!)
  local i
  for ((i = 0; i < 100; i++)); do
    [ -s "$run/master.port" ] && break
    sleep 0.1
  done
  [ -s "$run/master.port" ] || die "allot-master did not start: $(tail -3 "$run/master.log")"
  masterAddr="127.0.0.1:$(cat "$run/master.port")"
  log "allot-master on $masterAddr"
}

# startAgent MODE: iso or noiso. Sets agentPid.
startAgent() {
  local mode=$1 args=() i
  args=(--master "$masterAddr" --work-dir "$run/agent-$mode" --resources "$agentResources"
    --executor-idle-timeout 0.5 --executor-path "$run/bin/hogm-executor")
  [ "$probeMs" -gt 0 ] && args+=(--http-listen 127.0.0.1:0 --http-port-file "$run/agent-$mode.http")
  if [ "$mode" = iso ]; then
    args+=(--isolation "$isolation")
    # Not `--help | grep -q`: grep leaves at the first match, the agent gets
    # SIGPIPE, and under pipefail the flag was then silently not passed
    # (the executors left the node cgroup).
    local help
    help=$("$agent" --help 2>&1 || true)
    [[ $help == *--cgroups-root* ]] && args+=(--cgroups-root "$cgroupsRoot")
    # shellcheck disable=SC2206
    [ -n "$agentFlags" ] && args+=($agentFlags)
  fi
  echo "${args[*]}" > "$run/agent-$mode.args"
  if [ "$unitPlacement" -eq 1 ]; then
    # Born in allot-agent.service, as systemd starts it (it reads its own
    # cgroups at start).
    bash -c 'for d in /sys/fs/cgroup/*/"$1"/allot-agent.service; do echo $$ > "$d/cgroup.procs"; done
             shift; exec "$@"' unit "$unitSlice" "$agent" "${args[@]}" > "$run/agent-$mode.log" 2>&1 &
  else
    "$agent" "${args[@]}" > "$run/agent-$mode.log" 2>&1 &
  fi
  agentPid=$!
  bgPids+=($agentPid)
  joinNode "$agentPid"
  sleep 1
  kill -0 "$agentPid" 2>/dev/null || { log "allot-agent ($mode) exited: $(tail -3 "$run/agent-$mode.log")"; return 1; }
  log "allot-agent ($mode) pid $agentPid: ${args[*]}"
  samplerPid=""
  if [ "$sampleLoop" -eq 1 ]; then
    python3 "$here/../agent/loop_sampler.py" --pid "$agentPid" --seconds 86400 --binary "$agent" \
      --out "$run/loop-sample-$mode.txt" &
    samplerPid=$!
    bgPids+=($samplerPid)
  fi
}

# The agent logs its loop's stalls when it stops (diag/loop_stall_meter.h).
stopAgent() {
  [ -n "$samplerPid" ] && stopPid "$samplerPid" 60
  stopPid "$agentPid" 15
  killOurProcesses
  local line
  line=$(grep -o 'loop: longest lateness.*' "$run/agent-$mode.log" | tail -1)
  echo "- agent loop ($mode): ${line:-no stall report in the agent log}" >> "$run/loop-stalls.txt"
}

waitWeb() {
  local i
  for ((i = 0; i < 600; i++)); do
    if python3 - "$webPort" <<'EOF' 2>/dev/null; then return 0; fi
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/", timeout=2).read()
EOF
    kill -0 "$webExecPid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# startWeb MODE: the victim as a task of framework "hog-web".
startWeb() {
  local mode=$1
  "$execute" --master "$masterAddr" --name "hog-web-$mode" --resources "$webResources" \
    --command "exec apache2 -DFOREGROUND -f $run/httpd.conf" > "$run/web-$mode.log" 2>&1 &
  webExecPid=$!
  bgPids+=($webExecPid)
  waitWeb || die "the web server did not come up under allot ($mode): $(tail -5 "$run/web-$mode.log")"
  pickClientCpus
  log "web server up on 127.0.0.1:$webPort as an allot task ($mode); the client runs on cpu ${clientCpuArg:-any}"
}

stopWeb() {
  stopPid "$webExecPid" 30
}

hogCommand() {
  case "$1" in
    cpu) echo "exec $here/hogs.sh cpu $spinners" ;;
    mem) echo "exec $here/hogs.sh mem $memCapUnisolatedMib" ;;
    fork) echo "exec $here/hogs.sh fork $forkNprocCap $hogUser" ;;
    disk) echo "exec $here/hogs.sh disk $run/disk" ;;
  esac
}

# phaseStalls MODE NAME FROM: the agent's loop-stall warnings (a tick 10 ms
# late or more, logged at most once a second: diag/loop_stall_meter.h) in
# its log after line FROM, i.e. during phase NAME from the hog's launch to
# its kill: which phase the mode's longest lateness belongs to.
phaseStalls() {
  local mode=$1 name=$2 from=$3
  tail -n +"$((from + 1))" "$run/agent-$mode.log" | awk -v name="$name" '
    /the loop ran .* ms late/ {
      for (i = 1; i <= NF; i++) if ($i == "ran") { late = $(i + 1); wait = $(i + 4); sub(/^\(/, "", wait) }
      # The interval split (agents since TickSplit): "; W ms waiting for a CPU, R ms running, ...".
      tail_ = ""; if (index($0, "waiting for a CPU; ")) { tail_ = $0; sub(/.*waiting for a CPU; /, "; ", tail_); sub(/\)$/, "", tail_) }
      n++; if (late + 0 > max + 0) { max = late; maxWait = wait; maxSplit = tail_ }
    }
    END {
      if (n) printf "- %s: %d second(s) with a tick 10 ms late or more, longest %s ms (%s ms waiting for a CPU%s)\n", name, n, max, maxWait, maxSplit
      else printf "- %s: no tick 10 ms late\n", name
    }' >> "$run/loop-stalls-phases.txt"
  # Where the loop's time went before its two longest logged late ticks (the agent's
  # sections: agent/agent_sections.h; agents without it log no such line).
  tail -n +"$((from + 1))" "$run/agent-$mode.log" | grep -o 'loop tick .* ms late; timed since the previous tick: .*' |
    sort -t' ' -k3,3 -g -r | head -2 | cut -c1-300 | sed 's/^/    /' >> "$run/loop-stalls-phases.txt" || true
  # The same ticks with the host's steal the agent read for each (report.py's loop section).
  python3 "$here/report.py" --late-ticks "$run/agent-$mode.log" --from "$from" \
    --steal-timeline "$run/steal-$name.txt" > "$run/loop-$name.json" || true
}

# pickClientCpus: where loadgen.py runs (clientCpuArg, empty: anywhere).
# auto: the CPUs the web server's processes may not use (its cpuset), else
# the last CPU, the same in both modes; so that the client's own work (a few
# hundred microseconds per request, at SCHED_FIFO) never lands on the web
# server's CPU in one phase and beside it in the next.
pickClientCpus() {
  case "$clientCpus" in
    none) clientCpuArg=""; return ;;
    auto) ;;
    *) clientCpuArg=$clientCpus; return ;;
  esac
  local webPid allowed
  webPid=$(cat "$run/web/httpd.pid" 2>/dev/null || true)
  allowed=$(awk '/^Cpus_allowed_list/ {print $2}' "/proc/$webPid/status" 2>/dev/null || true)
  clientCpuArg=$(python3 - "$allowed" <<'EOF'
import os, sys
def parse(text):
    cpus = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus
online = sorted(os.sched_getaffinity(0))
web = parse(sys.argv[1]) or set(online)
print(",".join(map(str, [c for c in online if c not in web] or online[-1:])))
EOF
)
}

# startSchedTrace NAME / stopSchedTrace NAME: `perf sched`'s events over
# the phase (hog launch to hog kill), then, outside the timing window and
# niced, the web server's, the agent loop's and the client's waits for a
# CPU and who ran meanwhile (sched_delays.py) into sched-NAME.json.
#
# Beside it, a small trace of the agent loop's own sleeps (its switch-outs
# with kernel stacks, its wakeups, and every timerfd's arming and expiry):
# sched_delays.py --sleeps-of says, for each sleep of the loop longer than
# its 5 ms tick (+1 ms), where it slept (the idle epoll_wait, or a call that
# blocked) and, when a timerfd's expiry woke it, how late that expiry was:
# into sleeps-NAME.json.
startSchedTrace() {
  perfPid=""
  sleepsPid=""
  [ "$schedTrace" -eq 1 ] || return 0
  perf record -k CLOCK_MONOTONIC -e sched:sched_switch -e sched:sched_waking -e sched:sched_wakeup_new -a -m 1024 \
    -o "$run/sched-$1.data" > "$run/sched-$1.perf.log" 2>&1 &
  perfPid=$!
  bgPids+=($perfPid)
  perf record -k CLOCK_MONOTONIC -a -g -m 256 -e sched:sched_switch --filter "prev_pid == $agentPid || next_pid == $agentPid" \
    -e sched:sched_waking --filter "pid == $agentPid" \
    -e timer:hrtimer_start --filter 'function.function == timerfd_tmrproc' \
    -e timer:hrtimer_expire_entry --filter 'function.function == timerfd_tmrproc' \
    -o "$run/sleeps-$1.data" > "$run/sleeps-$1.perf.log" 2>&1 &
  sleepsPid=$!
  bgPids+=($sleepsPid)
  sleep 0.5
}

stopSchedTrace() {
  local name=$1
  [ -n "$perfPid" ] || return 0
  stopPid "$perfPid" 30
  perfPid=""
  nice -n 19 perf script -i "$run/sched-$name.data" -F cpu,time,event,trace 2>> "$run/sched-$name.perf.log" |
    nice -n 19 python3 "$here/../sched_delays.py" --track "web=comm:apache2" --track "loop=tid:$agentPid" \
      --track "client=tid:$loadPid" $(stealTimeline "$name") --json > "$run/sched-$name.json" ||
    log "warning: no scheduling trace for $name: $(tail -2 "$run/sched-$name.perf.log")"
  rm -f "$run/sched-$name.data"
  [ -n "$sleepsPid" ] || return 0
  stopPid "$sleepsPid" 30
  sleepsPid=""
  nice -n 19 perf script -i "$run/sleeps-$name.data" -F comm,tid,cpu,time,event,trace,ip,sym \
      2>> "$run/sleeps-$name.perf.log" |
    nice -n 19 python3 "$here/../sched_delays.py" --sleeps-of "$agentPid" --sleep-ms 6 $(stealTimeline "$name") --json \
      > "$run/sleeps-$name.json" ||
    log "warning: no trace of the loop's sleeps for $name: $(tail -2 "$run/sleeps-$name.perf.log")"
  rm -f "$run/sleeps-$name.data"
}

# startStealSampler NAME / stopStealSampler NAME: the host's steal per CPU
# every $stealMs ms over the phase (sched_delays.py --sample-steal; bounded
# by its --seconds and its own sample limit) into steal-NAME.txt, on the
# client's CPUs (away from the web server's), and its summary into
# steal-NAME.json. stealTimeline NAME: the flag that puts it beside a trace.
startStealSampler() {
  stealPid=""
  [ "$stealMs" -gt 0 ] || return 0
  # SCHED_FIFO 40 once started (below the client's 50): under the CPU hog an
  # ordinary sampler on the hog's CPU went up to 0.76 s without a sample; started
  # at FIFO (chrt), its interpreter's start-up kept the agent's loop waiting
  # 50-69 ms on that CPU.
  ${clientCpuArg:+taskset -c "$clientCpuArg"} python3 "$here/../sched_delays.py" --sample-steal "$run/steal-$1.txt" \
    --every-ms "$stealMs" --seconds "$(python3 -c "print($settle + $warmup + $duration + 60)")" --fifo 40 \
    2> "$run/steal-$1.log" &
  stealPid=$!
  bgPids+=($stealPid)
}

stopStealSampler() {
  [ -n "$stealPid" ] || return 0
  stopPid "$stealPid" 10
  stealPid=""
  python3 "$here/../sched_delays.py" --steal-timeline "$run/steal-$1.txt" --steal-summary \
    > "$run/steal-$1.json" 2>> "$run/steal-$1.log" || log "warning: no steal timeline for $1: $(tail -2 "$run/steal-$1.log")"
}

stealTimeline() {
  [ -s "$run/steal-$1.txt" ] && echo "--steal-timeline $run/steal-$1.txt" || true
}

# startLaunchProbe MODE NAME / stopLaunchProbe NAME: launch_probe.py over
# the phase's window (--launch-probe), into probe-NAME.json.
startLaunchProbe() {
  probePid=""
  [ "$probeMs" -gt 0 ] || return 0
  local port
  port=$(cat "$run/agent-$1.http" 2>/dev/null || true)
  [ -n "$port" ] || { log "warning: no agent HTTP port: phase $2 runs without the launch probe"; return 0; }
  python3 "$here/launch_probe.py" --execute "$execute" --master "$masterAddr" --metrics-port "$port" \
    --interval-ms "$probeMs" --duration "$duration" --name "probe-$2" \
    > "$run/probe-$2.json" 2> "$run/probe-$2.log" &
  probePid=$!
  bgPids+=($probePid)
}

stopLaunchProbe() {
  [ -n "$probePid" ] || return 0
  wait "$probePid" || log "warning: the launch probe of $1 failed: $(tail -2 "$run/probe-$1.log")"
  probePid=""
  python3 "$here/launch_probe.py" --summarize "$run/probe-$1.json" 2>/dev/null | sed "s/^/[probe $1] /" >&2 || true
}

# runPhase MODE PHASE: one measurement, with the hog running beside the victim.
runPhase() {
  local mode=$1 phase=$2 name="$2-$1" hogPid="" killAfter loadPid stallsFrom
  local k=2   # a phase listed again (--phases "alone cpu alone cpu"): alone-iso.2, ...
  if [ -e "$run/load-$name.json" ]; then
    while [ -e "$run/load-$name.$k.json" ]; do k=$((k + 1)); done
    name="$name.$k"
  fi
  kill -0 "$webExecPid" 2>/dev/null || die "the web task ended before phase $name: $(tail -3 "$run/web-$mode.log")"
  # The client starts before the phase's window (its interpreter's start-up
  # is not the phase's) and waits for its start time: the hog's settling.
  # (+1 s: the trace's start; then the hog's settling, if any.)
  local startAt
  killAfter=$(python3 -c "print($settle + $warmup + $duration + 120)")
  startAt=$(python3 -c "import time; print(f'{time.time() + $clientLead + 1 + ($([ "$phase" = alone ] && echo 0 || echo "$settle")):.3f}')")
  python3 "$here/loadgen.py" --port "$webPort" --rate "$rate" --duration "$duration" \
    --warmup "$warmup" --samples "$run/samples-$name.txt" --fifo "$clientFifo" --start-at "$startAt" \
    ${clientCpuArg:+--cpus "$clientCpuArg"} > "$run/load-$name.json" &
  loadPid=$!
  bgPids+=($loadPid)
  sleep "$clientLead"
  stallsFrom=$(wc -l < "$run/agent-$mode.log")
  startStealSampler "$name"
  startSchedTrace "$name"
  bareCpus=""
  if [ "$phase" = bare ]; then
    # The same spinners, but not an allot task: started by hand as the hog
    # user in this shell's cgroups, pinned away from the web server (where
    # the client runs). What they cost the web server is the hardware's
    # doing (shared caches, SMT siblings, the host), not allot's scheduling.
    bareCpus=${clientCpuArg:-$(( $(nproc) - 1 ))}
    # Its own session (setsid) as allot's launcher gives an executor: under
    # autogroup the spinners weigh as one, not as 256 beside the client.
    setsid setpriv --reuid="$hogUser" --regid="$hogUser" --clear-groups taskset -c "$bareCpus" \
      "$here/hogs.sh" cpu "$spinners" > "$run/hog-$name.log" 2>&1 &
    sleep "$settle"
  elif [ "$phase" != alone ]; then
    "$execute" --master "$masterAddr" --name "hog-$name" --resources "$hogResources" --user "$hogUser" \
      --kill-after "$killAfter" --command "$(hogCommand "$phase")" > "$run/hog-$name.log" 2>&1 &
    hogPid=$!
    bgPids+=($hogPid)
    sleep "$settle"
  fi
  log "phase $name: $rate requests/s for ${duration}s, the client on cpu ${clientCpuArg:-any}"
  startLaunchProbe "$mode" "$name"
  wait "$loadPid"   # interruptible: ^C cleans up at once
  stopLaunchProbe "$name"
  kill -0 "$webExecPid" 2>/dev/null || die "the web task ended during phase $name: $(tail -3 "$run/web-$mode.log")"
  local hogState="none"
  if [ -n "$hogPid" ]; then
    local evidence
    evidence=$(hogEvidence "$mode" "$phase")
    if kill -0 "$hogPid" 2>/dev/null; then
      hogState="running at the end of the phase"
      stopPid "$hogPid" 30
    else
      hogState="ended during the phase"
    fi
    hogState+="; $evidence; allot-execute: $(grep -v '^\s*$' "$run/hog-$name.log" | tail -2 | tr '\n' ' ' | cut -c1-300)"
    hogSurvivors=""
    killOurProcessesOfHog
    hogState+="$hogSurvivors"
  elif [ -n "$bareCpus" ]; then
    hogState="$(ps -u "$hogUser" -o pid= | wc -l) spinners started by hand (not an allot task) on cpu $bareCpus"
    kill -KILL $(ps -u "$hogUser" -o pid=) 2>/dev/null || true
    hogSurvivors=""
    killOurProcessesOfHog
  fi
  stopStealSampler "$name"
  stopSchedTrace "$name"
  phaseStalls "$mode" "$name" "$stallsFrom"
  python3 - "$run/load-$name.json" "$mode" "$phase" "$hogState" "$run/sched-$name.json" \
    "$loadPid" "${samplerPid:-0}" "$run/sleeps-$name.json" "$run/probe-$name.json" \
    "$run/loop-$name.json" "$run/steal-$name.json" >> "$run/phases.jsonl" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
d.update(mode=sys.argv[2], phase=sys.argv[3], hog=sys.argv[4],
         client_pid=int(sys.argv[6]), sampler_pid=int(sys.argv[7]))
for key, path in (("sched", sys.argv[5]), ("sleeps", sys.argv[8]), ("probe", sys.argv[9]),
                  ("late_ticks", sys.argv[10]), ("steal", sys.argv[11])):
    if os.path.getsize(path) if os.path.exists(path) else 0:
        d[key] = json.load(open(path))
print(json.dumps(d))
EOF
  log "phase $name: $(cat "$run/load-$name.json")"
  log "phase $name hog: $hogState"
}

# What the hog did by the end of its phase: its container's cgroup counters
# (isolated) or its processes (both), and the memory bomb's own progress.
hogEvidence() {
  local mode=$1 phase=$2 d name parts=()
  if [ "$mode" = iso ]; then
    for d in /sys/fs/cgroup/pids/"$cgroupsRoot"/*/; do
      [ -f "$d/pids.current" ] || continue
      name=$(basename "$d")
      parts+=("$name pids $(cat "$d/pids.current")/$(cat "$d/pids.max") (pids.events max $(awk '/^max/{print $2}' "$d/pids.events" 2>/dev/null))")
    done
    for d in /sys/fs/cgroup/cpu/"$cgroupsRoot"/*/; do
      [ -f "$d/cpu.shares" ] || continue
      parts+=("$(basename "$d") cpu.shares $(cat "$d/cpu.shares") cfs_quota $(cat "$d/cpu.cfs_quota_us")")
    done
    for d in /sys/fs/cgroup/cpuset/"$cgroupsRoot"/*/; do
      [ -f "$d/cpuset.cpus" ] || continue
      parts+=("$(basename "$d") cpuset $(cat "$d/cpuset.cpus")")
    done
    for d in /sys/fs/cgroup/memory/"$cgroupsRoot"/*/; do
      [ -f "$d/memory.max_usage_in_bytes" ] || continue
      name=$(basename "$d")
      parts+=("$name mem peak $(( $(cat "$d/memory.max_usage_in_bytes") >> 20 )) MiB, failcnt $(cat "$d/memory.failcnt")")
    done
  fi
  case "$phase" in
    fork) parts+=("fork-bomb processes now: $(ps -u "$hogUser" -o pid= 2>/dev/null | wc -l)") ;;
    mem) parts+=("bomb: $(grep -rh allocated "$run/agent-$mode" --include="*stdout" 2>/dev/null | tail -1)") ;;
  esac
  local IFS=';'
  echo "${parts[*]}"
}

# After a hog's framework ended: its user's processes must be gone.
killOurProcessesOfHog() {
  local pids round
  # The agent removes an executor's container when the executor exits,
  # shortly after the task's KILLED status: give it 5 s.
  for round in $(seq 50); do
    [ -z "$(ps -u "$hogUser" -o pid= 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  for round in 1 2 3 4 5 6 7 8 9 10; do
    pids=$(ps -u "$hogUser" -o pid= 2>/dev/null || true)
    pids=$(echo $pids)
    [ -z "$pids" ] && return 0
    if [ "$round" -eq 1 ]; then
      hogSurvivors="; $(echo $pids | wc -w) of its processes outlived the task by 5 s (killed by run.sh)"
      log "warning: $(echo $pids | wc -w) fork-bomb processes outlived their task by 5 s; killing them"
    fi
    kill -STOP $pids 2>/dev/null || true
    kill -KILL $pids 2>/dev/null || true
    sleep 0.2
  done
}

# ---------------------------------------------------------------- run

log "machine: $(nproc) cores, $(uptime | sed 's/.*load/load/')"
uptime > "$run/uptime-start"
if [ "$schedTrace" -eq 1 ] && ! perf record -q -e sched:sched_switch -a -o /dev/null -- true >/dev/null 2>&1; then
  log "no usable perf (linux-perf, tracefs): phases run without the scheduling trace"
  schedTrace=0
fi
prepareVictim
makeNodeCgroup
makeUnitCgroups
startMaster
: > "$run/phases.jsonl"
for mode in $modes; do
  if ! startAgent "$mode"; then
    if [ "$mode" = iso ] && [[ "$isolation" == *cgroups/cpuset* ]]; then
      isolation=${isolation//,cgroups\/cpuset/}
      log "retrying without cgroups/cpuset: --isolation $isolation"
      startAgent "$mode" || { log "skipping mode $mode"; continue; }
    else
      log "skipping mode $mode"
      continue
    fi
  fi
  startWeb "$mode"
  for phase in $phases; do
    runPhase "$mode" "$phase"
  done
  stopWeb
  stopAgent
done
uptime > "$run/uptime-end"

python3 "$here/report.py" --phases "$run/phases.jsonl" --out "$out" \
  --command "bench/hog/run.sh $origArgs" --rate "$rate" --duration "$duration" --warmup "$warmup" \
  --spinners "$spinners" \
  --page-cost "$(cat "$run/page-cost-ms")" --isolation "$isolation" \
  --node "$([ "$useNode" -eq 1 ] && echo "cgroup $nodeCgroup, cpu.shares $nodeShares" ||
    { [ "$unitPlacement" -eq 1 ] && echo "none; the packaged units' placement emulated: $cgroupsRoot (cpu.shares 102400) in a top-level slice at cpu.shares $unitSliceShares, the agent in its own unit beside it" || echo none; })" \
  --uptime-start "$(cat "$run/uptime-start")" --uptime-end "$(cat "$run/uptime-end")"
{ echo; echo "agent loop stalls (lateness of a 5 ms timer on the agent's loop over the whole mode; target < 10 ms):"
  cat "$run/loop-stalls.txt" 2>/dev/null
  echo; echo "per phase (from the hog's launch to its kill; the agent's warnings, at most one a second):"
  cat "$run/loop-stalls-phases.txt" 2>/dev/null
  for f in "$run"/loop-sample-*.txt; do
    [ -f "$f" ] || continue
    echo; echo "what the agent's loop did when busy ($(basename "$f" .txt)):"; cat "$f"
  done; } >> "$out/hog-results.txt"
if command -v gnuplot >/dev/null; then
  gnuplot -e "datafile='$out/hog-results.dat'; outfile='$out/hog-latency.png'" "$here/plot.gp" \
    && log "plot: $out/hog-latency.png"
fi
cat "$out/hog-results.txt"
