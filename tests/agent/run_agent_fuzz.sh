#!/usr/bin/env bash
# Builds the structure-aware agent fuzz target (tests/agent/agent_fuzz.cpp)
# with clang (libFuzzer + ASan + UBSan) and runs it. Usage:
#   run_agent_fuzz.sh SOURCE_ROOT BUILD_ROOT OUT_DIR SECONDS [RUNS [SEED]]
# as tests/master/run_master_fuzz.sh. No root needed: the agent runs on the
# fake launcher and isolator, its work dir under /dev/shm.
#
# The agent's own code, the validation, framing and connection code are
# built here with libFuzzer's coverage, ASan and UBSan; the rest (base, ha,
# TLS, the launcher's process tree, the generated protobuf code) is linked
# from the meson build's static libraries (gcc, no sanitizer): a clang build
# of those as well took longer than the run on a busy 2-core machine.
set -euo pipefail
src=$(cd "$1" && pwd) gen=$(cd "$2" && pwd) out=$3 seconds=$4 runs=${5:--1} seed=${6:-0}
if ! command -v clang++ >/dev/null; then
  echo "SKIP: clang++ is not installed (needed for libFuzzer)"; exit 77
fi
mkdir -p "$out/corpus" "$out/obj"
out=$(cd "$out" && pwd)
bin="$out/agent_fuzz"
covered=("$src/tests/agent/agent_fuzz.cpp" "$src/proto/validate.cpp" "$src/proto/frame.cpp"
         "$src/proto/connection.cpp")
for f in "$src"/agent/*.cpp; do
  case "$(basename "$f")" in main.cpp|http_api.cpp|files_api.cpp) ;; *) covered+=("$f") ;; esac
done
# Objects given first define validate/frame/connection; the archives only
# supply what they leave undefined.
# (isolators: ContainerId::name, beside the isolator table.)
libs=("$gen/isolators/liballot_isolators.a" "$gen/images/liballot_images.a" "$gen/diag/liballot_diag.a" "$gen/proto/liballot_proto.a" "$gen/ha/liballot_ha.a"
      "$gen/launcher/liballot_launcher.a" "$gen/base/liballot_base.a")
for l in "${libs[@]}"; do
  [ -f "$l" ] || { echo "FAIL: $l is missing (build the project first)"; exit 1; }
done
flags="-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
pkgs="protobuf prometheus-cpp-core openssl liburing libcgroup libnl-3.0 libnl-route-3.0 libnl-nf-3.0 libnftables libseccomp libarchive"
{
  echo "CXXFLAGS := $flags -I$src -I$gen $(pkg-config --cflags $pkgs)"
  echo "LIBS := ${libs[*]} $(pkg-config --libs $pkgs) -lzookeeper_mt -lpthread"
  objs=()
  for s in "${covered[@]}"; do
    o="$out/obj/$(echo "${s#"$src"/}" | tr '/' '_').o"
    objs+=("$o")
    printf '%s: %s\n\tclang++ $(CXXFLAGS) -MMD -MP -c %s -o %s\n' "$o" "$s" "$s" "$o"
  done
  printf '%s: %s %s\n\tclang++ %s %s $(LIBS) -o $@\n' "$bin" "${objs[*]}" "${libs[*]}" "$flags" "${objs[*]}"
  echo "-include $out/obj/*.d"
} > "$out/Makefile"
make -s -j2 -f "$out/Makefile" "$bin"
export ALLOT_LOG_LEVEL=error
# Flags as the master target's (tests/master/run_master_fuzz.sh says why).
ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=0} \
"$bin" -max_total_time="$seconds" -runs="$runs" -seed="$seed" -timeout=10 -detect_leaks=0 -entropic=0 -reload=0 \
  -rss_limit_mb=4096 -max_len=262144 -print_final_stats=1 "$out/corpus"
