#!/usr/bin/env bash
# Boot the cached Debian 12 root filesystem (build-rootfs.sh) with systemd as
# PID 1 on the cloud kernel under qemu TCG, and run a payload in it
# (tests/systemd_vm/README.md).
#
#   scripts/vm/boot-systemd.sh --rootfs IMG --payload DIR [--timeout S]
#                              [--mem MiB] [--smp N] [--kernel VMLINUZ]
#
# The root image is opened with -snapshot (the cache is never written). DIR
# becomes an ext4 disk (/dev/vdb) that the image's allot-vm-payload.service
# mounts on /allot-vm before running /allot-vm/run.sh. A busybox initramfs
# loads virtio (a module in the cloud kernel), mounts /dev/vda and
# switch_roots to /sbin/init; the kernel boots with cgroup v2 unified, as
# Debian 12 does.
#
# Exit status: run.sh's exit code; 77 (meson's skip) when the VM could not
# boot (no kernel, qemu or busybox; systemd never started the payload: the
# reason on stderr); 1 when the payload did not finish within --timeout.
# Console lines go to stdout, with the boot milestones timed on stderr.
set -uo pipefail
shopt -s extglob

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
timeout=900
mem=2048
smp=2
kernel=
rootfs=
payload=

vm_prog=boot-systemd
. "$here/lib.sh"  # log, skip, fail

while [ $# -gt 0 ]; do
  case "$1" in
    --rootfs) rootfs=${2:?}; shift 2 ;;
    --payload) payload=${2:?}; shift 2 ;;
    --timeout) timeout=${2:?}; shift 2 ;;
    --mem) mem=${2:?}; shift 2 ;;
    --smp) smp=${2:?}; shift 2 ;;
    --kernel) kernel=${2:?}; shift 2 ;;
    *) sed -n '6,7p' "$0" >&2; exit 2 ;;
  esac
done
[ -r "$rootfs" ] || fail "--rootfs $rootfs: no such image"
[ -f "$payload/run.sh" ] || fail "--payload $payload has no run.sh"

vm_need_tools qemu-system-x86_64 cpio gzip mkfs.ext4 modprobe
vm_find_kernel
vm_make_work allot-sdvm

# The initramfs: busybox, virtio modules in load order, a /init that mounts
# the root disk and hands over to systemd.
ir=$work/initramfs
mkdir -p "$ir"/{bin,dev,proc,sys,newroot}
cp "$busybox" "$ir/bin/busybox"
deps=$(modprobe -d "$kdir/modules" -S "$kver" --show-depends -a virtio_pci virtio_blk) ||
  skip "cannot resolve the virtio modules in $kdir/modules"
: > "$ir/modules"
while read -r verb ko _; do
  [ "$verb" = insmod ] || continue
  cp "$ko" "$ir/$(basename "$ko")" && basename "$ko" >> "$ir/modules"
done <<< "$deps"
cat > "$ir/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r ko; do insmod "/$ko" 2>/dev/null; done < /modules
n=0; while [ ! -b /dev/vda ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n+1)); done
mount -t ext4 -o rw /dev/vda /newroot || { echo "allot-initramfs: cannot mount /dev/vda"; poweroff -f; }
echo "ALLOT-VM-ROOT-MOUNTED"
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
INIT
chmod +x "$ir/init"
(cd "$ir" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) > "$work/initrd.gz" ||
  skip "cannot build the initramfs"

payload_mb=$(( $(du -sm "$payload" | cut -f1) + 64 ))
mkfs.ext4 -q -L allot-payload -d "$payload" "$work/payload.img" "${payload_mb}M" ||
  fail "mkfs.ext4 -d $payload failed"

qemu=(qemu-system-x86_64 -accel tcg -cpu "${ALLOT_VM_CPU:-max}" -m "$mem" -smp "$smp" -nographic
      -no-reboot -net none -snapshot -kernel "$kernel" -initrd "$work/initrd.gz"
      -drive "file=$rootfs,format=raw,if=virtio" -drive "file=$work/payload.img,format=raw,if=virtio"
      -append "console=ttyS0 panic=-1 quiet cryptomgr.notests systemd.unified_cgroup_hierarchy=1 systemd.show_status=false ${ALLOT_VM_APPEND:-}")

log "booting $(basename "$kernel") with $(basename "$(dirname "$rootfs")"), timeout ${timeout}s"
vm_boot "${qemu[@]}"
mounted=0
payload_started=0
code=
on_line() {
  case "$1" in
    *ALLOT-VM-ROOT-MOUNTED*) mounted=1; log "root mounted after $(vm_elapsed)s"; return 1 ;;
    *ALLOT-VM-PAYLOAD-START*) payload_started=1; log "systemd started the payload after $(vm_elapsed)s" ;;
    *ALLOT-VM-EXIT=*) code=${1##*ALLOT-VM-EXIT=}; code=${code%%[^0-9]*}
                      log "payload exit code $code after $(vm_elapsed)s" ;;
  esac
  return 0
}
vm_console on_line
[ -n "$code" ] && exit "$code"
[ "$mounted" -eq 0 ] && skip "the guest never mounted its root (qemu status $qstatus; ALLOT_VM_APPEND=loglevel=7 shows the kernel)"
[ "$payload_started" -eq 0 ] && skip "systemd never started the payload (qemu status $qstatus; console above)"
[ "$qstatus" -eq 124 ] && fail "the payload did not finish within ${timeout}s; qemu killed"
fail "the guest stopped without an exit marker (qemu status $qstatus)"
