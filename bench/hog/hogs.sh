#!/usr/bin/env bash
# The noisy neighbours of the hog benchmark, each run as one allot task.
#
#   hogs.sh cpu N            N processes spinning in infinite loops (paper 6.7: 256)
#   hogs.sh mem CAP_MIB      allocate and touch 64 MiB chunks until CAP_MIB, then
#                            keep re-touching them (Matthews et al.'s memory bomb;
#                            CAP_MIB is a safety cap for the unisolated run)
#   hogs.sh fork NPROC USER  a classic bash fork bomb run as USER under
#                            RLIMIT_NPROC=NPROC (safety cap: root ignores
#                            RLIMIT_NPROC, so a bomb started as root drops
#                            to USER first; allot starts it as USER)
#   hogs.sh disk DIR         sequential 1 MiB O_DIRECT writes to DIR/hog.dat
#                            (a 1 GiB file, overwritten in a loop)
#
# Every mode runs until killed (allot-execute --kill-after or run.sh).
set -u

mode=${1:-}
case "$mode" in
  cpu)
    n=${2:?count}
    for ((i = 0; i < n; i++)); do
      (while :; do :; done) &
    done
    wait
    ;;
  mem)
    cap=${2:?cap in MiB}
    exec python3 -c '
import sys, time
cap = int(sys.argv[1])
chunk = 64 << 20
chunks = []
stride = b"\x01" * (chunk // 4096)
while True:
    if len(chunks) * 64 < cap:
        b = bytearray(chunk)
        b[::4096] = stride
        chunks.append(b)
        print("allocated", len(chunks) * 64, "MiB", flush=True)
    else:
        for b in chunks:
            b[::4096] = stride
' "$cap"
    ;;
  fork)
    nproc=${2:?nproc cap}
    user=${3:?user}
    drop=()
    [ "$(id -u)" -eq 0 ] && drop=(setpriv --reuid="$user" --regid="$user" --clear-groups)
    exec prlimit --nproc="$nproc" -- "${drop[@]}" bash -c 'bomb() { bomb | bomb & }; bomb; sleep infinity'
    ;;
  disk)
    dir=${2:?dir}
    mkdir -p "$dir"
    while :; do
      dd if=/dev/zero of="$dir/hog.dat" bs=1M count=1024 oflag=direct conv=notrunc status=none || sleep 1
    done
    ;;
  *)
    sed -n '2,14p' "$0" >&2
    exit 2
    ;;
esac
