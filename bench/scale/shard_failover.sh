#!/bin/bash
# A failover behind link shards: one ZooKeeper server, two masters electing
# a leader there, S allot-shards following it (--master zk://), N emulated
# agents spread over them (S emulator processes, each agent placed by its
# own rendezvous hash over every shard, as real agents are given --shards),
# and optionally F load frameworks running tasks (--task-mean seconds each,
# default 30).
#
# --kill leader (default): the leader is SIGKILLed; the script measures from
# the signal until every shard handed its agents over (handed_over_ms: the
# last shard sent the new leader every agent's kept report) and until the
# new leader had registered every agent from that report, with its tasks
# (all_agents_state_on_new_leader_ms: the leader's answer to every report
# handed over reached its shard, which logs it; polled every 20 ms). No
# agent sends its report again; only agents with updates to send again
# hear of the new leader (agents_told). It then checks once that the new
# leader's /state has every agent connected, and counts the agent
# handshakes the shards saw meanwhile (0: no agent reconnected). cpu_s_*:
# the CPU the new leader, the shards and the emulators used from the
# signal to the last answer.
#
# --kill shard: the first shard is SIGKILLed; the script measures from the
# signal until every emulator has all its agents registered again (each
# says when, on the wall clock: the leader answered their registration
# through another shard), checks that the leader's /state then shows every
# agent connected and none through the dead shard, and counts the agents
# that moved, the handshakes the other shards saw, and the frameworks'
# tasks that ran and ended other than FINISHED (tasks_lost_running, 0:
# nothing lost). Polling the leader's /state meanwhile would load it.
# The other shards' allot_shard_handshakes_total is sampled every 250 ms
# meanwhile: handshakes_per_s_peak is the most they completed in one second,
# handshakes_per_s_mean the moved agents over the span from the first of
# their handshakes to the last.
#
# --tls: every link mutual TLS (scripts/allot-certs: master, shard, agent
# and framework certificates), so each moved agent makes a full TLS 1.3
# handshake with its new shard.
#
#   bench/scale/shard_failover.sh --build-dir build --agents 50000 --shards 4
#   bench/scale/shard_failover.sh --build-dir build --agents 20000 --shards 4 --kill shard --frameworks 10
#   bench/scale/shard_failover.sh --build-dir build --agents 20000 --shards 4 --kill shard --tls
set -euo pipefail
build=build agents=2000 shards=1 kill=leader frameworks=0 task_mean=30 tls=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --kill) kill=$2; shift 2 ;;
    --frameworks) frameworks=$2; shift 2 ;;
    --task-mean) task_mean=$2; shift 2 ;;
    --tls) tls=1; shift ;;
    *) echo "shard_failover.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$kill" in leader|shard) ;; *) echo "shard_failover.sh: --kill leader or shard" >&2; exit 2 ;; esac
[ "$kill" = leader ] || [ "$shards" -ge 2 ] || { echo "shard_failover.sh: --kill shard needs --shards 2 or more" >&2; exit 2; }
[ "$agents" -le $(( shards * 15000 )) ] || { echo "shard_failover.sh: a shard holds at most 15000 agents here" >&2; exit 2; }
for f in /usr/bin/java /usr/share/java/zookeeper.jar; do
  [ -e "$f" ] || { echo "shard_failover.sh: $f missing: install Debian's zookeeper package" >&2; exit 77; }
done
dir=$(mktemp -d /tmp/allot-shard-failover.XXXXXX)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"  # pids, die, wait_for, registered, result
ulimit -n "$(ulimit -Hn)"
if [ "$tls" = 1 ]; then
  "$(dirname "${BASH_SOURCE[0]}")/../../scripts/allot-certs" "$dir/c" >/dev/null || die "scripts/allot-certs failed"
