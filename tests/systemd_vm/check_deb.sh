#!/usr/bin/env bash
# package_deb (integration): the Debian package built by scripts/build-deb.sh
# holds what a node needs, declares its dependencies, and goes through a real
# dpkg install, configure and purge (maintainer scripts included) into a
# scratch root with busybox as its /bin/sh. The install on a booted Debian
# with systemd is the systemd_vm test.
#
#   tests/systemd_vm/check_deb.sh DEB | --build scripts/build-deb.sh BUILDDIR
set -uo pipefail
# Decided here, not when build/ was configured: a build dir set up before
# the package tools were installed still runs (or skips) this test.
for tool in dpkg-deb dpkg-shlibdeps help2man; do
  command -v "$tool" >/dev/null || { echo "[package_deb] SKIP: $tool missing (scripts/allot-dev deps installs it)" >&2; exit 77; }
done
if [ "${1:-}" = --build ]; then  # --build BUILD_DEB_SCRIPT BUILDDIR: package that build first
  debdir=$(mktemp -d "${TMPDIR:-/tmp}/allot-deb-out.XXXXXX") || exit 1
  trap 'rm -rf "$debdir"' EXIT
  deb=$("${2:?}" --builddir "${3:?}" "$debdir") || { echo "building the package failed" >&2; exit 1; }
  shift 3
else
  deb=${1:?usage: $0 DEB | --build BUILD_DEB_SCRIPT BUILDDIR}
fi
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAILED: $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@" >/dev/null 2>&1; then ok "$what"; else bad "$what"; fi; }

field() { dpkg-deb -f "$deb" "$1"; }
check "Package: allot" test "$(field Package)" = allot
check "Version: $(field Version)" test -n "$(field Version)"
check "Architecture: $(dpkg-architecture -qDEB_HOST_ARCH)" test "$(field Architecture)" = "$(dpkg-architecture -qDEB_HOST_ARCH)"
depends=$(field Depends)
echo "Depends: $depends"
for lib in libc6 libstdc++6 libssl3 libprotobuf libsystemd0 liburing2 libseccomp2 libzookeeper-mt2 init-system-helpers; do
  check "depends on $lib" grep -q "$lib" <<< "$depends"
done

contents=$(dpkg-deb --contents "$deb" | awk '{print $NF}')
for path in ./usr/bin/allot-master ./usr/bin/allot-agent ./usr/bin/allot-execute ./usr/bin/allot-executor \
            ./usr/bin/allotctl ./usr/bin/allot-certs \
            ./usr/lib/systemd/system/allot-master.service ./usr/lib/systemd/system/allot-agent.service \
            ./usr/lib/systemd/system/allot-executors.service ./usr/lib/systemd/system/allot.slice \
            ./etc/default/allot-master ./etc/default/allot-agent \
            ./usr/share/man/man8/allot-master.8.gz ./usr/share/man/man8/allot-agent.8.gz \
            ./usr/share/man/man1/allot-execute.1.gz ./usr/share/man/man1/allotctl.1.gz \
            ./usr/share/doc/allot/copyright ./usr/share/doc/allot/README.md; do
  check "contains $path" grep -qxF "$path" <<< "$contents"
done

scratch=$(mktemp -d "${TMPDIR:-/tmp}/allot-deb-root.XXXXXX") || exit 1
trap 'rm -rf "$scratch" ${debdir:+"$debdir"}' EXIT
dpkg-deb --ctrl-tarfile "$deb" | tar -x -C "$scratch" ./conffiles 2>/dev/null
check "conffiles: the /etc/default files" test "$(cat "$scratch/conffiles" 2>/dev/null)" = \
  "$(printf '/etc/default/allot-master\n/etc/default/allot-agent')"
dpkg-deb -x "$deb" "$scratch/x"
check "allot-agent.service starts /usr/bin/allot-agent" \
  grep -q '^ExecStart=/usr/bin/allot-agent ' "$scratch/x/usr/lib/systemd/system/allot-agent.service"
check "allot-agent.service puts executors in allot-executors.service" \
  grep -q -- '--cgroups-root=allot.slice/allot-executors.service ' "$scratch/x/usr/lib/systemd/system/allot-agent.service"
check "allot-executors.service is a delegated cgroup" \
  grep -qx 'Delegate=yes' "$scratch/x/usr/lib/systemd/system/allot-executors.service"
check "allot-master.service starts /usr/bin/allot-master" \
  grep -q '^ExecStart=/usr/bin/allot-master ' "$scratch/x/usr/lib/systemd/system/allot-master.service"
check "the packaged allot-agent runs (--help)" "$scratch/x/usr/bin/allot-agent" --help
check "man allot-agent documents --master" eval "zcat '$scratch/x/usr/share/man/man8/allot-agent.8.gz' | grep 'master' > /dev/null"

# A real dpkg transaction into a scratch root (--force-depends: the root has
# no libraries; the maintainer scripts run chrooted under busybox sh).
busybox=$(command -v busybox)
if [ -n "$busybox" ] && ! ldd "$busybox" >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  r=$scratch/root
  mkdir -p "$r"/{bin,usr/sbin,sbin,var/lib/dpkg/{info,updates,triggers}} && : > "$r/var/lib/dpkg/status"
  cp "$busybox" "$r/bin/busybox" && chroot "$r" /bin/busybox --install -s /bin
  for tool in ldconfig start-stop-daemon; do ln -s /bin/true "$r/sbin/$tool"; done
  check "dpkg --install into a scratch root" dpkg --root="$r" --force-depends -i "$deb"
  check "dpkg status: install ok installed" test "$(dpkg-query --root="$r" -W -f='${Status}' allot)" = "install ok installed"
  check "installed /usr/bin/allot-agent" test -x "$r/usr/bin/allot-agent"
  check "no unit enabled by postinst" test ! -e "$r/etc/systemd/system/multi-user.target.wants/allot-agent.service"
  echo '# edited by the operator' >> "$r/etc/default/allot-agent"
  check "dpkg --remove keeps the edited conffile" dpkg --root="$r" --force-depends -r allot
  check "conffile kept after remove" grep -q 'edited by the operator' "$r/etc/default/allot-agent"
  check "dpkg --purge" dpkg --root="$r" --force-depends -P allot
  check "purge removed the conffiles" test ! -e "$r/etc/default/allot-agent"
  check "purge removed the binaries" test ! -e "$r/usr/bin/allot-agent"
else
  echo "SKIP: the dpkg transaction needs root and a static busybox (busybox-static)"
fi
echo "checks failed: $fails"
[ "$fails" -eq 0 ]
