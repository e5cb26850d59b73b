#!/usr/bin/env bash
# Builds the structure-aware master fuzz target with clang (libFuzzer + ASan
# + UBSan) and runs it. Usage:
#   run_master_fuzz.sh SOURCE_ROOT BUILD_ROOT OUT_DIR SECONDS [RUNS]
# SECONDS bounds the run; RUNS (optional) stops after that many executions
# (the 10^7 run in docs/benchmarks.md). The inputs under
# tests/master/fuzz_regressions/ (findings, fixed) are run first, each on a
# fresh master; any failure there fails the run.
#
# Objects are built one per source with make -j2 and header dependencies
# (OUT_DIR/obj), so a change to one master file rebuilds one object.
set -euo pipefail
src=$(cd "$1" && pwd) gen=$(cd "$2" && pwd) out=$3 seconds=$4 runs=${5:--1}
if ! command -v clang++ >/dev/null; then
  echo "SKIP: clang++ is not installed (needed for libFuzzer)"; exit 77
fi
mkdir -p "$out/corpus" "$out/obj"
out=$(cd "$out" && pwd)
bin="$out/master_fuzz"
# The master's state machine without its sockets (server, HTTP, main): every
# allocator module and the master's own files.
sources=("$src/tests/master/master_fuzz.cpp" "$src"/master/allocator/*.cpp
         "$src/proto/resources.cpp" "$src/proto/validate.cpp" "$src/proto/frame.cpp"
         "$src/base/log.cpp" "$gen/proto/allot.pb.cc")
for f in "$src"/master/*.cpp; do
  case "$(basename "$f")" in main.cpp|server.cpp|http_api.cpp|state_view.cpp) ;; *) sources+=("$f") ;; esac
done
flags="-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
{
  echo "CXXFLAGS := $flags -I$src -I$gen $(pkg-config --cflags protobuf prometheus-cpp-core)"
  echo "LIBS := $(pkg-config --libs protobuf prometheus-cpp-core)"
  objs=()
  for s in "${sources[@]}"; do
    o="$out/obj/$(echo "${s#"$src"/}" | tr '/' '_').o"
    objs+=("$o")
    printf '%s: %s\n\tclang++ $(CXXFLAGS) -MMD -MP -c %s -o %s\n' "$o" "$s" "$s" "$o"
  done
  printf '%s: %s\n\tclang++ %s $^ $(LIBS) -o $@\n' "$bin" "${objs[*]}" "$flags"
  echo "-include $out/obj/*.d"
} > "$out/Makefile"
make -s -j2 -f "$out/Makefile" "$bin"
export ALLOT_LOG_LEVEL=error
regressions=("$src"/tests/master/fuzz_regressions/*)
if [ -e "${regressions[0]}" ]; then
  ALLOT_FUZZ_RESET_EVERY=1 "$bin" -runs=1 "${regressions[@]}"
fi
# -detect_leaks=0: the master lives on across inputs, so every input leaves
# allocations behind and libFuzzer would scan the whole heap for leaks after
# each (most of the time spent); LeakSanitizer still checks once at exit.
# -entropic=0: entropic's per-feature bookkeeping cost 2.5x the CPU per
# execution here (docs/benchmarks.md "Fuzzing").
# -reload=0: one fuzz process per corpus; rereading tens of MiB of corpus
# every few seconds found nothing new. ASan keeps 4 frames of each
# allocation's stack (default 30; the unwinding was a tenth of the time).
ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=4} \
"$bin" -max_total_time="$seconds" -runs="$runs" -timeout=10 -detect_leaks=0 -entropic=0 -reload=0 \
  -rss_limit_mb=4096 -max_len=262144 -print_final_stats=1 "$out/corpus"
