#!/usr/bin/env bash
# Builds the frame-decoder fuzz target with clang (libFuzzer + ASan + UBSan)
# and runs it for a bounded time. Usage:
#   run_fuzz.sh SOURCE_ROOT GENERATED_PB_DIR OUT_DIR SECONDS [RUNS]
# RUNS (optional) stops after that many executions (the 10^7 run in
# docs/benchmarks.md). Inputs go up to 1 MiB; the decoder runs with the real
# 16 MiB frame limit, so announced lengths up to and past it are exercised.
set -euo pipefail
src=$1 gen=$2 out=$3 seconds=$4 runs=${5:--1}
if ! command -v clang++ >/dev/null; then
  echo "SKIP: clang++ is not installed (needed for libFuzzer)"; exit 77
fi
mkdir -p "$out/corpus"
bin="$out/frame_fuzz"
sources=("$src/tests/proto/frame_fuzz.cpp" "$src/proto/frame.cpp" "$src/proto/resources.cpp"
         "$src/base/log.cpp" "$gen/proto/allot.pb.cc")
rebuild=0
[ -x "$bin" ] || rebuild=1
for s in "${sources[@]}"; do [ "$s" -nt "$bin" ] && rebuild=1; done
if [ "$rebuild" = 1 ]; then
  echo "building $bin"
  clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$src" -I"$gen" "${sources[@]}" $(pkg-config --cflags --libs protobuf) -o "$bin"
fi
# Seed with one valid frame per message kind the decoder most often sees.
printf '\x00\x00\x00\x02\x52\x00' > "$out/corpus/seed-heartbeat"
"$bin" -max_total_time="$seconds" -runs="$runs" -timeout=5 -rss_limit_mb=2048 -max_len=1048576 \
  -print_final_stats=1 "$out/corpus"
