#!/usr/bin/env bash
# Build allot's Debian package (scripts/allot-dev deb; README.md "Install
# from the Debian package").
#
#   scripts/build-deb.sh [--builddir DIR] [OUTDIR]   (defaults: ./build, ./dist)
#
# Packages the binaries of an existing, built meson build directory (the
# binaries do not depend on the prefix): `meson install --destdir --strip`
# into a staging root, relocated from the build's prefix to /usr; the units
# generated from systemd/*.service.in for /usr; what meson does not install
# (/etc/default files, allot-certs, man pages generated from each binary's
# --help by help2man, the README and copyright); the shared library
# dependencies computed by dpkg-shlibdeps. Writes
# OUTDIR/allot_<version>_<arch>.deb with dpkg-deb (owner root:root) and
# prints its path on stdout; everything else goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
builddir=$here/build
if [ "${1:-}" = --builddir ]; then builddir=$(realpath -m "${2:?}"); shift 2; fi
out=$(realpath -m "${1:-$here/dist}")
pkgdir=$here/packaging/deb

log() { printf '[build-deb] %s\n' "$*" >&2; }
die() { printf '[build-deb] error: %s\n' "$*" >&2; exit 1; }

for tool in meson dpkg-deb dpkg-shlibdeps dpkg-architecture help2man gzip python3; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/allot-dev deps installs it)"
done
[ -f "$builddir/build.ninja" ] || die "$builddir is not a meson build directory (scripts/allot-dev build)"
[ -x "$builddir/agent/allot-agent" ] || die "$builddir has no allot-agent: build it first (ninja -C $builddir)"

version=$(meson introspect --projectinfo "$builddir" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])') || die "no project version"
prefix=$(meson introspect --buildoptions "$builddir" |
  python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))') ||
  die "no prefix in $builddir"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
work=$(mktemp -d "${TMPDIR:-/tmp}/allot-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/allot_${version}_$arch
log "installing into $stage"
DESTDIR= meson install -C "$builddir" --destdir "$stage" --strip --no-rebuild --quiet >&2 ||
  die "meson install failed"
[ -d "$stage$prefix/bin" ] || die "meson installed nothing into $prefix/bin"
if [ "$prefix" != /usr ]; then
  mkdir -p "$stage/usr/bin"
  mv "$stage$prefix"/bin/* "$stage/usr/bin/"
  rm -rf "${stage:?}$prefix"
  rmdir -p --ignore-fail-on-non-empty "$(dirname "$stage$prefix")" 2>/dev/null || true
fi
# The units as systemd/meson.build configures them, for /usr.
units=$stage/usr/lib/systemd/system
mkdir -p "$units"
for unit in allot-master.service allot-agent.service allot-executors.service allot.slice; do
  sed -e 's|@BINDIR@|/usr/bin|g' -e 's|@DOCDIR@|/usr/share/doc/allot|g' \
    "$here/systemd/$unit.in" > "$units/$unit"
  chmod 644 "$units/$unit"
done
unexpected=$(cd "$stage" && find . -type f ! -path './usr/bin/*' ! -path './usr/lib/systemd/system/*')
[ -z "$unexpected" ] || die "meson installed files this script does not package: $unexpected"

install -D -m 644 "$pkgdir/allot-master.default" "$stage/etc/default/allot-master"
install -D -m 644 "$pkgdir/allot-agent.default" "$stage/etc/default/allot-agent"
install -D -m 755 "$here/scripts/allot-certs" "$stage/usr/bin/allot-certs"
doc=$stage/usr/share/doc/allot
install -D -m 644 "$here/README.md" "$doc/README.md"
install -D -m 644 "$pkgdir/copyright" "$doc/copyright"
printf 'allot (%s) unstable; urgency=medium\n\n  * Built from %s.\n\n -- allot developers <allot@localhost>  %s\n' \
  "$version" "$(git -C "$here" describe --always --dirty 2>/dev/null || echo 'a source tree')" \
  "$(date -R -d "@${SOURCE_DATE_EPOCH:-$(git -C "$here" log -1 --format=%ct 2>/dev/null || date +%s)}")" |
  gzip -9n > "$doc/changelog.gz"

# Man pages: section 8 for the daemons, 1 for the tools.
man_page() {
  local bin=$1 section=$2 what=$3
  mkdir -p "$stage/usr/share/man/man$section"
  help2man --no-info --no-discard-stderr --section="$section" --version-string="$version" \
    --name="$what" --source="allot $version" "$stage/usr/bin/$bin" |
    gzip -9n > "$stage/usr/share/man/man$section/$bin.$section.gz" || die "help2man $bin failed"
}
man_page allot-master 8 "allot master: resource offers under Dominant Resource Fairness"
man_page allot-agent 8 "allot agent: runs and isolates the frameworks' executors on a node"
man_page allot-execute 1 "run a command on an allot cluster and wait for it"
man_page allot-executor 1 "allot's built-in command executor (started by allot-agent)"
man_page allotctl 1 "inspect and operate an allot cluster over the master's HTTP endpoints"
man_page allot-certs 1 "a small certificate authority for allot's mutual TLS"

# Shared library dependencies, as dh_shlibdeps would compute them.
mkdir -p "$work/src/debian"
: > "$work/src/debian/control"
depends=$(cd "$work/src" && dpkg-shlibdeps -O -e"$stage"/usr/bin/allot-master \
  -e"$stage"/usr/bin/allot-agent -e"$stage"/usr/bin/allot-execute \
  -e"$stage"/usr/bin/allot-executor -e"$stage"/usr/bin/allotctl 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p') || die "dpkg-shlibdeps failed"
[ -n "$depends" ] || die "dpkg-shlibdeps found no dependencies"

mkdir -p "$stage/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@DEPENDS@/$depends/" \
  "$pkgdir/control.in" > "$stage/DEBIAN/control"
printf '/etc/default/allot-master\n/etc/default/allot-agent\n' > "$stage/DEBIAN/conffiles"
install -m 755 "$pkgdir/postinst" "$pkgdir/prerm" "$pkgdir/postrm" "$stage/DEBIAN/"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
  xargs -0 md5sum > DEBIAN/md5sums)

mkdir -p "$out"
deb=$out/allot_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >&2 || die "dpkg-deb --build failed"
log "built $deb ($(du -h "$deb" | cut -f1))"
printf '%s\n' "$deb"
