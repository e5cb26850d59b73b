# What the VM scripts share (sourced by run-in-vm.sh and boot-systemd.sh):
# the host's tools, the guest kernel, and a work folder removed with the VM
# on every exit. The sourcing script sets $vm_prog (its name in messages)
# first, and keeps the pid of the qemu it starts in $qpid.

vm_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf '[%s] %s\n' "$vm_prog" "$*" >&2; }
# The VM cannot run here at all: meson reports the test as skipped.
skip() { printf '[%s] SKIP: the VM cannot boot: %s\n' "$vm_prog" "$*" >&2; exit 77; }
fail() { printf '[%s] FAIL: %s\n' "$vm_prog" "$*" >&2; exit 1; }

# vm_need_tools TOOL...: skips unless every TOOL is on PATH and busybox is
# a static binary (the guest has no libraries of its own for it); sets
# $busybox.
vm_need_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || skip "$tool not found (scripts/allot-dev deps installs it)"
  done
  busybox=$(command -v busybox) || skip "busybox not found (install busybox-static)"
  ldd "$busybox" >/dev/null 2>&1 && skip "$busybox is dynamically linked (install busybox-static)"
}

# vm_find_kernel [CACHE]: sets $kernel unless --kernel gave one (Debian's
# cloud kernel, scripts/vm/fetch-kernel.sh), $kdir (its folder, with its
# modules and config) and $kver (its release).
vm_find_kernel() {
  if [ -z "$kernel" ]; then
    kernel=$("$vm_lib_dir/fetch-kernel.sh" ${1:+"$1"}) ||
      skip "no guest kernel (scripts/vm/fetch-kernel.sh failed, see above)"
  fi
  [ -r "$kernel" ] || skip "kernel $kernel not readable"
  kdir=$(dirname "$(readlink -f "$kernel")")
  kver=$(basename "$kdir")
}

# vm_make_work PREFIX: sets $work, a new folder under $TMPDIR that is
# removed on every exit, after the VM in $qpid (if any) is stopped.
vm_make_work() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || skip "mktemp failed"
  qpid=
  trap vm_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

vm_cleanup() {
  if [ -n "$qpid" ]; then kill -TERM "$qpid" 2>/dev/null; wait "$qpid" 2>/dev/null; fi
  rm -rf "$work"
}

# vm_boot QEMU...: starts QEMU under timeout(1) (TERM after $timeout s,
# KILL 5 s later, status 124) with its console on the fifo $work/console;
# sets $qpid.
vm_boot() {
  mkfifo "$work/console" || skip "cannot make a fifo in $work"
  vm_boot_time=$EPOCHREALTIME
  timeout -k 5 "$timeout" "$@" < /dev/null > "$work/console" 2>&1 &
  qpid=$!
}

# vm_elapsed: the seconds since vm_boot, to a tenth.
vm_elapsed() {
  local us=$(( ${EPOCHREALTIME/./} - ${vm_boot_time/./} ))
  printf '%d.%d' $((us / 1000000)) $((us / 100000 % 10))
}

# vm_console ON_LINE: reads the console until qemu closes it. Each line,
# without carriage returns and the firmware's terminal resets, is passed to
# ON_LINE and printed unless ON_LINE returns non-zero. Then waits for qemu
# and sets $qstatus (124: --timeout passed).
vm_console() {
  local line
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line//$'\r'/}
    line=${line//$'\e'@(c|\[*([0-9;?])[a-zA-Z])/}
    "$1" "$line" && printf '%s\n' "$line"
  done < "$work/console"
  wait "$qpid"
  qstatus=$?
  qpid=
}
