# Shared by bench/{placement,sdk,locality}/run.sh: a scratch dir, background
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
# True once the emulator's log reports at least $agents registered agents.
registered() {
  local n
  n=$(grep -o 'registered=[0-9]*' "$dir/emulator.log" | tail -1 | cut -d= -f2)
  [ "${n:-0}" -ge "$agents" ]
}
