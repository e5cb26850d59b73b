#!/bin/bash
# A leader failover behind link shards: one ZooKeeper server, two masters
# electing a leader there, S allot-shards following it (--master zk://),
# N emulated agents spread over them (one emulator process per shard). The leader is SIGKILLed; the script
# measures from the signal until the new leader's /state has every agent
# connected, and counts the agent handshakes the shard saw meanwhile (0:
# no agent reconnected).
#
#   bench/scale/shard_failover.sh --build-dir build --agents 50000 --shards 4
set -euo pipefail
build=build agents=2000 shards=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    *) echo "shard_failover.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$agents" -le $(( shards * 15000 )) ] || { echo "shard_failover.sh: a shard holds at most 15000 agents here" >&2; exit 2; }
for f in /usr/bin/java /usr/share/java/zookeeper.jar; do
  [ -e "$f" ] || { echo "shard_failover.sh: $f missing: install Debian's zookeeper package" >&2; exit 77; }
done
dir=$(mktemp -d /tmp/allot-shard-failover.XXXXXX)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"  # pids, die, wait_for, registered, result
ulimit -n "$(ulimit -Hn)"

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

masters=()
for m in 1 2; do
  "$build/master/allot-master" --listen 127.0.0.1:0 --zk "$url" --zk-session-timeout 1 \
    --shard-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --http-port-file "$dir/http$m.port" \
    --agent-timeout 60 --heartbeat-interval 10 >"$dir/master$m.log" 2>&1 &
  masters+=($!); pids+=($!)
  wait_for 15 grep -qs "joined the contender group" "$dir/master$m.log" || die "master $m did not join"
done
for s in $(seq 0 $(( shards - 1 ))); do
  "$build/shard/allot-shard" --listen 127.0.0.1:0 --port-file "$dir/shard$s.port" --master "$url" \
    --http-listen 127.0.0.1:0 --http-port-file "$dir/shard$s-http.port" >"$dir/shard$s.log" 2>&1 &
  pids+=($!)
  wait_for 15 grep -qs "linked to the leader" "$dir/shard$s.log" || die "shard $s did not link"
  n=$(( agents / shards + (s < agents % shards ? 1 : 0) ))
  "$build/bench/scale/agent_emulator" --master "127.0.0.1:$(cat "$dir/shard$s.port")" --agents "$n" \
    --resources "cpus:2;mem:2048" --first-source "$(( 2 + s * 2 ))" >"$dir/emulator$s.log" 2>&1 &
  pids+=($!)
done
wait_for $(( agents / 200 + 60 )) registered || die "agents did not all register"

handshakes() {
  local s total=0 n
  for s in $(seq 0 $(( shards - 1 ))); do
    n=$(curl -s "127.0.0.1:$(cat "$dir/shard$s-http.port")/metrics" | awk '/^allot_shard_handshakes_total/ {print $2}')
    total=$(( total + ${n%.*} ))
  done
  echo "$total"
}
connected() { curl -s "127.0.0.1:$(cat "$dir/http2.port")/state" | grep -o '"connected":true' | wc -l; }
before=$(handshakes)
t0=$(date +%s.%N)
kill -KILL "${masters[0]}"
handed() { [ "$(grep -ls "handed .* agents to the leader" "$dir"/shard*.log | wc -l)" -ge "$shards" ]; }
wait_for 60 handed || die "the shards did not hand their agents over"
t1=$(date +%s.%N)
all() { [ "$(connected)" -ge "$agents" ]; }
wait_for 120 all || die "the new leader never had every agent"
t2=$(date +%s.%N)
after=$(handshakes)
ms() { echo "($2 - $1) * 1000" | bc -l | xargs printf '%.0f'; }
result shard_failover agents="$agents" shards="$shards" zk_session_s=1 handed_over_ms="$(ms "$t0" "$t1")" \
  all_agents_on_new_leader_ms="$(ms "$t0" "$t2")" agent_handshakes_during_failover=$(( after - before ))
