// Isolated launch latency: the agent's path from a launch to the
// process running inside its cgroups — isolators prepare (cgroups/cpu and
// cgroups/mem: create the cgroups, write cpu.shares and the memory limit),
// Launcher::launch (the child joins them before exec; launch() returns once
// it has exec'd), isolate — p50/p99 over 1,000 launches of /bin/true.
//
// With namespaces/pid: the same launches, each executor pid 1 of
// a PID namespace of its own with its own /proc (runc's bundle below has
// one too).
//
// Anchor in the same run: `runc run --detach` of the same command in a
// minimal OCI bundle (busybox rootfs) with the same cpu shares and memory
// limit; it returns once the container process has started. Teardown of
// both (exit, cgroup removal, `runc delete`) is outside the timed part.
//
// With a network: allot adds network/netns (namespace, veth on a
// bench bridge, address, default route, one offered port in the nftables
// map) as the agent runs it: its default warm pool (--network-warm-pool)
// makes networks ahead on its worker thread while the bench's loop runs, and
// each executor's end runs the isolators' reap jobs on a worker pool before
// cleanup, as the agent's ExecutorManager does; runc's bundle adds a network namespace and the bench then gives it
// a veth on the same kind of bridge with an address and a route (libnl, as
// a CNI bridge plugin would), both inside the timed part (runc's process
// sleeps there so its namespace is still around to be plumbed).
// Usage: isolated_launch_bench [count] [network] (default 1000; "network":
// only the two network rows). Needs root.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/asio.h"
#include "base/uring_poller.h"
#include "base/worker_pool.h"
#include "isolators/isolator_table.h"
#include "isolators/network_isolator.h"
#include "isolators/network_links.h"
#include "isolators/network_pool.h"
#include "launcher/launcher.h"
#include "bench/result.h"
#include "bench/stats.h"

namespace allot {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using bench::ms;

using bench::percentile;

NetworkOptions benchNetwork() {
  NetworkOptions n;
  n.bridge = "anbench" + std::to_string(getpid() % 100000);
  n.cidr = "10.235.0.0/16";
  n.stateDir = (fs::temp_directory_path() / ("allot-bench-net-" + std::to_string(getpid()))).string();
  return n;
}

// What the agent does when an executor ended: the isolators' reap jobs on
// the worker pool, then cleanup on the loop (untimed; the loop keeps
// running meanwhile, so the warm pool's refills come in).
void reap(asio::io_context& io, WorkerPool& pool, std::vector<std::unique_ptr<Isolator>>& isolators,
          const ContainerId& id) {
  std::vector<std::function<Status()>> jobs;
  for (auto& iso : isolators) {
    if (auto job = iso->reapJob(id)) jobs.push_back(std::move(job));
  }
  bool done = false;
  Status queued = pool.submit<Status>(
      [jobs] {
        for (auto& job : jobs) (void)job();
        return okStatus();
      },
      [&](Status) { done = true; });
  if (!queued) std::exit(1);
  while (!done) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(100));
  }
  for (auto it = isolators.rbegin(); it != isolators.rend(); ++it) (void)(*it)->cleanup(id);
}

// The prepare() part of each allot launch (the isolators), printed apart.
std::vector<double> prepareMs;

