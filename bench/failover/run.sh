#!/usr/bin/env bash
# Paper experiment 6.6: master failover with ZooKeeper (docs/benchmarks.md).
#
#   bench/failover/run.sh [--build-dir build] [--sizes "200 1000 4000 10000"]
#       [--frameworks 200] [--kills 5] [--zk-session-timeout 1]
#       [--signals "kill term"] [--master-flags "..."] [--bench-flags "..."] [--out DIR]
#
# After each recovered kill every framework reconciles with the new leader:
# "reconciled" counts its running tasks confirmed RUNNING (with the median
# ms from asking to the last answer), "wrong" the answers that were not a
# task's true state (must be 0).
#
# Starts one ZooKeeper server on a free loopback port (tickTime 200 ms, its
# own data dir), then for each agent count and each signal (SIGKILL, SIGTERM)
# runs failover_bench: three masters, the agents and frameworks, --kills
# kills of the leader. A size whose run fails (a round that does not
# recover, a task or terminal update lost) is reported and the script goes
# on, then exits 1. Writes DIR/failover.csv (one line per kill),
# DIR/summary.txt (medians per size and signal, beside the paper's 4-8 s and
# Mesos's 10 s session) and DIR/failover.png when gnuplot is installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build="$here/../../build"
sizes="200 1000 4000 10000"
frameworks=200
kills=5
session=1
signals="kill term"
master_flags=""
bench_flags=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --frameworks) frameworks=$2; shift 2 ;;
    --kills) kills=$2; shift 2 ;;
    --zk-session-timeout) session=$2; shift 2 ;;
    --signals) signals=$2; shift 2 ;;
    --master-flags) master_flags=$2; shift 2 ;;
    --bench-flags) bench_flags=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "run.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd)
out=${out:-$build/bench/failover/results}
mkdir -p "$out"
for f in /usr/bin/java /usr/share/java/zookeeper.jar; do
  [ -e "$f" ] || { echo "run.sh: $f missing: install Debian's zookeeper package" >&2; exit 77; }
done

zkdir=$(mktemp -d /tmp/allot-failover-zk-XXXXXX)
dir=$zkdir
. "$here/../lib.sh"  # pids (the ZooKeeper server), the scratch dir removed on exit
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$zkdir/data"
cat > "$zkdir/zoo.cfg" <<CFG
tickTime=200
initLimit=10
syncLimit=5
dataDir=$zkdir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr
maxClientCnxns=0
CFG
printf 'log4j.rootLogger=WARN, F\nlog4j.appender.F=org.apache.log4j.FileAppender\nlog4j.appender.F.File=%s/zk.log\nlog4j.appender.F.layout=org.apache.log4j.PatternLayout\nlog4j.appender.F.layout.ConversionPattern=%%d %%p %%c{1}: %%m%%n\n' "$zkdir" > "$zkdir/log4j.properties"
java -Xmx256m -cp "$zkdir:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar" \
  -Dlog4j.configuration="file:$zkdir/log4j.properties" \
  org.apache.zookeeper.server.quorum.QuorumPeerMain "$zkdir/zoo.cfg" > "$zkdir/out.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do
  # Bounded: a server that accepts before it is ready may never answer.
  if timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && echo srvr >&3 && grep -q Mode: <&3" 2>/dev/null; then break; fi
  sleep 0.1
done

csv="$out/failover.csv"
echo "agents,frameworks,signal,kill,elected_ms,detected_ms,accepting_ms,agents_ms,frameworks_ms,offers_ms,tasks_lost,updates_lost,reconciled,reconcile_wrong,reconcile_ms,leader_cpu_ms,clients_cpu_ms,load1,fenced,zk_late,first_detected_ms,first_hello_ms,probe_hello_ms,probe_answered_ms,first_agent_back_ms" > "$csv"
rm -f "$out/workers.csv"
run=0
failed=0
for agents in $sizes; do
  fw=$frameworks; [ "$fw" -gt "$agents" ] && fw=$agents
  for sig in $signals; do
    run=$((run + 1))
    echo "[failover] $agents agents, $fw frameworks, SIG${sig^^}, $kills kills (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    if ! "$build/bench/failover/failover_bench" --zk "zk://127.0.0.1:$port/allot-bench-$run" \
      --master-binary "$build/master/allot-master" --work-dir "$out/run-$agents-$sig" \
      --agents "$agents" --frameworks "$fw" --kills "$kills" --signal "$sig" \
      --zk-session-timeout "$session" --master-flags "$master_flags" \
      --worker-csv "$out/workers.csv" $bench_flags \
      > "$out/run-$agents-$sig.csv"; then
      echo "[failover] FAILED: $agents agents, SIG${sig^^} (logs in $out/run-$agents-$sig)" >&2
      failed=1
    fi
    tail -n +2 "$out/run-$agents-$sig.csv" >> "$csv"
  done
done

python3 - "$csv" "$session" "$out/workers.csv" > "$out/summary.txt" <<'PY'
import csv, os, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(f"allot failover (zk session {sys.argv[2]} s), medians over kills [min-max]; "
      "anchors: paper 4000-8000 ms full recovery, Mesos default 10 s session")
print("accepting = the new leader's first answered registration, whoever sent it (the bench's "
      "direct probe, a real framework registration, or an emulated peer); firstAgentBack = the "
      "first emulated agent's re-registration answered (the 'accepting' column before 2026-11-24 #5)")