fi
tls_args() {  # $1 = certificate name
  [ "$tls" = 1 ] || return 0
  echo "--tls-cert $dir/c/$1.crt --tls-key $dir/c/$1.key --tls-ca $dir/c/ca.crt"
}
# GET http(s)://127.0.0.1:$(cat PORT_FILE)PATH; with --tls as an operator
# (-k: allot's certificates name no host, curl would want one).
get() {
  if [ "$tls" = 1 ]; then
    curl -s -k --cert "$dir/c/operator.crt" --key "$dir/c/operator.key" \
      "https://127.0.0.1:$(cat "$1")$2"
  else
    curl -s "127.0.0.1:$(cat "$1")$2"
  fi
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
zk=$(free_port)
mkdir -p "$dir/zk"
printf 'tickTime=200\ninitLimit=10\nsyncLimit=5\ndataDir=%s/zk\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\nmaxClientCnxns=0\n' \
  "$dir" "$zk" > "$dir/zoo.cfg"
java -Xmx256m -cp "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar" \
  org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" > "$dir/zk.log" 2>&1 &
pids+=($!)
zk_up() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$zk && echo srvr >&3 && grep -q Mode: <&3" 2>/dev/null; }
wait_for 30 zk_up || die "ZooKeeper did not start"
url="zk://127.0.0.1:$zk/allot-bench"

masters=() shard_pids=() emulator_pids=()
for m in 1 2; do
  "$build/master/allot-master" --listen 127.0.0.1:0 --zk "$url" --zk-session-timeout 1 \
    --shard-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --http-port-file "$dir/http$m.port" \
    --agent-timeout 60 --heartbeat-interval 10 $(tls_args master) >"$dir/master$m.log" 2>&1 &
  masters+=($!); pids+=($!)
  wait_for 15 grep -qs "joined the contender group" "$dir/master$m.log" || die "master $m did not join"
done
list=""
for s in $(seq 0 $(( shards - 1 ))); do
  "$build/shard/allot-shard" --listen 127.0.0.1:0 --port-file "$dir/shard$s.port" --master "$url" \
    --http-listen 127.0.0.1:0 --http-port-file "$dir/shard$s-http.port" $(tls_args shard) >"$dir/shard$s.log" 2>&1 &
  pids+=($!) shard_pids+=($!)
  wait_for 15 grep -qs "linked to the leader" "$dir/shard$s.log" || die "shard $s did not link"
  list="$list${list:+,}127.0.0.1:$(cat "$dir/shard$s.port")"
done
for s in $(seq 0 $(( shards - 1 ))); do
  n=$(( agents / shards + (s < agents % shards ? 1 : 0) ))
  "$build/bench/scale/agent_emulator" --shards "$list" --agents "$n" \
    --resources "cpus:2;mem:2048" --first-source "$(( 2 + s * 2 ))" $(tls_args agent) >"$dir/emulator$s.log" 2>&1 &
  pids+=($!) emulator_pids+=($!)
done
wait_for $(( agents / 200 + 60 )) registered || die "agents did not all register"
if [ "$frameworks" -gt 0 ]; then
  "$build/bench/scale/load_frameworks" --master "$url" --frameworks "$frameworks" \
    --task-mean "$task_mean" --task-stddev "$(( task_mean / 3 ))" $(tls_args framework) >"$dir/load.log" 2>&1 &
  pids+=($!)
  sleep 10
fi

handshakes() {
  local s total=0 n
  for s in $(seq "$1" $(( shards - 1 ))); do
    n=$(get "$dir/shard$s-http.port" /metrics | awk '/^allot_shard_handshakes_total/ {print $2}')
    total=$(( total + ${n%.*} ))
  done
  echo "$total"
}
ms() { echo "($2 - $1) * 1000" | bc -l | xargs printf '%.0f'; }
# The frameworks' tasks that ended other than FINISHED so far (errors), and
# of those the ones that never reached RUNNING (errors_never_running).
errors() { local n; n=$(grep -so " $1=[0-9]*" "$dir/load.log" | tail -1 | cut -d= -f2); echo "${n:-0}"; }
# Tasks that reached RUNNING and then ended other than FINISHED (0: nothing
# lost). Those refused before running (a launch on an offer the old leader
# made, say) are counted apart.
lost() { echo $(( $(errors errors) - $(errors errors_never_running) )); }

# From lines "TIME TOTAL" (the other shards' handshakes, sampled) and the
# total before the kill: "PEAK MEAN", the most handshakes in any one second
# and the mean rate from the first new handshake to the last.
handshake_rates() {
  awk -v before="$1" '
    { t[NR] = $1; n[NR] = $2 }
    END {
      peak = 0; first = 0; last = 0
      for (i = 1; i <= NR; i++) {
        if (n[i] > before && first == 0) first = i
        if (i > 1 && n[i] > n[i - 1]) last = i
        for (j = i; j > 1 && t[i] - t[j - 1] <= 1.0; j--) ;
        if (n[i] - n[j] > peak) peak = n[i] - n[j]
      }
      span = (first > 1 && last > first) ? t[last] - t[first - 1] : 0
      mean = span > 0 ? (n[last] - before) / span : 0
      printf "%d %d\n", peak, mean
    }'
}

if [ "$kill" = shard ]; then
  dead="127.0.0.1:$(cat "$dir/shard0.port")"
  state() { get "$dir/http1.port" /state; }
  on_dead() { state | grep -o "\"shard\":\"$dead\"" | wc -l; }
  moving=$(on_dead)
  before=$(handshakes 1)
  (while :; do echo "$(date +%s.%N) $(handshakes 1)"; sleep 0.25; done) >"$dir/handshakes.log" &
  sampler=$!
  pids+=($sampler)
  t0=$(date +%s.%N)
  kill -KILL "${shard_pids[0]}"
  # Every agent connected (each through a shard) and none through the dead one.
  moved() { local st; st=$(state); [ "$(grep -o '"shard":"' <<<"$st" | wc -l)" -ge "$agents" ] && ! grep -q "\"shard\":\"$dead\"" <<<"$st"; }
  back() { [ "$(grep -h "registered again at" "$dir"/emulator*.log | wc -l)" -ge "$shards" ]; }
  wait_for 120 back || die "the dead shard's agents never all registered again"
  t1=$(grep -h "registered again at" "$dir"/emulator*.log | awk '{print $NF}' | sort -g | tail -1)
  wait_for 30 moved || die "the leader does not show every agent connected, none through the dead shard"
  after=$(handshakes 1)
  kill "$sampler"
  rates=$(handshake_rates "$before" <"$dir/handshakes.log")
  sleep 10  # the tasks running on the moved agents end meanwhile
  known=$(state | grep -o '"hostname":"emu-' | wc -l)
  result shard_kill agents="$agents" shards="$shards" frameworks="$frameworks" agents_on_dead_shard="$moving" \
    all_agents_moved_ms="$(ms "$t0" "$t1")" agents_known="$known" \
    handshakes_on_other_shards=$(( after - before )) tasks_lost_running="$(lost)" \
    tasks_refused_before_running="$(errors errors_never_running)" \
    emulator_moves="$(emulated moves)" handshakes_per_s_peak="${rates% *}" handshakes_per_s_mean="${rates#* }" \
    tls="$tls" load="$(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi

# CPU seconds (user and system) the given processes have used so far.
cpu_s() {
  local p ticks=0
  for p in "$@"; do ticks=$(( ticks + $(awk '{print $14 + $15}' "/proc/$p/stat") )); done
  echo "scale=2; $ticks / $(getconf CLK_TCK)" | bc
}
connected() { get "$dir/http2.port" /state | grep -o '"connected":true' | wc -l; }
before=$(handshakes 0)
cpu0="$(cpu_s "${masters[1]}") $(cpu_s "${shard_pids[@]}") $(cpu_s "${emulator_pids[@]}")"
t0=$(date +%s.%N)
kill -KILL "${masters[0]}"
handed() { [ "$(grep -ls "handed .* agents to the leader" "$dir"/shard*.log | wc -l)" -ge "$shards" ]; }
wait_for 60 handed || die "the shards did not hand their agents over"
t1=$(date +%s.%N)
answered() { [ "$(grep -ls "the leader registered every agent handed over" "$dir"/shard*.log | wc -l)" -ge "$shards" ]; }
for _ in $(seq 6000); do answered && break; sleep 0.02; done
answered || die "the new leader did not register every handed-over agent"
t_answered=$(date +%s.%N)
# CPU used from the signal until every report handed over was answered.
read -r l0 s0 e0 <<<"$cpu0"
cpu_leader=$(echo "$(cpu_s "${masters[1]}") - $l0" | bc)
cpu_shards=$(echo "$(cpu_s "${shard_pids[@]}") - $s0" | bc)
cpu_emulators=$(echo "$(cpu_s "${emulator_pids[@]}") - $e0" | bc)
all() { [ "$(connected)" -ge "$agents" ]; }
wait_for 60 all || die "the new leader does not show every agent connected"
after=$(handshakes 0)
sleep 10  # the emulators' and frameworks' next reports
result shard_failover agents="$agents" shards="$shards" tls="$tls" zk_session_s=1 handed_over_ms="$(ms "$t0" "$t1")" \
  all_agents_state_on_new_leader_ms="$(ms "$t0" "$t_answered")" \
  cpu_s_new_leader="$cpu_leader" cpu_s_shards="$cpu_shards" cpu_s_emulators="$cpu_emulators" \
  agent_handshakes_during_failover=$(( after - before )) \
  agents_told="$(emulated handovers)" frameworks="$frameworks" tasks_lost_running="$(lost)" \
  tasks_refused_before_running="$(errors errors_never_running)" \
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
