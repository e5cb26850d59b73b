#!/usr/bin/env bash
# A Debian 12 root filesystem with systemd for the systemd VM test
# (tests/systemd_vm/README.md), built once with debootstrap and cached.
#
#   scripts/vm/build-rootfs.sh [--cache DIR] [PACKAGE...]
#
# Builds CACHE/rootfs-<hash>/root.img: an ext4 image of `debootstrap
# --variant=minbase bookworm` with systemd as /sbin/init plus PACKAGE...
# (the .deb's dependencies, so that `dpkg -i` needs no network in the guest).
# <hash> covers this script and the package list, so a new dependency builds
# a new image; an existing complete image is reused. The image holds
# allot-vm-payload.service: at boot it mounts the guest's second disk
# (/dev/vdb, ext4) on /allot-vm and runs /allot-vm/run.sh, prints
# ALLOT-VM-EXIT=<code> on the console and powers the guest off.
# CACHE defaults to $ALLOT_VM_CACHE, else /var/cache/allot-vm. Needs root
# and the network to deb.debian.org (or $ALLOT_DEBIAN_MIRROR). Prints the
# image's path on stdout; logs on stderr.
set -euo pipefail

cache=${ALLOT_VM_CACHE:-/var/cache/allot-vm}
if [ "${1:-}" = --cache ]; then cache=${2:?}; shift 2; fi
mirror=${ALLOT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
image_mb=2048

log() { printf '[build-rootfs] %s\n' "$*" >&2; }
die() { printf '[build-rootfs] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "debootstrap needs root"
for tool in debootstrap mkfs.ext4 sha256sum flock; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/allot-dev deps installs it)"
done

packages=(systemd systemd-sysv "$@")
list=$(printf '%s\n' "${packages[@]}" | sort -u | tr '\n' ',' | sed 's/,$//')
hash=$( (cat "${BASH_SOURCE[0]}"; echo "$suite $list") | sha256sum | cut -c1-16)
dest=$cache/rootfs-$hash
if [ -f "$dest/.complete" ]; then
  printf '%s\n' "$dest/root.img"
  exit 0
fi
mkdir -p "$cache" || die "cannot create $cache"
exec 9>"$cache/.rootfs.lock"
flock 9 || die "cannot lock $cache/.rootfs.lock"
if [ -f "$dest/.complete" ]; then
  printf '%s\n' "$dest/root.img"
  exit 0
fi

work=$(mktemp -d "$cache/.rootfs.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
start=$SECONDS
log "debootstrap $suite (minbase + $list) from $mirror"
debootstrap --variant=minbase --include="$list" "$suite" "$root" "$mirror" > "$work/debootstrap.log" 2>&1 ||
  { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed (network to $mirror?)"; }
log "debootstrap took $((SECONDS - start)) s"

echo allot-vm > "$root/etc/hostname"
printf '127.0.0.1 localhost allot-vm\n::1 localhost\n' > "$root/etc/hosts"
: > "$root/etc/fstab"
# Root without password on the console, for looking around by hand.
chroot "$root" passwd -d root >/dev/null
# Nothing the test does not need at boot: no timers, no getty on the console
# the test reads.
for unit in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer \
            fstrim.timer serial-getty@ttyS0.service getty@tty1.service systemd-timesyncd.service; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

mkdir -p "$root/allot-vm"
cat > "$root/usr/local/sbin/allot-vm-payload" <<'PAYLOAD'
#!/bin/sh
# Runs the test's payload from the second disk, then powers off.
code=1
if mount -t ext4 /dev/vdb /allot-vm; then
  sh /allot-vm/run.sh > /dev/ttyS0 2>&1
  code=$?
else
  echo "allot-vm-payload: cannot mount /dev/vdb" > /dev/ttyS0
fi
sync
echo "ALLOT-VM-EXIT=$code" > /dev/ttyS0
systemctl poweroff --no-block
PAYLOAD
chmod 755 "$root/usr/local/sbin/allot-vm-payload"
cat > "$root/etc/systemd/system/allot-vm-payload.service" <<'UNIT'
[Unit]
Description=allot VM test payload (/dev/vdb:/run.sh)
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/allot-vm-payload
StandardOutput=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/allot-vm-payload.service \
  "$root/etc/systemd/system/multi-user.target.wants/allot-vm-payload.service"

log "making a ${image_mb} MiB ext4 image"
mkdir -p "$work/out"
mkfs.ext4 -q -L allot-root -d "$root" "$work/out/root.img" "${image_mb}M" >&2 || die "mkfs.ext4 -d failed"
printf '%s\n' "$list" > "$work/out/packages"
touch "$work/out/.complete"
rm -rf "$dest"
mv "$work/out" "$dest"
log "rootfs image ready in $((SECONDS - start)) s: $dest/root.img"
printf '%s\n' "$dest/root.img"
