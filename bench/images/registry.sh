# Sourced by the image benchmarks after bench/lib.sh: start_registry starts
# Debian's docker-registry on a free loopback port under $dir, sets $port,
# and logs each request to $dir/registry.log when given --access-log.
start_registry() {
  local access=true
  [ "${1:-}" = --access-log ] && access=false
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cat >"$dir/registry.yml" <<YML
version: 0.1
log:
  accesslog:
    disabled: $access
storage:
  filesystem:
    rootdirectory: $dir/registry
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
  secret: bench
YML
  docker-registry serve "$dir/registry.yml" >"$dir/registry.log" 2>&1 &
  pids+=($!)
  wait_for 10 curl -sf "http://127.0.0.1:$port/v2/" -o /dev/null || die "docker-registry did not start"
}
