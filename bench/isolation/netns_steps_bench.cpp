// Where a network-isolated launch spends its time: each kernel
// step network/netns takes for one executor, timed on its own, N times,
// p50/p99 per step. The steps are the isolator's own calls (network_links.h,
// network_rules.h), in the isolator's order:
//
//   unshare       unshare(CLONE_NEWNET) on this thread
//   socket        a NETLINK_ROUTE socket inside, then setns() back
//   lo up         loopback up inside
//   veth          the veth pair (host end up on the bridge, peer moved in)
//   isolated      brport/isolated on the host end
//   eth0 up       the peer up inside
//   address       its /32 address
//   route         the default route via the gateway
//   nft           one offered port into the nftables map and set
//   launch        Launcher::launch() of /bin/true that setns()es into it
//   launch bare   the same launch without a namespace (for comparison;
//                 the vfork-style clone)
//   launch bare, clone3 into cgroup2
//                 the same, born in a cgroup2 directory, as every executor
//                 is where cgroup2 is mounted (clone3 with CLONE_INTO_CGROUP,
//                 vfork-style: CLONE_VM | CLONE_VFORK)
//   start off the loop, clone3 into cgroup2
//                 Launcher::startOffLoop() of the same (the agent's call):
//                 until the pid is back on the loop (the clone, the child's
//                 setup and exec on the launcher's clone thread)
//
// and, untimed by the launch path but measured here, the teardown that the
// next launch may queue behind: deleting the veth, closing the last fd of
// the namespace (the kernel frees it asynchronously in cleanup_net).
// Usage: netns_steps_bench [count] (default 200). Needs root.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/asio.h"
#include "base/uring_poller.h"
#include "isolators/cgroup_host.h"
#include "isolators/network_isolator.h"
#include "isolators/network_links.h"
#include "isolators/network_pool.h"
#include "isolators/network_rules.h"
#include "launcher/launcher.h"
#include "bench/stats.h"

namespace allot {
namespace {

using Clock = std::chrono::steady_clock;

using bench::ms;

using bench::percentile;

[[noreturn]] void die(const std::string& what, const Status& st) {
  std::fprintf(stderr, "netns_steps_bench: %s: %s\n", what.c_str(), st.ok() ? "" : st.error().describe().c_str());
  std::exit(1);
}

class Steps {
 public:
  // Runs `f` and records its time under `name` (names keep first-seen order).
  template <typename F>
  auto time(const std::string& name, F&& f) {
    auto start = Clock::now();
    auto result = f();
    add(name, ms(Clock::now() - start));
    return result;
  }
  void add(const std::string& name, double v) {
    if (!samples_.count(name)) order_.push_back(name);
    samples_[name].push_back(v);
  }
  void print() const {
    std::printf("%-34s %10s %10s\n", "step", "p50 ms", "p99 ms");
    for (const auto& n : order_) {
      const auto& v = samples_.at(n);
      std::printf("%-34s %10.3f %10.3f\n", n.c_str(), percentile(v, 0.5), percentile(v, 0.99));
    }
  }

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::vector<double>> samples_;
};

std::string readLoad() {
  std::ifstream in("/proc/loadavg");
  std::string line;
  std::getline(in, line);
  return line;
}

void launchAndWait(asio::io_context& io, Launcher& launcher, int netnsFd, Steps& steps, const char* name,
                   int cgroupDirFd = -1, bool offLoop = false) {
  LaunchSpec spec;
  spec.argv = {"/bin/true"};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.workDir = "/";
  spec.setup.netnsFd = netnsFd;
  spec.setup.cgroupDirFd = cgroupDirFd;
  bool exited = false;
  auto pid = steps.time(name, [&] {
    auto onExit = [&](const ExitInfo&) { exited = true; };
    if (!offLoop) return launcher.launch(spec, onExit);
    std::optional<Result<pid_t>> started;
    launcher.startOffLoop(spec, onExit, [&](Result<pid_t> p) { started = std::move(p); });
    while (!started) {
      io.restart();
      io.run_one();
    }
    return std::move(*started);
  });
  if (!pid) die("launch", pid.error());
  while (!exited) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(100));
  }
}

