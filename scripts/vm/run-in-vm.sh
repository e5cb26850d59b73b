#!/usr/bin/env bash
# Run one binary inside a cgroups-v2 Linux guest under qemu (tests/vm/README.md).
#
#   scripts/vm/run-in-vm.sh [--timeout S] [--mem MiB] [--smp N] [--disk MiB]
#                           [--include PATH]... [--module NAME]... [--strip-debug]
#                           [--switch-root]
#                           [--kernel VMLINUZ] [--cache DIR] -- BINARY [ARGS...]
#
# Builds an initramfs (busybox, BINARY, its shared libraries, every --include
# PATH with its libraries; each at its host path) whose /init mounts proc,
# sysfs, devtmpfs, tmpfs /tmp and cgroup2 at /sys/fs/cgroup, enables
# +cpu +io +memory +pids +cpuset in the root's cgroup.subtree_control, runs
# BINARY ARGS in /tmp as root with output on the console and prints
# ALLOT-VM-EXIT=<code>. The kernel is Debian's cloud kernel
# (scripts/vm/fetch-kernel.sh). --disk adds a virtio-blk raw disk, /dev/vda in
# the guest. --module loads a kernel module (with its dependencies) first.
# --strip-debug copies ELF files without their debug sections (a debug
# build's binaries are hundreds of MiB each; the guest holds them in RAM).
# --switch-root moves the guest's files from the initramfs to a tmpfs and
# switches root there before anything else: pivot_root(2) refuses to move
# the initramfs, so a test whose tasks pivot into a root of their own needs
# a real mount as its root, as any installed system has.
# Environment variables named GTEST_* and ALLOT_* are passed to the guest.
#
# Exit status: the guest's exit code; 77 (meson's skip) when the VM could not
# boot at all (no kernel, no qemu, boot failure: the reason goes to stderr);
# 1 when the guest booted but BINARY crashed the guest or hung past --timeout.
set -uo pipefail
shopt -s extglob

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
timeout=300
mem=1024
smp=2
disk=
kernel=
cache=   # fetch-kernel.sh's default
includes=()
modules=()
strip_debug=0
switch_root=0

vm_prog=run-in-vm
. "$here/lib.sh"  # log, skip, fail
usage() { sed -n '4,6p' "$0" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) timeout=${2:?}; shift 2 ;;
    --mem) mem=${2:?}; shift 2 ;;
    --smp) smp=${2:?}; shift 2 ;;
    --disk) disk=${2:?}; shift 2 ;;
    --include) includes+=("${2:?}"); shift 2 ;;
    --module) modules+=("${2:?}"); shift 2 ;;
    --strip-debug) strip_debug=1; shift ;;
    --switch-root) switch_root=1; shift ;;
    --kernel) kernel=${2:?}; shift 2 ;;
    --cache) cache=${2:?}; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) log "unknown option $1"; usage ;;
  esac
done
[ $# -ge 1 ] || usage
for n in "$timeout" "$mem" "$smp" ${disk:+"$disk"}; do
  [[ "$n" =~ ^[0-9]+$ ]] || { log "not a number: $n"; usage; }
done

binary=$1; shift
[ -x "$binary" ] || fail "$binary is not an executable file"
binary=$(readlink -f "$binary")

# --- What the host needs. ----------------------------------------------------
tools=(qemu-system-x86_64 cpio gzip ldd)
[ "$strip_debug" -eq 1 ] && tools+=(objcopy)
vm_need_tools "${tools[@]}"
vm_find_kernel "$cache"

# --- Temporary files, removed on every exit. ----------------------------------
vm_make_work allot-vm
root=$work/root
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,etc,root,allot-vm} || skip "cannot write $work"

