# The harness library every shell benchmark sources (bench/README.md):
#
#   dir=$(mktemp -d ...)            # the scratch dir, removed on exit
#   . "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
#
# gives: pids+=($!) (background processes, killed on exit), on_exit CMD
# (run at exit, before the scratch dir goes), die, wait_for, median,
# emulated, registered, and `result NAME KEY=VALUE...`, the one way a
# benchmark prints its result (bench/result.py: a summary for a person; CSV
# and JSON lines in $BENCH_OUT for plots). KEEP_LOGS=1 keeps the scratch dir.
bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pids=()
exit_hooks=()
on_exit() { exit_hooks+=("$*"); }
cleanup() {
  local rc=$? p h
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  # Only these: a script's own hooks stop the processes it tracks itself.
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for h in "${exit_hooks[@]}"; do eval "$h" || true; done
  [ -n "${KEEP_LOGS:-}" ] || [ -z "${dir:-}" ] || rm -rf "$dir"
  return $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
die() { echo "$(basename "$0"): $*" >&2; tail -n 5 "${dir:-/nonexistent}"/*.log >&2 2>/dev/null || true; exit 1; }
# Waits until "$2..." (a command) succeeds, for at most $1 seconds.
wait_for() {
  local limit=$1; shift
  for _ in $(seq $((limit * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
# The median of the arguments (numbers; the lower middle of an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# The emulators' last reported COUNTER (registered, moves, handovers, ...)
# summed over their logs ($dir/emulator*.log, one per emulator process).
emulated() {
  local total=0 n f
  for f in "$dir"/emulator*.log; do
    n=$(grep -so "$1=[0-9]*" "$f" | tail -1 | cut -d= -f2)
    total=$(( total + ${n:-0} ))
  done
  echo "$total"
}
# True once the emulators report at least $agents registered agents.
registered() { [ "$(emulated registered)" -ge "$agents" ]; }
# result NAME KEY=VALUE...: print the result (and append it to $BENCH_OUT).
result() { python3 "$bench_dir/result.py" "$@"; }