print(f"{'agents':>7} {'signal':>6} {'elected':>16} {'detected':>16} {'accepting':>16} {'agents':>16} "
      f"{'frameworks':>16} {'offers':>16} {'lost':>5} {'upd':>4} {'reconciled':>16} {'wrong':>5} "
      f"{'leaderCPU':>16} {'clientCPU':>16} {'load':>5} {'fenced':>6} {'zkLate':>6} "
      f"{'firstDetected':>16} {'firstHello':>16} {'probeHello':>16} {'probeAnswered':>16} "
      f"{'firstAgentBack':>16}")
groups = {}
for r in rows: groups.setdefault((int(r['agents']), r['signal']), []).append(r)
for (agents, sig), rs in sorted(groups.items()):
    def col(k):
        v = [float(r[k]) for r in rs if float(r[k]) >= 0]
        return f"{statistics.median(v):.0f} [{min(v):.0f}-{max(v):.0f}]" if v else "n/a"
    lost = max(int(r['tasks_lost']) for r in rs)  # cumulative within a run
    updates = sum(int(r['updates_lost']) for r in rs)
    load = max(float(r['load1']) for r in rs)
    wrong = max(int(r['reconcile_wrong']) for r in rs)  # cumulative within a run
    reconciled = f"{sum(int(r['reconciled']) for r in rs)} in {col('reconcile_ms')}"
    fenced = sum(int(r['fenced']) for r in rs)
    late = sum(int(r['zk_late']) for r in rs)
    print(f"{agents:>7} {sig:>6} {col('elected_ms'):>16} {col('detected_ms'):>16} {col('accepting_ms'):>16} "
          f"{col('agents_ms'):>16} {col('frameworks_ms'):>16} {col('offers_ms'):>16} {lost:>5} {updates:>4} "
          f"{reconciled:>16} {wrong:>5} "
          f"{col('leader_cpu_ms'):>16} {col('clients_cpu_ms'):>16} {load:>5.1f} {fenced:>6} {late:>6} "
          f"{col('first_detected_ms'):>16} {col('first_hello_ms'):>16} {col('probe_hello_ms'):>16} "
          f"{col('probe_answered_ms'):>16} {col('first_agent_back_ms'):>16}")
# Where the first emulated agent's time went: per kill, the worker whose
# agent was answered first (workers.csv, --worker-csv).
if os.path.exists(sys.argv[3]):
    wrows = list(csv.DictReader(open(sys.argv[3])))
    print()
    print("first worker back, per kill (ms from the signal; its loop thread's CPU / run-queue wait "
          "since the kill; links it had lost):")
    keys = [("first_lost_ms", "firstLost"), ("detected_ms", "detected"), ("lost_by_detected", "lostByDet"),
            ("cpu_to_detected_ms", "cpuToDet"), ("wait_to_detected_ms", "waitToDet"),
            ("first_hello_ms", "hello"), ("first_agent_back_ms", "agentBack"),
            ("cpu_to_agent_back_ms", "cpuToBack"), ("wait_to_agent_back_ms", "waitToBack"),
            ("lost_by_agent_back", "lostByBack")]
    print(f"{'agents':>7} {'signal':>6} " + " ".join(f"{label:>16}" for _, label in keys) +
          f" {'workers':>7} {'lastDetected':>16} {'lastToldAll':>16}")
    wgroups = {}
    for r in wrows: wgroups.setdefault((int(r['agents']), r['signal']), []).append(r)
    for (agents, sig), rs in sorted(wgroups.items()):
        firsts, lastDet, lastTold = [], [], []
        for k in sorted({r['kill'] for r in rs}):
            kr = [r for r in rs if r['kill'] == k and float(r['first_agent_back_ms']) >= 0]
            if kr: firsts.append(min(kr, key=lambda r: float(r['first_agent_back_ms'])))
            det = [float(r['detected_ms']) for r in rs if r['kill'] == k and float(r['detected_ms']) >= 0]
            if det: lastDet.append(max(det))
            told = [float(r.get('told_all_ms', -1)) for r in rs if r['kill'] == k]
            if told and min(told) >= 0: lastTold.append(max(told))
        def med(vals):
            v = [x for x in vals if x >= 0]
            return f"{statistics.median(v):.0f} [{min(v):.0f}-{max(v):.0f}]" if v else "n/a"
        print(f"{agents:>7} {sig:>6} " + " ".join(f"{med([float(r[key]) for r in firsts]):>16}" for key, _ in keys) +
              f" {len({r['worker'] for r in rs}):>7} {med(lastDet):>16} {med(lastTold):>16}")
PY
cat "$out/summary.txt"
if command -v gnuplot > /dev/null; then
  python3 - "$csv" > "$out/plot.dat" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for sig in ("kill", "term"):
    sizes = sorted({int(r['agents']) for r in rows if r['signal'] == sig})
    for a in sizes:
        v = [max(float(r['agents_ms']), float(r['frameworks_ms'])) / 1000 for r in rows
             if r['signal'] == sig and int(r['agents']) == a]
        print(a, statistics.median(v), min(v), max(v))
    print(); print()
PY
  gnuplot <<GP
set terminal png size 800,500
set output "$out/failover.png"
set logscale x
set xlabel "agents"
set ylabel "time to full recovery from the signal (s)"
set yrange [0:11]
set key top left
plot "$out/plot.dat" index 0 using 1:2:3:4 with yerrorlines title "allot, SIGKILL of the leader", \
     "$out/plot.dat" index 1 using 1:2:3:4 with yerrorlines title "allot, SIGTERM of the leader", \
     4 with lines dt 2 title "paper: 4 s", 8 with lines dt 2 title "paper: 8 s", \
     10 with lines dt 3 title "Mesos: 10 s ZooKeeper session alone"
GP
fi
exit $failed
