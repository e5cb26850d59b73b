# Victim latency per phase of the hog benchmark (run.sh passes datafile and
# outfile): mean, p50, p90 and p99 in ms on a log scale.
set terminal pngcairo size 1100,520 font "sans,10"
set output outfile
set title "allot hog benchmark: Apache+PHP latency beside noisy neighbours (paper 6.7)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set ylabel "latency (ms, log scale)"
set grid ytics
set xtics rotate by -30
set key outside top center horizontal
plot datafile using 3:xtic(1) title "p50", '' using 2 title "mean", '' using 4 title "p90", '' using 5 title "p99"
