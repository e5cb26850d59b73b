// Root tests of network/netns against the real kernel (fixture and what
// every test checks at its end: network_root_fixture.h): what goes with an
// executor or an agent: veths, namespaces and state across agent restarts and
// crashes, and conntrack flows of ended executors and removed ports.
#include <unistd.h>

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "isolators/network_links.h"
#include "tests/common/test_ports.h"
#include "tests/common/test_util.h"
#include "tests/isolators/network_root_fixture.h"

namespace allot::nettest {
namespace {

// `address` as /proc/net/nf_conntrack prints it (IPv4 as is, IPv6 as eight
// groups of four hex digits).
std::string conntrackText(const std::string& address) {
  std::string text = address;
  if (address.find(':') != std::string::npos) {
    auto a = Ipv6Address::parse(address);
    if (!a) return "";
    uint8_t b[16];
    a->toBytes(b);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    text = buf;
  }
  return text;
}

// The conntrack lines (/proc/net/nf_conntrack) naming `address`.
std::string conntrackOf(const std::string& address) {
  std::string text = conntrackText(address);
  std::string out;
  std::ifstream in("/proc/net/nf_conntrack");
  for (std::string line; std::getline(in, line);) {
    if (line.find("=" + text + " ") != std::string::npos) out += line + "\n";
  }
  return out;
}

// The conntrack lines of flows answered from address:port (reply direction
// "src=<address> dst=... sport=<port> "): flows made to that port.
std::string flowsToPort(const std::string& address, int port) {
  std::string from = "src=" + conntrackText(address) + " ";
  std::string sport = "sport=" + std::to_string(port) + " ";
  std::string out;
  std::ifstream in("/proc/net/nf_conntrack");
  for (std::string line; std::getline(in, line);) {
    for (size_t at = line.find(from); at != std::string::npos; at = line.find(from, at + 1)) {
      size_t next = line.find("sport=", at);
      if (next != std::string::npos && line.compare(next, sport.size(), sport) == 0) {
        out += line + "\n";
        break;
      }
    }
  }
  return out;
}

TEST_F(NetworkRoot, RecoveryKeepsRunningExecutorsAndRemovesGoneOnes) {
  allot::testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  Executor& a = start("a", "cpus:0.1;" + offeredPort(port), {port});
  Executor& b = start("b", "cpus:0.1", {31008});
  Executor& c = start("c", "cpus:0.1", {31009});
  ASSERT_TRUE(a.running && b.running && c.running);
  ASSERT_FALSE(c.ifindex.empty());
  // The agent dies (no cleanup), b and c die while it is down.
  isolator_.reset();
  stop(b);
  stop(c);
  makeIsolator();
  // The restarted agent still knows a and b (b's death is found later), not c.
  ASSERT_TRUE(isolator_->recover({a.id, b.id}).ok());
  EXPECT_TRUE(fetch("", "127.0.0.1", port).has_value()) << "a's offered port lost across the restart";
  auto nl = Netlink::open();
  ASSERT_TRUE(nl.ok());
  // (The restarted warm pool may make a new interface with c's address's
  // name: c's own is known by its index.)
  EXPECT_NE(ifindexOf(vethOf(c.address)), c.ifindex) << "c's veth survived recovery";
  EXPECT_FALSE(std::filesystem::exists(options_.stateDir + "/" + c.id.name()));
  ASSERT_TRUE(isolator_->cleanup(b.id).ok());
  EXPECT_FALSE(std::filesystem::exists(options_.stateDir + "/" + b.id.name()));
  // A new executor gets a fresh address, never a's.
  Executor& d = start("d", "cpus:0.1", {31010});
  EXPECT_NE(d.address, a.address);
  EXPECT_TRUE(fetch(d.nsPath(), "127.0.0.1", 31010).has_value());
}

// The agent is SIGKILLed with its warm pool full: the namespaces had no
// holder but the agent's fds, so the kernel removes them and their veths;
// the restarted agent's recover() finds nothing of them.
TEST_F(NetworkRoot, AgentCrashLeavesNoWarmNetworkBehind) {
  isolator_.reset();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    asio::io_context io;
    auto made = makeNetworkIsolator(options_, &io);
    if (!made || !(*made)->recover({}).ok()) _exit(1);
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (bridgePorts().size() < 4 && std::chrono::steady_clock::now() < deadline) {
      io.run_one_for(std::chrono::milliseconds(50));
    }
    if (write(fds[1], "r", 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  helpers_.push_back(child);
  close(fds[1]);
  char ready = 0;
  ASSERT_EQ(read(fds[0], &ready, 1), 1);
  close(fds[0]);
  std::vector<std::string> indexes;
  for (const auto& veth : bridgePorts()) indexes.push_back(ifindexOf(veth));
  ASSERT_EQ(indexes.size(), 4u) << "the crashing agent's pool did not fill";
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  helpers_.clear();
  EXPECT_TRUE(interfacesGone(indexes)) << "the crashed agent's warm veths outlived it";
  makeIsolator();
  ASSERT_TRUE(isolator_->recover({}).ok());
  Executor& a = start("a", "cpus:0.1", {31021});
  EXPECT_TRUE(a.running);
  EXPECT_TRUE(fetch(a.nsPath(), "127.0.0.1", 31021).has_value());
}

TEST_F(NetworkRoot, ConntrackEntriesGoWithTheirExecutor) {
  if (access("/proc/net/nf_conntrack", R_OK) != 0) {
    GTEST_SKIP() << "needs /proc/net/nf_conntrack (CONFIG_NF_CONNTRACK_PROCFS) to read the table";
  }
  makeDualStackIsolator();
  allot::testing::ReservedPort reserved, reserved2;
  int port = reserved.port(), port2 = reserved2.port();
  Executor& a = start("a", "cpus:0.1;" + offeredPort(port), {port},
                      kServer6);
  Executor& b = start("b", "cpus:0.1;" + offeredPort(port2),
                      {port2}, kServer6);
  ASSERT_TRUE(a.running && b.running);
  std::string gateway6 = Ipv6Cidr::parse(options_.cidr6)->gateway().toString();
  // Flows through DNAT (v4 and v6) to a, one to b; closed, so the entries
  // wait out TIME_WAIT (two minutes) in the host's table.
  ASSERT_TRUE(fetch("", "127.0.0.1", port).has_value());
  ASSERT_TRUE(fetch("", gateway6, port).has_value());
  ASSERT_TRUE(fetch("", "127.0.0.1", port2).has_value());
  EXPECT_NE(conntrackOf(a.address), "") << "no IPv4 entry of a to delete";
  EXPECT_NE(conntrackOf(a.address6), "") << "no IPv6 entry of a to delete";
  ASSERT_NE(conntrackOf(b.address), "");
  stop(a);
  ASSERT_TRUE(isolator_->cleanup(a.id).ok());
  EXPECT_TRUE(runUntil(io_, [&] { return conntrackOf(a.address).empty() && conntrackOf(a.address6).empty(); }, 10s))
      << "left:\n" << conntrackOf(a.address) << conntrackOf(a.address6);
  EXPECT_NE(conntrackOf(b.address), "") << "b's flows went with a's";
}

// A task ends, its executor keeps running: connections already made to the
// port the task had (through DNAT, IPv4 and IPv6) stop working, those to the
// port the executor keeps go on.
TEST_F(NetworkRoot, RemovedPortsLoseTheirEstablishedFlows) {
  if (access("/proc/net/nf_conntrack", R_OK) != 0) {
    GTEST_SKIP() << "needs /proc/net/nf_conntrack (CONFIG_NF_CONNTRACK_PROCFS) to read the table";
  }
  makeDualStackIsolator();
  allot::testing::ReservedPort reservedLost, reservedKept;  // host ports no other test offers meanwhile
  int lost = reservedLost.port(), kept = reservedKept.port();
  Executor& a = start("a", "cpus:0.1;" + offeredPorts({lost, kept}), {lost, kept}, kEchoServer6);
  ASSERT_TRUE(a.running);
  std::string gateway6 = Ipv6Cidr::parse(options_.cidr6)->gateway().toString();
  int lost4 = connectTo("127.0.0.1", lost), lost6 = connectTo(gateway6, lost);
  int kept4 = connectTo("127.0.0.1", kept), kept6 = connectTo(gateway6, kept);
  for (int fd : {lost4, lost6, kept4, kept6}) {
    ASSERT_GE(fd, 0) << "cannot connect to an offered port";
    EXPECT_TRUE(echoes(fd));
  }
  ASSERT_NE(flowsToPort(a.address, lost), "");
  ASSERT_NE(flowsToPort(a.address6, lost), "");
  // The task that held `lost` ended; the executor keeps `kept`.
  Status st = isolator_->update(a.id, *Resources::parse("cpus:0.1;" + offeredPort(kept)));
  ASSERT_TRUE(st.ok()) << st.error().describe();
  EXPECT_TRUE(runUntil(io_, [&] { return flowsToPort(a.address, lost).empty() && flowsToPort(a.address6, lost).empty(); },
                       10s))
      << "left:\n" << flowsToPort(a.address, lost) << flowsToPort(a.address6, lost);
  EXPECT_FALSE(echoes(lost4)) << "an IPv4 connection to a removed port still reaches the executor";
  EXPECT_FALSE(echoes(lost6)) << "an IPv6 connection to a removed port still reaches the executor";
  EXPECT_TRUE(echoes(kept4)) << "the IPv4 connection to the kept port broke";
  EXPECT_TRUE(echoes(kept6)) << "the IPv6 connection to the kept port broke";
  for (int fd : {lost4, lost6, kept4, kept6}) close(fd);
}

TEST_F(NetworkRoot, RecoveryDeletesTheConntrackEntriesOfGoneExecutors) {
  if (access("/proc/net/nf_conntrack", R_OK) != 0) {
    GTEST_SKIP() << "needs /proc/net/nf_conntrack (CONFIG_NF_CONNTRACK_PROCFS) to read the table";
  }
  allot::testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  Executor& c = start("c", "cpus:0.1;" + offeredPort(port), {port});
  ASSERT_TRUE(c.running);
  ASSERT_TRUE(fetch("", "127.0.0.1", port).has_value());
  ASSERT_NE(conntrackOf(c.address), "");
  // The agent dies, c dies while it is down; the restarted agent does not know c.
  isolator_.reset();
  stop(c);
  makeIsolator();
  ASSERT_TRUE(isolator_->recover({}).ok());
  EXPECT_TRUE(runUntil(io_, [&] { return conntrackOf(c.address).empty(); }, 10s)) << conntrackOf(c.address);
}

}  // namespace
}  // namespace allot::nettest
