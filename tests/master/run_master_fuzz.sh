#!/usr/bin/env bash
# Builds the structure-aware master fuzz target with clang (libFuzzer + ASan
# + UBSan) and runs it. Usage:
#   run_master_fuzz.sh SOURCE_ROOT BUILD_ROOT OUT_DIR SECONDS [RUNS]
# SECONDS bounds the run; RUNS (optional) stops after that many executions
# (the 10^7 run in docs/benchmarks.md).
set -euo pipefail
src=$1 gen=$2 out=$3 seconds=$4 runs=${5:--1}
if ! command -v clang++ >/dev/null; then
  echo "SKIP: clang++ is not installed (needed for libFuzzer)"; exit 77
fi
mkdir -p "$out/corpus"
bin="$out/master_fuzz"
# The master's state machine without its sockets (server, HTTP, main): every
# allocator module and the master's own files.
sources=("$src/tests/master/master_fuzz.cpp" "$src"/master/allocator/*.cpp
         "$src/proto/resources.cpp" "$src/proto/validate.cpp" "$src/proto/frame.cpp"
         "$src/base/log.cpp" "$gen/proto/allot.pb.cc")
for f in "$src"/master/*.cpp; do
  case "$(basename "$f")" in main.cpp|server.cpp|http_api.cpp|state_view.cpp) ;; *) sources+=("$f") ;; esac
done
rebuild=0
[ -x "$bin" ] || rebuild=1
for s in "${sources[@]}"; do [ "$s" -nt "$bin" ] && rebuild=1; done
if [ "$rebuild" = 1 ]; then
  echo "building $bin"
  clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$src" -I"$gen" "${sources[@]}" $(pkg-config --cflags --libs protobuf prometheus-cpp-core) -o "$bin"
fi
ALLOT_LOG_LEVEL=error "$bin" -max_total_time="$seconds" -runs="$runs" -timeout=10 \
  -rss_limit_mb=4096 -max_len=262144 -print_final_stats=1 "$out/corpus"
