#!/bin/bash
# Sweeps run.sh over cluster sizes and prints the table beside the paper's
# figure (section 6.5: extra delay under 1 s at every size up to 50,000
# agents), then plots overhead versus agents to scale-overhead.png.
#
#   bench/scale/sweep.sh build "1000 5000 10000 20000 50000" [out-dir]
#
# Results: OUT/scale.csv and scale.jsonl (one row per size, bench/result.py).
# A size whose master would need more sockets than RLIMIT_NOFILE allows is
# reported as blocked (with the limit), never silently dropped.
set -euo pipefail
build=${1:-build}
sizes=${2:-"1000 5000 10000 20000 50000"}
out=${3:-$build/bench-results}
frameworks=${FRAMEWORKS:-200}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"  # die
mkdir -p "$out"
rm -f "$out/scale.csv" "$out/scale.jsonl"

ulimit -Hn 262144 2>/dev/null || true
limit=$(ulimit -Hn)
notes=()
for n in $sizes; do
  if [ $(( n + frameworks + 64 )) -gt "$limit" ]; then
    notes+=("agents=$n blocked: the master needs $((n + frameworks)) sockets but RLIMIT_NOFILE is $limit here")
    continue
  fi
  "$here/run.sh" --build-dir "$build" --agents "$n" --frameworks "$frameworks" --out "$out" >/dev/null ||
    notes+=("agents=$n failed")
done

echo
[ -s "$out/scale.csv" ] || die "no size ran"
python3 - "$out/scale.csv" <<'PY'
import csv, sys
print(f"{'agents':<8} {'median_ms':<10} {'worst_ms':<10} {'cpu_pct':<9} {'rss_mib':<9} {'msgs_in/s':<12} paper")
for v in csv.DictReader(open(sys.argv[1])):
    print(f"{v['agents']:<8} {v['median_ms']:<10} {v['worst_ms']:<10} {v['master_cpu_pct']:<9} "
          f"{v['master_peak_rss_mib']:<9} {v['msgs_in_per_s']:<12} < 1000 ms")
PY
for note in "${notes[@]}"; do echo "$note"; done

data="$out/scale-plot.dat"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  { print $col["agents"], $col["median_ms"], $col["worst_ms"] }' "$out/scale.csv" >"$data"
if command -v gnuplot >/dev/null && [ -s "$data" ]; then
  gnuplot <<PLOT
set terminal png size 800,500
set output "$out/scale-overhead.png"
set title "Probe overhead vs emulated agents ($frameworks frameworks)"
set xlabel "agents"; set ylabel "overhead (ms)"; set logscale y; set yrange [1:3000]
set key left top
plot "$data" using 1:2 with linespoints title "allot median", \
     "$data" using 1:3 with linespoints title "allot worst", \
     1000 with lines dashtype 2 title "paper: < 1 s"
PLOT
  echo "plot: $out/scale-overhead.png"
fi
