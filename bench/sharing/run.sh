#!/bin/bash
# The paper's dynamic-sharing experiment (section 6.1, Figure 5 in
# spirit): four greedy frameworks (bench/sharing/sharing_bench.cpp's
# schedule: hadoop 0-240 s, mpi 30-180 s, spark 60-240 s, torque 90-210 s)
# on emulated agents, run twice against a real allot-master: DRF alone, then
# with a guarantee for torque plus revocation. Prints, per run, how long each
# arriving framework took to reach 90% of its fair share (and torque its
# guarantee) and the work lost to revocation; writes both share-over-time
# series and, with --plot, a two-panel PNG.
#
#   bench/sharing/run.sh --build-dir build [--time-scale 1] [--plot docs/results/sharing.png]
set -euo pipefail

build=build agents=20 scale=1 grace=2 interval=1 plot="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --time-scale) scale=$2; shift 2 ;;
    --revocation-grace) grace=$2; shift 2 ;;
    --allocation-interval) interval=$2; shift 2 ;;
    --plot) plot=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$agents" -ge 1 ] && [ "$agents" -le 1000 ] || { echo "run.sh: --agents 1..1000" >&2; exit 2; }

dir=$(mktemp -d /tmp/allot-sharing.XXXXXX)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# Each emulated agent: 8 cpus, 16 GiB. Torque's guarantee: a quarter of the
# cluster's cpus (its tasks are cpus:2;mem:1024, so cpus is its dominant
# resource).
cluster="cpus:$((agents * 8));mem:$((agents * 16384))"
gcpus=$((agents * 2))
gshare=0.25

run() {  # NAME MASTER-FLAGS... ; leaves $dir/NAME.csv and $dir/NAME.txt
  local name=$1; shift
  rm -f "$dir/port"
  "$build/master/allot-master" --listen 127.0.0.1:0 --port-file "$dir/port" \
    --allocation-interval "$interval" --stats-interval 0 "$@" >"$dir/master-$name.log" 2>&1 &
  local master_pid=$!
  pids+=("$master_pid")
  wait_for 10 test -s "$dir/port" || die "master did not start"
  local master="127.0.0.1:$(cat "$dir/port")"
  "$build/bench/scale/agent_emulator" --master "$master" --agents "$agents" \
    --resources "cpus:8;mem:16384" >"$dir/emulator.log" 2>&1 &
  local emu_pid=$!
  pids+=("$emu_pid")
  wait_for 30 registered || die "agents did not all register"
  "$build/bench/sharing/sharing_bench" --master "$master" --cluster "$cluster" \
    --out "$dir/$name.csv" --time-scale "$scale" \
    --guarantee-framework torque --guarantee-share "$gshare" >"$dir/$name.txt" 2>"$dir/bench-$name.log" \
    || die "sharing_bench failed"
  kill "$emu_pid" "$master_pid" 2>/dev/null || true
  wait "$emu_pid" "$master_pid" 2>/dev/null || true
  echo "== $name (master flags: ${*:-none}; time scale $scale)"
  grep '^sharing:' "$dir/$name.txt"
}

run drf
run revocation --revocation --revocation-grace "$grace" --guarantee "torque:cpus:$gcpus;mem:$((agents * 1024))"
echo "loadavg=[$(cut -d' ' -f1-3 /proc/loadavg)] agents=$agents cluster=$cluster"
grep -q "torque .*its guarantee (0.25) after" "$dir/revocation.txt" || die "torque never reached its guarantee with revocation"
[ -z "$out" ] || { mkdir -p "$out"; cp "$dir"/*.csv "$dir"/*.txt "$out"/; }

if [ -n "$plot" ]; then
  gnuplot -e "set terminal png size 900,700; set output '$plot'; set datafile separator ',';
    set multiplot layout 2,1; set yrange [0:1]; set ylabel 'dominant share'; set key outside right;
    set title 'DRF alone ($agents emulated agents, $cluster)';
    plot for [c=2:5] '$dir/drf.csv' using (\$1):c with lines lw 2 title columnheader(c);
    set title 'Guarantee for torque (0.25) + revocation, grace $grace s'; set xlabel 'seconds';
    plot for [c=2:5] '$dir/revocation.csv' using (\$1):c with lines lw 2 title columnheader(c),
         $gshare with lines dt 2 lc rgb 'black' title 'torque guarantee';
    unset multiplot"
  echo "plot: $plot"
fi
