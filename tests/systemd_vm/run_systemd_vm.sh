#!/usr/bin/env bash
# The systemd VM test (README.md here): boots Debian 12 with systemd as PID 1
# under qemu, installs DEB in it and runs guest_check.sh there.
#
#   tests/systemd_vm/run_systemd_vm.sh DEB | --build scripts/build-deb.sh BUILDDIR
#
# Exit status: guest_check.sh's (0 pass, N failed checks); 77 (skip) when
# the root filesystem cannot be built (no debootstrap, no network to the
# Debian mirror) or the VM cannot boot, with the reason on stderr.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vm=$here/../../scripts/vm
# Decided here, not when build/ was configured: a build dir set up before
# the package tools were installed still runs (or skips) this test.
for tool in dpkg-deb dpkg-shlibdeps help2man; do
  command -v "$tool" >/dev/null || { echo "[systemd_vm] SKIP: $tool missing (scripts/allot-dev deps installs it)" >&2; exit 77; }
done
if [ "${1:-}" = --build ]; then  # --build BUILD_DEB_SCRIPT BUILDDIR: package that build first
  debdir=$(mktemp -d "${TMPDIR:-/tmp}/allot-deb-out.XXXXXX") || exit 1
  trap 'rm -rf "$debdir"' EXIT
  deb=$("${2:?}" --builddir "${3:?}" "$debdir") || { echo "building the package failed" >&2; exit 1; }
  shift 3
else
  deb=${1:?usage: $0 DEB | --build BUILD_DEB_SCRIPT BUILDDIR}
fi
[ -f "$deb" ] || { echo "no package $deb" >&2; exit 1; }
skip() { printf '[systemd_vm] SKIP: %s\n' "$*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "debootstrap and qemu need root"

# The guest gets the package's dependencies from the image: dpkg -i works
# without network.
mapfile -t deps < <(dpkg-deb -f "$deb" Depends | tr ',|' '\n\n' | sed 's/(.*)//; s/ //g' | grep -v '^$')
start=$SECONDS
rootfs=$("$vm/build-rootfs.sh" "${deps[@]}") || skip "no root filesystem (build-rootfs.sh failed, see above)"
printf '[systemd_vm] root filesystem ready after %d s\n' $((SECONDS - start)) >&2

payload=$(mktemp -d "${TMPDIR:-/tmp}/allot-sdvm-payload.XXXXXX") || exit 1
trap 'rm -rf "$payload" ${debdir:+"$debdir"}' EXIT
cp "$deb" "$here/guest_check.sh" "$payload/" || exit 1
# The image runs run.sh with sh; ALLOT_VM_TASKS and ALLOT_VM_ISOLATION pass through.
{
  for v in ALLOT_VM_TASKS ALLOT_VM_ISOLATION; do
    [ -n "${!v:-}" ] && printf "export %s='%s'\n" "$v" "${!v}"
  done
  printf 'exec bash /allot-vm/guest_check.sh\n'
} > "$payload/run.sh"
"$vm/boot-systemd.sh" --rootfs "$rootfs" --payload "$payload" --timeout "${ALLOT_SYSTEMD_VM_TIMEOUT:-1200}"
code=$?
printf '[systemd_vm] done after %d s (exit %d)\n' $((SECONDS - start)) "$code" >&2
exit "$code"