# Copy a host file to the same path in the guest (following symlinks).
put() {
  local src=$1 dst=$root$1
  mkdir -p "$(dirname "$dst")" && rm -f "$dst" || return 1
  if [ "$strip_debug" -eq 1 ] && [ "$(head -c 4 "$src" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; then
    objcopy --strip-debug "$src" "$dst" && return 0
  fi
  cp -L "$src" "$dst"
}
# Copy a file and, for a dynamic ELF, every library ldd lists plus the loader.
put_with_libs() {
  local f=$1 lib
  put "$f" || return 1
  if ldd "$f" >/dev/null 2>&1; then
    if ldd "$f" | grep 'not found' > /dev/null; then
      log "$f: $(ldd "$f" | grep 'not found' | tr -s ' \t\n' ' ')"
      return 1
    fi
    while read -r lib; do
      [ -e "$root$lib" ] || put "$lib" || return 1
    done < <(ldd "$f" | grep -o '/[^ ]*' | sort -u)
  fi
}

cp "$busybox" "$root/bin/busybox" || skip "cannot copy busybox"
put_with_libs "$binary" || fail "cannot copy $binary or its libraries"
for inc in "${includes[@]}"; do
  [[ "$inc" == /* ]] || inc=$(command -v "$inc" || readlink -f "$inc")
  if [ -d "$inc" ]; then
    mkdir -p "$root$(dirname "$inc")" && cp -a "$inc" "$root$(dirname "$inc")/" || fail "cannot copy $inc"
  elif [ -e "$inc" ]; then
    put_with_libs "$inc" || fail "cannot copy $inc or its libraries"
  else
    fail "--include $inc: no such file"
  fi
done

# Kernel modules: virtio for --disk, plus --module; in dependency order.
[ -n "$disk" ] && modules=(virtio_pci virtio_blk "${modules[@]}")
: > "$root/allot-vm/modules"
if [ ${#modules[@]} -gt 0 ]; then
  config=$kdir/config
  wanted=()
  for m in "${modules[@]}"; do
    opt=
    case "$m" in virtio_pci) opt=CONFIG_VIRTIO_PCI ;; virtio_blk) opt=CONFIG_VIRTIO_BLK ;; esac
    if [ -n "$opt" ] && [ -r "$config" ] && grep -q "^$opt=y" "$config"; then
      continue  # built in
    fi
    wanted+=("$m")
  done
  if [ ${#wanted[@]} -gt 0 ]; then
    [ -d "$kdir/modules/lib/modules/$kver" ] || skip "modules ${wanted[*]} needed but $kdir/modules is missing"
    deps=$(modprobe -d "$kdir/modules" -S "$kver" --show-depends -a "${wanted[@]}") ||
      skip "cannot resolve kernel modules ${wanted[*]}"
    while read -r verb ko _; do
      [ "$verb" = insmod ] || continue
      rel=${ko#"$kdir/modules"}
      mkdir -p "$root$(dirname "$rel")" && cp "$ko" "$root$rel" || skip "cannot copy $ko"
      grep -qxF "$rel" "$root/allot-vm/modules" || printf '%s\n' "$rel" >> "$root/allot-vm/modules"
    done <<< "$deps"
  fi
fi

# The command, single-quoted for the guest's shell, and the environment.
q() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }
{
  printf 'export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp\n'
  printf 'export GTEST_COLOR=no ALLOT_VM=1\n'
  [ -n "$disk" ] && printf 'export ALLOT_VM_DISK=/dev/vda\n'
  while IFS= read -r name; do
    printf 'export %s=%s\n' "$name" "$(q "${!name}")"
  done < <(compgen -e | grep -E '^(GTEST|ALLOT)_' || true)
  printf 'exec'
  for a in "$binary" "$@"; do printf ' %s' "$(q "$a")"; done
  printf '\n'
} > "$root/allot-vm/run"

printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' > "$root/etc/hosts"

[ "$switch_root" -eq 1 ] && : > "$root/allot-vm/switch-root"

cat > "$root/init" <<'EOF'
#!/bin/busybox sh
# --switch-root: the same files on a tmpfs, then this script again from there.
if [ -e /allot-vm/switch-root ] && [ ! -e /allot-vm/switched ]; then
  /bin/busybox mkdir -p /.root && /bin/busybox mount -t tmpfs -o size=90% tmpfs /.root || echo "ALLOT-VM: no tmpfs root"
  for f in /*; do [ "$f" = /.root ] || /bin/busybox cp -a "$f" /.root/; done
  : > /.root/allot-vm/switched
  exec /bin/busybox switch_root /.root /init
fi
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# A fresh tmpfs on /tmp, keeping what the initramfs put there (a build
# directory under /tmp holds the binary itself).
mkdir -p /.tmp && mount -t tmpfs tmpfs /.tmp && cp -a /tmp/. /.tmp/ && mount --move /.tmp /tmp
rmdir /.tmp 2>/dev/null
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup || echo "ALLOT-VM: cannot mount cgroup2"
for c in cpu io memory pids cpuset; do
  echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control || echo "ALLOT-VM: cannot enable $c"
done
ip link set lo up 2>/dev/null
while read -r ko; do
  insmod "$ko" || echo "ALLOT-VM: insmod $ko failed"
done < /allot-vm/modules
if [ -s /allot-vm/modules ] && grep -q virtio_blk /allot-vm/modules; then
  n=0; while [ ! -b /dev/vda ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n+1)); done
  [ -b /dev/vda ] || echo "ALLOT-VM: /dev/vda did not appear"
fi
echo "ALLOT-VM-START"
cd /tmp
sh /allot-vm/run < /dev/null
echo "ALLOT-VM-EXIT=$?"
sync
poweroff -f
EOF
chmod +x "$root/init"

initrd=$work/initrd.gz
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) > "$initrd" ||
  skip "cannot build the initramfs"

# ALLOT_VM_CPU, ALLOT_VM_QEMU_ARGS (word-split) and ALLOT_VM_APPEND are for
# experiments with the emulated machine and the kernel command line.
qemu=(qemu-system-x86_64 -accel tcg -cpu "${ALLOT_VM_CPU:-max}" -m "$mem" -smp "$smp" -nographic -no-reboot
      -net none ${ALLOT_VM_QEMU_ARGS:-} -kernel "$kernel" -initrd "$initrd"
      -append "console=ttyS0 panic=-1 quiet cryptomgr.notests ${ALLOT_VM_APPEND:-}")
if [ -n "$disk" ]; then
  truncate -s "${disk}M" "$work/disk.img" || skip "cannot create a ${disk} MiB disk image"
  qemu+=(-drive "file=$work/disk.img,format=raw,if=virtio")
fi

log "booting $(basename "$kernel") ($(du -h "$initrd" | cut -f1) initramfs) for $(basename "$binary"), timeout ${timeout}s"
vm_boot "${qemu[@]}"
booted=0
code=
on_line() {
  case "$1" in
    *ALLOT-VM-START*) booted=1; log "guest up after $(vm_elapsed)s"; return 1 ;;
    *ALLOT-VM-EXIT=*) code=${1##*ALLOT-VM-EXIT=}; code=${code%%[^0-9]*} ;;
  esac
  return 0
}
vm_console on_line
timed_out=0
[ "$qstatus" -eq 124 ] && timed_out=1

if [ -n "$code" ]; then
  log "guest exit code $code after $(vm_elapsed)s"
  exit "$code"
fi
if [ "$booted" -eq 0 ]; then
  [ "$timed_out" -eq 1 ] && skip "no guest userspace within ${timeout}s (kernel hang? ALLOT_VM_APPEND=loglevel=7 shows the kernel's messages)"
  skip "qemu exited with status $qstatus before the guest's /init ran (console above; ALLOT_VM_APPEND=loglevel=7 shows the kernel's messages)"
fi
[ "$timed_out" -eq 1 ] && fail "$(basename "$binary") did not finish within ${timeout}s; qemu killed"
fail "the guest stopped without an exit marker (qemu status $qstatus): $(basename "$binary") crashed the guest"
