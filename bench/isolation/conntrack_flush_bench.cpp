// What network/netns's conntrack flush costs with a big host table (issue
// 13): the host's table is filled with N UDP flows (N/2 IPv4, N/2 IPv6)
// sent from a namespace the bench makes (a veth to the host; each packet to
// a closed host port is a new unreplied flow, gone by itself after
// nf_conntrack_udp_timeout, 30 s), then flushConntrack() is timed for one
// ended dual-stack executor, for one IPv6 address alone, and for one
// executor's removed port, none of which has entries (the usual case: the
// cost is the table walk). Anchor in the same run: the flush as it was
// before (one dump of both families, every entry parsed into a libnl object,
// nfnlmsg_ct_parse). At the end the bench's own flows go through
// flushConntrack() (timed: deleting N entries one by one).
// Usage: conntrack_flush_bench [flows] [repeats] (default 100000, 10). Root.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netlink/msg.h>
#include <netlink/netfilter/ct.h>
#include <netlink/netfilter/nfnl.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "isolators/network_conntrack.h"
#include "isolators/network_isolator.h"
#include "bench/stats.h"

namespace allot {
namespace {

using Clock = std::chrono::steady_clock;

using bench::ms;

using bench::percentile;

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

std::string readLoad() {
  std::ifstream in("/proc/loadavg");
  std::string line;
  std::getline(in, line);
  return line;
}

// From inside `ns`: `count` UDP datagrams to host:port, ports 1..50000 from
// each of ceil(count/50000) sockets (distinct source ports): one flow each.
bool sendFlows(const std::string& ns, const std::string& host, int count) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(("/run/netns/" + ns).c_str(), O_RDONLY);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(2);
    bool v6 = host.find(':') != std::string::npos;
    sockaddr_storage a{};
    socklen_t len;
    if (v6) {
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&a);
      a6->sin6_family = AF_INET6;
      inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr);
      len = sizeof *a6;
    } else {
      auto* a4 = reinterpret_cast<sockaddr_in*>(&a);
      a4->sin_family = AF_INET;
      inet_pton(AF_INET, host.c_str(), &a4->sin_addr);
      len = sizeof *a4;
    }
    int s = -1;
    for (int i = 0; i < count; ++i) {
      if (i % 50000 == 0) {
        if (s >= 0) close(s);
        s = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);
        if (s < 0) _exit(1);
      }
      uint16_t port = htons(static_cast<uint16_t>(1 + i % 50000));
      if (v6) {
        reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = port;
      } else {
        reinterpret_cast<sockaddr_in*>(&a)->sin_port = port;
      }
      // ICMP errors of earlier datagrams may fail a send: not a flow lost.
      (void)sendto(s, "x", 1, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&a), len);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

size_t tableCount() {
  std::ifstream in("/proc/sys/net/netfilter/nf_conntrack_count");
  size_t n = 0;
  in >> n;
  return n;
}

// The flush before this session's change: one dump of both families, each
// entry a libnl object, matched on its addresses (nothing matches here).
size_t wholeTableAsObjects() {
  nl_sock* sock = nl_socket_alloc();
  if (!sock || nfnl_connect(sock) < 0) std::exit(1);
  size_t seen = 0;
  nl_socket_modify_cb(
      sock, NL_CB_VALID, NL_CB_CUSTOM,
      [](nl_msg* msg, void* arg) -> int {
        nfnl_ct* ct = nullptr;
        if (nfnlmsg_ct_parse(nlmsg_hdr(msg), &ct) < 0) return NL_SKIP;
        ++*static_cast<size_t*>(arg);
        (void)nfnl_ct_get_src(ct, 0);
        nfnl_ct_put(ct);
        return NL_OK;
      },
      &seen);
  if (nfnl_ct_dump_request(sock) < 0 || nl_recvmsgs_default(sock) < 0) std::exit(1);
  nl_socket_free(sock);
  return seen;
}

}  // namespace
}  // namespace allot

