#!/usr/bin/env bash
# Checks the generated unit files with systemd-analyze verify, pointing
# ExecStart at the binaries of this build (verify insists they exist).
# Usage: verify_units.sh BUILD_DIR UNIT...
set -euo pipefail
build=$1; shift
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze is not installed"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for unit in "$@"; do
  name=$(basename "$unit")
  binary=${name%.service}
  if ! grep -q "^ExecStart=[^ ]*/$binary\( \|$\)" "$unit"; then  # not one of ours (/bin/true)
    cp "$unit" "$tmp/$name"; continue
  fi
  path=$(find "$build" -type f -name "$binary" -perm -u+x | head -n 1)
  if [ -z "$path" ]; then
    echo "FAIL: no built $binary under $build for $name"; exit 1
  fi
  sed "s|^ExecStart=[^ ]*/$binary|ExecStart=$path|" "$unit" > "$tmp/$name"
done
# verify prints problems and exits non-zero on errors; warnings about the
# host (no systemd as PID 1) are not errors.
output=$(cd "$tmp" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no ./*.service ./*.slice 2>&1) || {
  echo "$output"; exit 1; }
if echo "$output" | grep -E "Unknown key|Unknown section|Failed to parse|Invalid|is not executable|Missing" ; then
  echo "$output"; exit 1
fi
echo "$output"
echo "verified: $*"
