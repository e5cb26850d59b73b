#!/usr/bin/env bash
# pytest_installed (integration): the Python SDK installed the way a framework
# author installs it (README.md: pip install sdk/python, into a virtual
# environment with Debian's system packages, offline), then the same pytest
# suite as the `pytest` test against that installed package.
#
#   tests/python/run_installed.sh SOURCE_ROOT [PYTEST ARGS...]
#
# Exit status: pytest's; 77 (skip) with the reason when python3-venv, pip or
# setuptools is missing.
set -euo pipefail
src=${1:?usage: $0 SOURCE_ROOT [PYTEST ARGS...]}; shift
python=/usr/bin/python3
skip() { echo "[pytest_installed] SKIP: $*" >&2; exit 77; }
"$python" -c 'import venv' 2>/dev/null || skip "no venv module (Debian package python3-venv)"
"$python" -m pip --version >/dev/null 2>&1 || skip "no pip (Debian package python3-pip)"
"$python" -c 'import setuptools, wheel' 2>/dev/null || skip "no setuptools/wheel (python3-setuptools, python3-wheel)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/allot-pysdk.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"  # tasks run as the agent's default user and start this venv's python
# A copy of the package and its proto: the build leaves build/ and
# *.egg-info next to setup.py, never in the source tree.
mkdir -p "$tmp/src/sdk" "$tmp/src/proto"
cp -r "$src/sdk/python" "$tmp/src/sdk/"
cp "$src/proto/allot.proto" "$tmp/src/proto/"
"$python" -m venv --system-site-packages --without-pip "$tmp/venv"
# Debian's pip (system site packages) installs into the venv; no index is
# reached: the dependencies are Debian's python3-protobuf and python3-kazoo.
"$tmp/venv/bin/python" -m pip install --quiet --no-index --no-build-isolation "$tmp/src/sdk/python"
files=$("$tmp/venv/bin/python" -m pip show --files allot)
grep -q '_allot_pb2.py' <<< "$files" \
  || { echo "[pytest_installed] the installed package has no wire module" >&2; exit 1; }
rm -rf "$tmp/src"
cd "$src/tests/python"
ALLOT_SDK_INSTALLED=1 "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$src/tests/python" \
  --ignore "$src/tests/python/ui" "$@"