int main(int argc, char** argv) {
  using namespace allot;
  if (geteuid() != 0) {
    std::fprintf(stderr, "conntrack_flush_bench: needs root\n");
    return 77;
  }
  int flows = argc > 1 ? std::atoi(argv[1]) : 100000;
  int repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  flows = std::clamp(flows, 2, 400000);
  repeats = std::clamp(repeats, 1, 1000);
  std::string tag = std::to_string(getpid() % 10000);  // also an IPv6 group: 4 digits
  // The agent's nftables table (its nat chains turn conntrack on in the
  // host's namespace), as installed.
  NetworkOptions net;
  net.bridge = "acfb" + tag;
  net.cidr = "10.236.0.0/24";
  net.cidr6 = "fdad:" + tag + "::/64";
  net.stateDir = "/tmp/allot-ctbench-" + tag;
  auto iso = makeNetworkIsolator(net);
  if (!iso) {
    std::fprintf(stderr, "network/netns: %s\n", iso.error().describe().c_str());
    return 1;
  }
  std::string ns = "acfns" + tag, veth = "acf" + tag;
  std::string setup = "ip netns add " + ns + " && ip link add " + veth + " type veth peer name eth0 netns " + ns +
                      " && ip addr add 198.18.7.1/30 dev " + veth + " && ip addr add fdae:" + tag +
                      "::1/64 dev " + veth + " nodad && ip link set " + veth + " up && ip -n " + ns +
                      " addr add 198.18.7.2/30 dev eth0 && ip -n " + ns + " addr add fdae:" + tag +
                      "::2/64 dev eth0 nodad && ip -n " + ns + " link set eth0 up";
  int rc = sh(setup);
  auto cleanup = [&] {
    sh("ip netns del " + ns);
    sh("ip link del " + veth);
    iso->reset();
    (void)removeNetwork(net);
  };
  if (rc != 0) {
    std::fprintf(stderr, "conntrack_flush_bench: setting up %s failed\n", ns.c_str());
    cleanup();
    return 1;
  }
  size_t before = tableCount();
  auto fillStart = Clock::now();
  bool sent = sendFlows(ns, "198.18.7.1", flows / 2) && sendFlows(ns, "fdae:" + tag + "::1", flows / 2);
  double fillMs = ms(Clock::now() - fillStart);
  size_t after = tableCount();
  if (!sent) {
    std::fprintf(stderr, "conntrack_flush_bench: sending flows failed\n");
    cleanup();
    return 1;
  }
  // An ended executor of the pool (no flows): both families walked.
  ExecutorAddresses executor{*parseIpv4("10.236.0.9"), Ipv6Address::parse("fdad:" + tag + "::9").value()};
  std::vector<double> anchor, dual, v4only, port;
  size_t seenAnchor = 0, seenDual = 0;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = Clock::now();
    seenAnchor = wholeTableAsObjects();
    anchor.push_back(ms(Clock::now() - t0));
    t0 = Clock::now();
    auto d = flushConntrack(std::vector<ExecutorAddresses>{executor});
    dual.push_back(ms(Clock::now() - t0));
    if (!d) {
      std::fprintf(stderr, "flush: %s\n", d.error().describe().c_str());
      cleanup();
      return 1;
    }
    seenDual = d->seen;
    t0 = Clock::now();
    (void)flushConntrack(std::vector<ExecutorAddresses>{{executor.v4, std::nullopt}});
    v4only.push_back(ms(Clock::now() - t0));
    t0 = Clock::now();
    (void)flushConntrack(std::vector<ExecutorFlows>{{executor, Resources::Ranges{std::pair<uint64_t, uint64_t>(31000, 31000)}}});
    port.push_back(ms(Clock::now() - t0));
  }
  // The bench's own flows, deleted through the same call.
  auto t0 = Clock::now();
  auto own = flushConntrack(
      std::vector<ExecutorAddresses>{{*parseIpv4("198.18.7.2"), Ipv6Address::parse("fdae:" + tag + "::2").value()}});
  double ownMs = ms(Clock::now() - t0);
  std::printf("conntrack flush, host table %zu entries (%zu before the bench's %d flows, sent in %.0f ms); "
              "%d repeats; load %s\n",
              after, before, flows, fillMs, repeats, readLoad().c_str());
  std::printf("%-58s %10s %10s\n", "", "p50 ms", "max ms");
  auto row = [](const std::string& name, const std::vector<double>& v) {
    std::printf("%-58s %10.3f %10.3f\n", name.c_str(), percentile(v, 0.5), *std::max_element(v.begin(), v.end()));
  };
  row("before: one dump, every entry a libnl object (" + std::to_string(seenAnchor) + ")", anchor);
  row("ended dual-stack executor (" + std::to_string(seenDual) + " entries read)", dual);
  row("ended IPv4-only executor", v4only);
  row("one removed port of a dual-stack executor", port);
  if (own) {
    std::printf("deleting the bench's own flows: %zu deleted of %zu read in %.1f ms\n", own->deleted, own->seen,
                ownMs);
  } else {
    std::printf("deleting the bench's own flows failed: %s\n", own.error().describe().c_str());
  }
  cleanup();
  return 0;
}
