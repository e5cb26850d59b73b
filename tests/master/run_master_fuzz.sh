#!/usr/bin/env bash
# Builds the structure-aware master fuzz target with clang (libFuzzer + ASan
# + UBSan) and runs it. Usage:
#   run_master_fuzz.sh SOURCE_ROOT BUILD_ROOT OUT_DIR SECONDS [RUNS [SEED]]
# SECONDS bounds the run; RUNS (optional) stops after that many executions
# (the 10^7 run in docs/benchmarks.md: two processes, OUT_DIRs and SEEDs
# apart, 5*10^6 each); SEED (optional) is libFuzzer's -seed. The inputs under
# tests/master/fuzz_regressions/ (findings, fixed) are run first, each on a
# fresh master; any failure there fails the run.
#
# Objects are built one per source with make -j2 and header dependencies
# (OUT_DIR/obj), so a change to one master file rebuilds one object.
set -euo pipefail
src=$(cd "$1" && pwd) gen=$(cd "$2" && pwd) out=$3 seconds=$4 runs=${5:--1} seed=${6:-0}
if ! command -v clang++ >/dev/null; then
  echo "SKIP: clang++ is not installed (needed for libFuzzer)"; exit 77
fi
mkdir -p "$out/corpus" "$out/obj"
out=$(cd "$out" && pwd)
bin="$out/master_fuzz"
# The master's state machine without its sockets (server, HTTP, main),
# without the role settings' stores and keeper (files, ZooKeeper, the loop),
# the shard links' hub and the in-process link shard (agent_shard.cpp); the
# identity store's file form is in (libcrypto): every allocator module, the
# loop's diagnostics (the metrics export them) and the master's own files.
sources=("$src"/master/allocator/*.cpp "$src"/diag/*.cpp
         "$src/proto/resources.cpp" "$src/proto/validate.cpp" "$src/proto/frame.cpp"
         "$src/base/log.cpp" "$src/base/encoding.cpp" "$src/base/secrets.cpp" "$src/base/files.cpp" "$gen/proto/allot.pb.cc")
for f in "$src"/master/*.cpp; do
  case "$(basename "$f")" in main.cpp|server.cpp|shard_hub.cpp|agent_shard.cpp|http_api.cpp|state_items.cpp|state_view.cpp|state_view_cache.cpp|role_settings.cpp|role_store.cpp|role_store_zk.cpp|identity_store_zk.cpp) ;; *) sources+=("$f") ;; esac
done
# The harness last: the linker keeps the first copy of an inline function
# it meets, and the master's objects hold the instrumented ones.
sources+=("$src/tests/master/master_fuzz.cpp")
flags="-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
# The generated protobuf code and the harness (master_fuzz.cpp: script
# parsing, placeholder substitution, the mutator) are built with ASan +
# UBSan but without libFuzzer's coverage: their loops gave a new "feature"
# for every repeated-field count bucket (a corpus of big inputs that found
# nothing in the master) and their counters and comparison callbacks were a
# large part of the CPU (docs/benchmarks.md "Fuzzing"). Coverage is the
# master's, its allocator's and the validation's.
nocov="-std=c++20 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined"
{
  echo "CXXFLAGS := $flags -I$src -I$gen $(pkg-config --cflags protobuf prometheus-cpp-core)"
  echo "NOCOVFLAGS := $nocov -I$src -I$gen $(pkg-config --cflags protobuf prometheus-cpp-core)"
  echo "LIBS := $(pkg-config --libs protobuf prometheus-cpp-core libcrypto)"
  objs=()
  for s in "${sources[@]}"; do
    o="$out/obj/$(echo "${s#"$src"/}" | tr '/' '_').o" f='$(CXXFLAGS)'
    case "$s" in *.pb.cc|*/master_fuzz.cpp) o="${o%.o}.nocov.o" f='$(NOCOVFLAGS)' ;; esac
    objs+=("$o")
    printf '%s: %s\n\tclang++ %s -MMD -MP -c %s -o %s\n' "$o" "$s" "$f" "$s" "$o"
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
# every few seconds found nothing new. ASan records no allocation stacks
# (malloc_context_size=0; the unwinding and the stack depot were a tenth of
# the time): detection is unchanged, and a finding is re-run with
# ASAN_OPTIONS= (30 frames) to see where the memory came from.
ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=0} \
"$bin" -max_total_time="$seconds" -runs="$runs" -seed="$seed" -timeout=10 -detect_leaks=0 -entropic=0 -reload=0 \
  -rss_limit_mb=4096 -max_len=262144 -print_final_stats=1 "$out/corpus"
