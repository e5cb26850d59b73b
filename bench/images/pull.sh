#!/bin/bash
# Cold pull and unpack of a 50 MB, 5-layer image (files of this host's
# /usr, 10 MB a layer, gzip) from a loopback docker-registry started here:
# allot's pull path into a fresh layer store (image_pull_bench) against
# `skopeo copy` to an OCI layout followed by `umoci unpack` of the same
# image, in the same run; median of --rounds each, and their ratio
# (target: allot no slower, ratio at most 1). Needs root (umoci unpack
# keeps owners), docker-registry, skopeo and umoci.
#
#   bench/images/pull.sh --build-dir build --rounds 3
set -euo pipefail

build=build rounds=3 layer_mb=10
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "pull.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for p in docker-registry skopeo umoci; do
  command -v "$p" >/dev/null || { echo "pull.sh: needs $p" >&2; exit 2; }
done
build=$(realpath "$build")
dir=$(mktemp -d /tmp/allot-pull-bench.XXXXXX)
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/registry.sh"

start_registry

# Five layers of distinct files, each about layer_mb MB unpacked.
python3 - "$dir" "$layer_mb" <<'PY'
import os, sys
out, mb = sys.argv[1], int(sys.argv[2])
files = []
for root in ("/usr/lib", "/usr/share", "/usr/bin"):
    for d, _, names in os.walk(root):
        for n in sorted(names):
            p = os.path.join(d, n)
            if os.path.islink(p) or not os.path.isfile(p): continue
            s = os.path.getsize(p)
            if 4096 <= s <= 4 << 20: files.append((p, s))
layer, size = 0, 0
lists = [open(f"{out}/layer{i}.list", "w") for i in range(5)]
for p, s in files:
    if layer == 5: break
    lists[layer].write(p.lstrip("/") + "\n"); size += s
    if size >= mb << 20: layer, size = layer + 1, 0
for f in lists: f.close()
PY
umoci init --layout "$dir/img" >/dev/null
umoci new --image "$dir/img:latest" >/dev/null
for i in 0 1 2 3 4; do
  tar -C / -cf "$dir/layer$i.tar" -T "$dir/layer$i.list"
  umoci raw add-layer --image "$dir/img:latest" "$dir/layer$i.tar" >/dev/null
done
image="127.0.0.1:$port/bench/big:1"
skopeo copy -q --dest-tls-verify=false "oci:$dir/img:latest" "docker://$image" >/dev/null ||
  die "skopeo could not push"
unpacked_mb=$(du -sm --apparent-size "$dir"/layer?.tar | awk '{s += $1} END {print s}')

allot=()
while read -r line; do
  allot+=("${line#allot_pull_s=}")
  allot[-1]=${allot[-1]%% *}
done < <("$build/bench/images/image_pull_bench" "$image" "$dir/allot" "$rounds")
[ "${#allot[@]}" -eq "$rounds" ] || die "image_pull_bench failed"

anchor=()
for i in $(seq "$rounds"); do
  t0=$(date +%s.%N)
  skopeo copy -q --src-tls-verify=false "docker://$image" "oci:$dir/s$i:latest" >/dev/null
  umoci unpack --image "$dir/s$i:latest" "$dir/b$i" >/dev/null
  t1=$(date +%s.%N)
  anchor+=("$(echo "$t1 - $t0" | bc -l)")
  rm -rf "$dir/s$i" "$dir/b$i"
done

a=$(median "${allot[@]}") s=$(median "${anchor[@]}")
echo "allot: ${allot[*]} s; skopeo+umoci: ${anchor[*]} s"
result image_cold_pull layers=5 unpacked_mb="$unpacked_mb" rounds="$rounds" allot_s="$a" \
  skopeo_umoci_s="$s" ratio="$(printf %.2f "$(echo "$a / $s" | bc -l)")" \
  loadavg="$(cut -d' ' -f1-3 /proc/loadavg)"
