# Shared by bench/{placement,sdk,locality,scale}/run.sh and bench/scale/state_probe.sh: a scratch dir, background
# processes ended on exit, and small waits. Source it after setting $dir.
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP_LOGS:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT INT TERM
die() { echo "run.sh: $*" >&2; tail -n 5 "$dir"/*.log >&2 || true; exit 1; }
# Waits until "$2..." (a command) succeeds, for at most $1 seconds.
wait_for() {
  local limit=$1; shift
  for _ in $(seq $((limit * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
# True once the emulators' logs ($dir/emulator*.log, one per emulator
# process) report at least $agents registered agents between them.
registered() {
  local total=0 n f
  for f in "$dir"/emulator*.log; do
    n=$(grep -so 'registered=[0-9]*' "$f" | tail -1 | cut -d= -f2)
    total=$(( total + ${n:-0} ))
  done
  [ "$total" -ge "$agents" ]
}
