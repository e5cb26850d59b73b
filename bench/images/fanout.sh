#!/bin/bash
# 100 executors of one image launched at once: a real master and agent
# (--isolation cgroups/cpu,cgroups/mem,filesystem/linux), a loopback
# docker-registry started here serving an image not yet in the agent's
# store (a busybox layer and --layers layers of this host's /usr files,
# --layer-mb MB each, gzip), and `allot-execute --image ... --instances N`
# launching N command tasks of it, each in an executor of its own. Reports
# the layer blob GETs the registry served per layer (target: 1 each), the
# time from submission to all N RUNNING, and the agent's loop from its
# /metrics: the longest lateness, and the ticks whose own lateness (less
# the loop thread's wait for a CPU) reached 10 ms (target: none). Needs
# root, docker-registry, skopeo and umoci.
#
#   bench/images/fanout.sh --build-dir build --tasks 100
set -euo pipefail

build=build tasks=100 layers=4 layer_mb=10
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --layer-mb) layer_mb=$2; shift 2 ;;
    *) echo "fanout.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "fanout.sh: the agent needs root" >&2; exit 2; }
for p in docker-registry skopeo umoci; do
  command -v "$p" >/dev/null || { echo "fanout.sh: needs $p" >&2; exit 2; }
done
[ -x /bin/busybox ] || { echo "fanout.sh: needs busybox-static's /bin/busybox" >&2; exit 2; }
build=$(realpath "$build")
dir=$(mktemp -d /tmp/allot-fanout-bench.XXXXXX)
chmod 755 "$dir"
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/registry.sh"
cgroups_root=allot-fanout-$$
on_exit "for h in /sys/fs/cgroup/*/$cgroups_root; do find \$h -depth -type d -exec rmdir {} + 2>/dev/null; done"

start_registry --access-log

# The image: busybox (with /bin/sh) at the bottom, then `layers` layers of
# distinct /usr files, each about layer_mb MB.
mkdir -p "$dir/bb/bin"
cp /bin/busybox "$dir/bb/bin/busybox"
ln -s busybox "$dir/bb/bin/sh"
ln -s busybox "$dir/bb/bin/sleep"
python3 - "$dir" "$layers" "$layer_mb" <<'PY'
import os, sys
out, n, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
files = []
for root in ("/usr/lib", "/usr/share"):
    for d, _, names in os.walk(root):
        for name in sorted(names):
            p = os.path.join(d, name)
            if os.path.islink(p) or not os.path.isfile(p): continue
            s = os.path.getsize(p)
            if 4096 <= s <= 4 << 20: files.append((p, s))
layer, size = 0, 0
lists = [open(f"{out}/layer{i}.list", "w") for i in range(n)]
for p, s in files:
    if layer == n: break
    lists[layer].write(p.lstrip("/") + "\n"); size += s
    if size >= mb << 20: layer, size = layer + 1, 0
for f in lists: f.close()
PY
umoci init --layout "$dir/img" >/dev/null
umoci new --image "$dir/img:latest" >/dev/null
tar -C "$dir/bb" -cf "$dir/bb.tar" bin
umoci raw add-layer --image "$dir/img:latest" "$dir/bb.tar" >/dev/null
for i in $(seq 0 $((layers - 1))); do
  tar -C / -cf "$dir/layer$i.tar" -T "$dir/layer$i.list"
  umoci raw add-layer --image "$dir/img:latest" "$dir/layer$i.tar" >/dev/null
done
image="127.0.0.1:$port/bench/fanout:1"
skopeo copy -q --dest-tls-verify=false "oci:$dir/img:latest" "docker://$image" >/dev/null ||
  die "skopeo could not push"
digests=$(skopeo inspect --tls-verify=false --raw "docker://$image" |
  python3 -c 'import json, sys; print(" ".join(l["digest"] for l in json.load(sys.stdin)["layers"]))')