std::vector<double> allotLaunches(int count, const std::string& isolation) {
  prepareMs.clear();
  bool network = isolation.find("network/netns") != std::string::npos;
  asio::io_context io(1);
  auto poller = std::move(*UringPoller::create(io));
  auto launcher = std::move(*Launcher::create(io, *poller));
  IsolatorOptions options;
  options.poller = poller.get();
  options.cgroupsRoot = "allot-bench-" + std::to_string(getpid());
  options.network = benchNetwork();
  options.io = &io;
  auto isolators = createIsolators(isolation, options);
  std::optional<WorkerPool> reaper(std::in_place, io, WorkerPoolOptions{.threads = 2, .queueMax = 1024});
  if (!isolators) {
    std::fprintf(stderr, "isolators: %s\n", isolators.error().describe().c_str());
    std::exit(1);
  }
  for (auto& iso : *isolators) (void)iso->recover({});
  Resources limits = *Resources::parse("cpus:0.5;mem:64;ports:[31000-31000]");
  std::vector<double> samples;
  for (int i = 0; i < count; ++i) {
    ContainerId id{"bench", "e" + std::to_string(i)};
    LaunchSpec spec;
    spec.argv = {"/bin/true"};
    spec.env = {"PATH=/usr/bin:/bin"};
    spec.workDir = "/";
    bool exited = false;
    auto start = Clock::now();
    for (auto& iso : *isolators) {
      if (Status st = iso->prepare(id, limits, &spec.setup); !st) {
        std::fprintf(stderr, "prepare: %s\n", st.error().describe().c_str());
        std::exit(1);
      }
    }
    prepareMs.push_back(ms(Clock::now() - start));
    auto pid = launcher->launch(spec, [&](const ExitInfo&) { exited = true; });
    if (!pid) {
      std::fprintf(stderr, "launch: %s\n", pid.error().describe().c_str());
      std::exit(1);
    }
    for (auto& iso : *isolators) (void)iso->isolate(id, *pid);
    samples.push_back(ms(Clock::now() - start));
    while (!exited) {
      io.restart();
      io.run_one_for(std::chrono::milliseconds(100));
    }
    reap(io, *reaper, *isolators, id);
  }
  // The isolators first: their layer moves this process out of <root>/agent
  // and removes the root it made; then whatever is left. The reaper's
  // workers are joined before: a worker may still hold its last job (the
  // isolators' reap jobs and, through them, the layer) after the loop saw
  // the result, and the layer then went later, on that worker: "removing
  // cpu/allot-bench-<pid>: Device or resource busy" between the passes.
  reaper.reset();
  isolators->clear();
  for (const char* c : {"cpu", "cpuacct", "memory", "freezer", "pids"}) {
    std::error_code ec;
    fs::remove(fs::path("/sys/fs/cgroup") / c / options.cgroupsRoot, ec);
    if (ec) std::cerr << "isolated_launch_bench: removing " << c << "/" << options.cgroupsRoot << ": " << ec.message() << "\n";
  }
  if (network) (void)removeNetwork(options.network);
  return samples;
}

// A minimal OCI bundle: busybox as the rootfs's only program.
std::string makeBundle(bool network) {
  fs::path dir = fs::temp_directory_path() / ("allot-runc-bundle-" + std::to_string(getpid()));
  fs::create_directories(dir / "rootfs/bin");
  fs::create_directories(dir / "rootfs/proc");
  fs::copy_file("/bin/busybox", dir / "rootfs/bin/busybox", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "config.json") << R"({
  "ociVersion": "1.0.2",
  "process": {"terminal": false, "user": {"uid": 0, "gid": 0},
              "args": ["/bin/busybox", ")" << (network ? "sleep\", \"30" : "true") << R"("], "env": ["PATH=/bin"], "cwd": "/",
              "noNewPrivileges": true},
  "root": {"path": "rootfs", "readonly": true},
  "hostname": "bench",
  "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
  "linux": {
    "resources": {"cpu": {"shares": 512}, "memory": {"limit": 67108864}},
    "namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"})"
                                << (network ? R"(, {"type": "network"})" : "") << R"(]
  }
})";
  return dir.string();
}

int run(const std::string& command) { return std::system(command.c_str()); }

std::string readLoad() {
  std::ifstream in("/proc/loadavg");
  std::string line;
  std::getline(in, line);
  return line;
}

// What a CNI bridge plugin does for runc: a veth into the container's
// namespace, on the bridge, with an address and a default route.
bool plumbRunc(Netlink& host, int bridge, const std::string& pidFile, uint32_t address, uint32_t gateway) {
  std::ifstream in(pidFile);
  int pid = 0;
  if (!(in >> pid) || pid <= 0) return false;
  int ns = ::open(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0) return false;
  char name[16];
  std::snprintf(name, sizeof name, "vr%08x", address);
  bool ok = host.createVeth(name, bridge, ns, "eth0").ok();
  auto inside = netlinkIn(ns);
  ::close(ns);
  if (!ok || !inside) return false;
  auto index = inside->ifindex("eth0");
  return index && inside->setUp(*index).ok() && inside->addAddress(*index, address, 32).ok() &&
         inside->addDefaultRoute(*index, gateway).ok();
}

