#!/bin/bash
# Sweeps run.sh over cluster sizes and prints the table beside the paper's
# figure (section 6.5: extra delay under 1 s at every size up to 50,000
# agents), then plots overhead versus agents to scale-overhead.png.
#
#   bench/scale/sweep.sh build "1000 5000 10000 20000 50000" [out-dir]
#
# A size whose master would need more sockets than RLIMIT_NOFILE allows is
# reported as blocked (with the limit), never silently dropped.
set -euo pipefail
build=${1:-build}
sizes=${2:-"1000 5000 10000 20000 50000"}
out=${3:-$build/bench-results}
frameworks=${FRAMEWORKS:-200}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
results="$out/scale-results.txt"
: >"$results"

ulimit -Hn 262144 2>/dev/null || true
limit=$(ulimit -Hn)
for n in $sizes; do
  if [ $(( n + frameworks + 64 )) -gt "$limit" ]; then
    echo "agents=$n blocked: the master needs $((n + frameworks)) sockets but RLIMIT_NOFILE is $limit here" | tee -a "$results"
    continue
  fi
  "$here/run.sh" --build-dir "$build" --agents "$n" --frameworks "$frameworks" --out "$results" |
    grep RESULT || echo "agents=$n failed" | tee -a "$results"
done

echo
printf '%-8s %-10s %-10s %-9s %-9s %-12s %s\n' agents median_ms worst_ms cpu_pct rss_mib msgs_in/s "paper"
awk '
  /blocked/ { split($1, a, "="); printf "%-8s blocked (%s)\n", a[2], substr($0, index($0, ":") + 2); next }
  {
    for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    printf "%-8s %-10s %-10s %-9s %-9s %-12s %s\n", v["agents"], v["median_ms"], v["worst_ms"],
      v["master_cpu_pct"], v["master_peak_rss_mib"], v["msgs_in_per_s"], "< 1000 ms"
  }' "$results"

data="$out/scale-plot.dat"
awk '!/blocked|failed/ {
  for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
  print v["agents"], v["median_ms"], v["worst_ms"] }' "$results" >"$data"
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