: >"$dir/registry.log"

"$build/master/allot-master" --listen 127.0.0.1:0 --port-file "$dir/port" >"$dir/master.log" 2>&1 &
pids+=($!)
wait_for 10 test -s "$dir/port" || die "master did not start"
master="127.0.0.1:$(cat "$dir/port")"
"$build/agent/allot-agent" --master "$master" --work-dir "$dir/agent" \
  --isolation cgroups/cpu,cgroups/mem,filesystem/linux --cgroups-root "$cgroups_root" \
  --http-listen 127.0.0.1:0 --http-port-file "$dir/http.port" --executor-idle-timeout 0.1 \
  --resources "cpus:64;mem:65536;disk:4096" >"$dir/agent.log" 2>&1 &
pids+=($!)
wait_for 15 grep -q "registered with master" "$dir/agent.log" || die "agent did not register"
metrics() { curl -sf "http://127.0.0.1:$(cat "$dir/http.port")/metrics"; }
metric() { awk -v k="$1" '$1 == k {print $2}' "$2"; }
metrics >"$dir/metrics.before" || die "no /metrics"

# True once FILE has at least N lines holding PATTERN.
lines_at_least() { [ "$(grep -c -- "$1" "$2")" -ge "$3" ]; }
echo "tasks=$tasks layers=$((layers + 1)) loadavg=[$(cut -d' ' -f1-3 /proc/loadavg)]"
t0=$(date +%s.%N)
"$build/cli/allot-execute" --master "$master" --name fanout --instances "$tasks" --image "$image" \
  --command "sleep 600" --resources "cpus:0.01;mem:16" --timeout 300 >"$dir/execute.log" 2>&1 &
execute=$!
pids+=($execute)
wait_for 300 lines_at_least " RUNNING" "$dir/execute.log" "$tasks" || die "$tasks tasks not RUNNING"
t1=$(date +%s.%N)
metrics >"$dir/metrics.after" || die "no /metrics"
kill -INT "$execute"
wait "$execute" || true
# The executors end (their tasks killed, then idle) before the agent stops.
executors() { find "/sys/fs/cgroup/cpu/$cgroups_root" -mindepth 2 -name cgroup.procs -not -path '*/agent/*' \
  -exec cat {} + 2>/dev/null | wc -l; }
no_executors() { [ "$(executors)" -eq 0 ]; }
wait_for 60 no_executors || echo "fanout.sh: $(executors) executor processes still running" >&2

# Layer blob GETs the registry answered (200), per layer of the image.
gets=()
for d in $digests; do
  gets+=("$(grep -ac "\"GET /v2/bench/fanout/blobs/$d HTTP/[0-9.]*\" 200" "$dir/registry.log" || true)")
done
m=$dir/metrics.after
own_all=$(metric 'allot_agent_loop_own_lateness_seconds_count' "$m")
own_fast=$(metric 'allot_agent_loop_own_lateness_seconds_bucket{le="0.01"}' "$m")
all=$(metric 'allot_agent_loop_lateness_seconds_count' "$m")
fast=$(metric 'allot_agent_loop_lateness_seconds_bucket{le="0.01"}' "$m")
echo "blob GETs per layer: ${gets[*]}"
grep '^allot_agent_loop_late' "$m" || true
result image_fanout tasks="$tasks" layers="${#gets[@]}" blob_gets_per_layer="$(IFS=,; echo "${gets[*]}")" \
  all_running_s="$(printf %.2f "$(echo "$t1 - $t0" | bc -l)")" \
  loop_ticks="$all" ticks_late_10ms="$((all - fast))" own_late_10ms="$((own_all - own_fast))" \
  lateness_max_ms="$(printf %.2f "$(echo "$(metric allot_agent_loop_lateness_max_seconds "$m") * 1000" | bc -l)")" \
  loadavg="$(cut -d' ' -f1-3 /proc/loadavg)"
