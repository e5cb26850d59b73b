#!/bin/sh
# The images root tests in the cgroup2 guest (scripts/vm/run-in-vm.sh), one
# boot for all: each TEST binary in turn, its output after it ends.
#
#   images_vm.sh TEST...
#
# Exit status: 0 when every test passed; 1 when one failed; 77 (meson's
# skip) when none failed but one skipped: the guest was given everything
# the tests need (registry, skopeo, busybox, the daemons), so a skip means
# it lacks something, and the skip's reason is above.
failed=0
skipped=
for t in "$@"; do
  name=$(basename "$t")
  out=/tmp/$name.out
  echo "images_vm: $name"
  "$t" > "$out" 2>&1
  rc=$?
  cat "$out"
  [ "$rc" -eq 0 ] || { echo "images_vm: $name exited $rc"; failed=1; }
  grep -q '^\[  SKIPPED \]' "$out" && skipped="$skipped $name"
done
[ "$failed" -eq 0 ] || exit 1
if [ -n "$skipped" ]; then
  echo "images_vm: tests skipped in the guest:$skipped (their reasons above)"
  exit 77
fi
exit 0