int runSteps(int count) {
  asio::io_context io(1);
  auto poller = std::move(*UringPoller::create(io));
  auto launcher = std::move(*Launcher::create(io, *poller));
  NetworkOptions net;
  net.bridge = "ansteps" + std::to_string(getpid() % 100000);
  net.cidr = "10.236.0.0/16";
  auto cidr = *Ipv4Cidr::parse(net.cidr);
  auto host = Netlink::open();
  if (!host) die("netlink", host.error());
  auto bridge = host->ensureBridge(net.bridge);
  if (!bridge) die("bridge", bridge.error());
  (void)host->addAddress(*bridge, cidr.gateway(), cidr.prefixLength);
  auto nft = Nftables::create();
  if (!nft) die("nftables", nft.error());
  NetworkRulesConfig rules{networkTableName(net), net.bridge, cidr, false};
  if (Status st = (*nft)->run(tableScript(rules, {})); !st) die("nft table", st);
  UniqueFd self(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  // A cgroup2 directory of the bench's own for the clone3 launches (none
  // without a cgroup2 mount: that row is left out).
  std::string cgroup2Dir;
  UniqueFd cgroup2Fd;
  if (auto host = detectCgroupHost("allot-steps"); host && !host->v2.empty()) {
    cgroup2Dir = host->v2 + "/allot-steps-" + std::to_string(getpid());
    if (::mkdir(cgroup2Dir.c_str(), 0755) == 0) {
      cgroup2Fd = UniqueFd(::open(cgroup2Dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    }
  }
  Steps steps;
  PortRanges port{{31000, 31000}};
  for (int i = 0; i < count; ++i) {
    uint32_t address = cidr.gateway() + 1 + i;
    char veth[16];
    std::snprintf(veth, sizeof veth, "ve%08x", address);
    auto total = Clock::now();
    int rc = steps.time("unshare", [] { return unshare(CLONE_NEWNET); });
    if (rc != 0) die("unshare", Error::fromErrno("unshare"));
    UniqueFd ns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    auto inside = steps.time("socket + setns back", [&] {
      auto sock = Netlink::open();
      if (setns(self.get(), CLONE_NEWNET) != 0) die("setns", Error::fromErrno("setns"));
      return sock;
    });
    if (!inside) die("socket", inside.error());
    Status st = steps.time("lo up", [&] { return inside->setUp(*inside->ifindex("lo")); });
    if (!st) die("lo up", st);
    st = steps.time("veth", [&] { return host->createVeth(veth, *bridge, ns.get(), "eth0"); });
    if (!st) die("veth", st);
    st = steps.time("isolated", [&] {
      return writeNetFile(std::string("/sys/class/net/") + veth + "/brport/isolated", "1");
    });
    if (!st) die("isolated", st);
    int index = *inside->ifindex("eth0");
    st = steps.time("eth0 up", [&] { return inside->setUp(index); });
    if (!st) die("eth0 up", st);
    st = steps.time("address", [&] { return inside->addAddress(index, address, 32); });
    if (!st) die("address", st);
    st = steps.time("route", [&] { return inside->addDefaultRoute(index, cidr.gateway()); });
    if (!st) die("route", st);
    st = steps.time("nft", [&] { return (*nft)->run(addPortsScript(rules, address, port)); });
    if (!st) die("nft", st);
    launchAndWait(io, *launcher, ns.get(), steps, "launch (setns)");
    steps.add("= all of the above", ms(Clock::now() - total));
    launchAndWait(io, *launcher, -1, steps, "launch bare");
    if (cgroup2Fd) {
      launchAndWait(io, *launcher, -1, steps, "launch bare, clone3 into cgroup2", cgroup2Fd.get());
      launchAndWait(io, *launcher, -1, steps, "start off the loop, clone3 into cgroup2", cgroup2Fd.get(), true);
    }
    (void)(*nft)->run(deletePortsScript(rules, address, port));
    st = steps.time("teardown: delete veth", [&] { return host->deleteLink(veth); });
    if (!st) die("delete veth", st);
    inside = Netlink{};
    steps.time("teardown: close netns", [&] {
      ns.reset();
      return 0;
    });
  }
  (void)removeNetwork(net);
  if (cgroup2Fd) {
    cgroup2Fd.reset();
    if (::rmdir(cgroup2Dir.c_str()) != 0) std::perror(("netns_steps_bench: rmdir " + cgroup2Dir).c_str());
  }
  std::printf("network/netns steps, %d executors one after another; load %s\n", count, readLoad().c_str());
  steps.print();
  return 0;
}

}  // namespace
}  // namespace allot

int main(int argc, char** argv) {
  if (geteuid() != 0) {
    std::fprintf(stderr, "netns_steps_bench: needs root\n");
    return 77;
  }
  int count = argc > 1 ? std::atoi(argv[1]) : 200;
  if (count < 1 || count > 60000) {
    std::fprintf(stderr, "netns_steps_bench: count must be in 1..60000\n");
    return 2;
  }
  return allot::runSteps(count);
}
