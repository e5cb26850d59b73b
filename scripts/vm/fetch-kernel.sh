#!/usr/bin/env bash
# Fetch Debian's cloud kernel for the `vm` test suite (tests/vm/README.md).
#
#   scripts/vm/fetch-kernel.sh [CACHE_DIR]   (default $ALLOT_VM_CACHE, else
#                                            /var/cache/allot-vm as root,
#                                            ~/.cache/allot-vm otherwise)
#
# Idempotent: downloads linux-image-cloud-amd64's versioned kernel package
# with `apt-get download` (running `apt-get update` only when apt does not know
# the package), extracts /boot/vmlinuz-* and /boot/config-* and, when a driver
# the guest needs is a module, /lib/modules/<version>, into CACHE_DIR/<version>.
# Prints the vmlinuz path on stdout; everything else goes to stderr. Exits
# non-zero with the reason when anything is missing.
set -euo pipefail

default_cache=/var/cache/allot-vm
[ "$(id -u)" -eq 0 ] || default_cache=${XDG_CACHE_HOME:-$HOME/.cache}/allot-vm
cache=${1:-${ALLOT_VM_CACHE:-$default_cache}}
meta=linux-image-cloud-amd64

log() { printf '[fetch-kernel] %s\n' "$*" >&2; }
die() { printf '[fetch-kernel] error: %s\n' "$*" >&2; exit 1; }

for tool in apt-get apt-cache dpkg-deb; do
  command -v "$tool" >/dev/null || die "$tool not found (this script needs Debian's apt tooling)"
done

# A previous run leaves CACHE_DIR/current pointing at the extracted kernel.
if [ -L "$cache/current" ] && [ -f "$cache/current/vmlinuz" ] && [ -f "$cache/current/.complete" ]; then
  readlink -f "$cache/current/vmlinuz"
  exit 0
fi

# The versioned package the metapackage depends on, e.g.
# linux-image-6.1.0-56-cloud-amd64.
versioned_package() {
  apt-cache depends "$meta" 2>/dev/null |
    sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-cloud-amd64\)$/\1/p' | head -n1
}
mkdir -p "$cache" || die "cannot create $cache"
# Concurrent test runs: one fetches, the others wait and reuse it.
exec 9>"$cache/.lock"
flock 9 || die "cannot lock $cache/.lock"
if [ -L "$cache/current" ] && [ -f "$cache/current/.complete" ]; then
  readlink -f "$cache/current/vmlinuz"
  exit 0
fi

pkg=$(versioned_package || true)
if [ -z "$pkg" ]; then
  log "apt does not know $meta; running apt-get update"
  apt-get update -qq >&2 || die "apt-get update failed (network to Debian's mirrors? root?)"
  pkg=$(versioned_package || true)
  [ -n "$pkg" ] || die "apt-cache cannot resolve $meta to a versioned linux-image package"
fi
kver=${pkg#linux-image-}

dest="$cache/$kver"
if [ ! -f "$dest/.complete" ]; then
  work=$(mktemp -d "$cache/.fetch.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  chmod 755 "$work"   # apt-get download drops privileges to _apt
  log "downloading $pkg"
  (cd "$work" && apt-get download "$pkg" >&2) ||
    die "apt-get download $pkg failed (network to Debian's mirrors?)"
  deb=$(ls "$work"/*.deb 2>/dev/null | head -n1)
  [ -n "$deb" ] || die "apt-get download left no .deb in $work"
  log "extracting $(basename "$deb")"
  dpkg-deb -x "$deb" "$work/root" || die "dpkg-deb -x $deb failed"

  vmlinuz=$(ls "$work"/root/boot/vmlinuz-* 2>/dev/null | head -n1)
  config=$(ls "$work"/root/boot/config-* 2>/dev/null | head -n1)
  [ -n "$vmlinuz" ] || die "$pkg holds no /boot/vmlinuz-*"
  [ -n "$config" ] || die "$pkg holds no /boot/config-*"

  rm -rf "$work/out"
  mkdir -p "$work/out"
  cp "$vmlinuz" "$work/out/vmlinuz"
  cp "$config" "$work/out/config"

  # What the guest needs, and whether each is built in (=y) or a module (=m).
  need_module=0
  for opt in CONFIG_CGROUPS CONFIG_MEMCG CONFIG_BLK_CGROUP CONFIG_CGROUP_PIDS CONFIG_CGROUP_SCHED \
             CONFIG_CPUSETS CONFIG_BLK_DEV_THROTTLING CONFIG_DEVTMPFS CONFIG_BLK_DEV_INITRD \
             CONFIG_RD_GZIP CONFIG_SERIAL_8250_CONSOLE CONFIG_VIRTIO_PCI CONFIG_VIRTIO_BLK; do
    val=$(sed -n "s/^$opt=\(.*\)$/\1/p" "$config")
    case "$val" in
      y) ;;
      m) log "$opt is a module"; need_module=1 ;;
      *) case "$opt" in
           CONFIG_VIRTIO_PCI|CONFIG_VIRTIO_BLK|CONFIG_BLK_DEV_THROTTLING)
             log "warning: $opt is not set; --disk and io throttling will not work" ;;
           *) die "$pkg lacks $opt (needed by the vm suite)" ;;
         esac ;;
    esac
  done
  if [ "$need_module" -eq 1 ]; then
    moddir=$(ls -d "$work"/root/lib/modules/* 2>/dev/null | head -n1)
    [ -n "$moddir" ] || die "a needed driver is a module but $pkg holds no /lib/modules"
    # Laid out as a root (modules/lib/modules/<version>) so that
    # `modprobe -d modules -S <version> --show-depends -a` resolves load order.
    command -v depmod >/dev/null || die "depmod not found (install kmod)"
    mkdir -p "$work/out/modules/lib/modules"
    cp -a "$moddir" "$work/out/modules/lib/modules/"
    depmod -b "$work/out/modules" "$(basename "$moddir")" || die "depmod failed on $moddir"
  fi
  grep -E '^CONFIG_(MEMCG|BLK_CGROUP|CGROUP_PIDS|CGROUP_SCHED|CPUSETS|BLK_DEV_THROTTLING|VIRTIO_PCI|VIRTIO_BLK)=' \
    "$config" | tr '\n' ' ' | sed 's/^/[fetch-kernel] /;s/$/\n/' >&2
  printf '%s\n' "$pkg" > "$work/out/package"
  touch "$work/out/.complete"
  rm -rf "$dest"
  mv "$work/out" "$dest"
fi

ln -sfn "$kver" "$cache/current"
printf '%s\n' "$dest/vmlinuz"