std::vector<double> runcLaunches(int count, bool network) {
  std::string bundle = makeBundle(network);
  std::string pidFile = bundle + "/pid";
  NetworkOptions net = benchNetwork();
  Netlink host;
  int bridge = 0;
  auto cidr = *Ipv4Cidr::parse(net.cidr);
  if (network) {
    host = std::move(*Netlink::open());
    bridge = *host.ensureBridge(net.bridge);
    (void)host.addAddress(bridge, cidr.gateway(), cidr.prefixLength);
  }
  std::vector<double> samples;
  for (int i = 0; i < count; ++i) {
    std::string id = "allot-bench-" + std::to_string(getpid()) + "-" + std::to_string(i);
    uint32_t address = cidr.gateway() + 1 + (i % 60000);
    auto start = Clock::now();
    int rc = run("runc run --detach --pid-file " + pidFile + " --bundle " + bundle + " " + id +
                 " </dev/null >/dev/null 2>&1");
    if (rc == 0 && network && !plumbRunc(host, bridge, pidFile, address, cidr.gateway())) rc = -1;
    samples.push_back(ms(Clock::now() - start));
    if (network) {
      char name[16];
      std::snprintf(name, sizeof name, "vr%08x", address);
      (void)host.deleteLink(name);
    }
    run("runc delete --force " + id + " >/dev/null 2>&1");
    if (rc != 0) {
      std::fprintf(stderr, "runc run failed (exit %d); anchor skipped\n", rc);
      samples.clear();
      break;
    }
  }
  fs::remove_all(bundle);
  if (network) (void)removeNetwork(net);
  return samples;
}

}  // namespace
}  // namespace allot

int main(int argc, char** argv) {
  using namespace allot;
  if (geteuid() != 0) {
    std::fprintf(stderr, "isolated_launch_bench: needs root (real cgroups)\n");
    return 77;
  }
  int count = argc > 1 ? std::atoi(argv[1]) : 1000;
  // "network": only the two network rows (allot with network/netns and
  // runc + netns + veth), e.g. under perf.
  bool networkOnly = argc > 2 && std::string(argv[2]) == "network";
  std::vector<double> ours, oursPrepare, oursPid, anchor;
  if (!networkOnly) {
    ours = allotLaunches(count, "cgroups/cpu,cgroups/mem");
    oursPrepare = prepareMs;
    oursPid = allotLaunches(count, "cgroups/cpu,cgroups/mem,namespaces/pid");
  }
  auto oursNet = allotLaunches(count, "cgroups/cpu,cgroups/mem,network/netns");
  auto oursNetPrepare = prepareMs;
  if (!networkOnly) anchor = runcLaunches(count, false);
  auto anchorNet = runcLaunches(count, true);
  // Launches of /bin/true (cpus 0.5, mem 64 MiB, one offered port), `count`
  // each; a row with no launches (network only) is left out.
  bench::Result result("isolated_launch");
  result.add("launches", static_cast<long long>(count)).add("load", readLoad());
  auto row = [&result](const std::string& key, const std::vector<double>& v) {
    if (v.empty()) return;
    result.add(key + "_p50_ms", percentile(v, 0.5)).add(key + "_p99_ms", percentile(v, 0.99));
  };
  row("allot_cgroups", ours);
  row("allot_cgroups_prepare", oursPrepare);
  row("allot_cgroups_pidns", oursPid);
  row("allot_cgroups_netns", oursNet);
  row("allot_cgroups_netns_prepare", oursNetPrepare);
  row("runc_anchor", anchor);
  row("runc_netns_veth_anchor", anchorNet);
  // Targets: allot p50 under 5 ms and at least 5x faster than runc (whose
  // bundle has a PID namespace too).
  if (!anchor.empty() && !ours.empty()) {
    result.add("runc_over_allot_p50", percentile(anchor, 0.5) / percentile(ours, 0.5), 1);
    result.add("runc_over_allot_pidns_p50", percentile(anchor, 0.5) / percentile(oursPid, 0.5), 1);
  }
  if (!anchorNet.empty()) {
    result.add("runc_over_allot_netns_p50", percentile(anchorNet, 0.5) / percentile(oursNet, 0.5), 1);
  }
  result.add("target", "allot p50 < 5 ms and runc/allot >= 5x");
  result.emit();
  return 0;
}
