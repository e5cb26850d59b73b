// Root tests of network/netns against the real kernel (fixture and what
// every test checks at its end: network_root_fixture.h): addresses, offered
// ports from the host, another executor and an outside host, IPv4 and IPv6,
// and egress through the host.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "isolators/network_links.h"
#include "tests/common/test_ports.h"
#include "tests/common/test_util.h"
#include "tests/isolators/network_root_fixture.h"

namespace allot::nettest {
namespace {

TEST_F(NetworkRoot, TwoExecutorsGetOwnNamespacesAndReachOnlyOfferedPorts) {
  Executor& a = start("a", "cpus:0.1;ports:[31001-31001]", {31001, 31002});
  Executor& b = start("b", "cpus:0.1;ports:[31011-31011]", {31011});
  ASSERT_TRUE(a.running && b.running);
  EXPECT_NE(a.netns, netnsInode("/proc/self/ns/net"));
  EXPECT_NE(a.netns, b.netns);
  EXPECT_EQ(a.address.rfind(subnet_ + ".", 0), 0u) << a.address;
  EXPECT_EQ(b.address.rfind(subnet_ + ".", 0), 0u) << b.address;
  EXPECT_NE(a.address, b.address);
  // Offered port: reachable from the other executor (which is who it sees).
  auto offered = fetch(b.nsPath(), a.address, 31001);
  ASSERT_TRUE(offered.has_value()) << "b cannot reach a's offered port";
  EXPECT_EQ(*offered, a.address + " " + b.address);
  // Unoffered port: dropped between executors, but a's own loopback works.
  EXPECT_FALSE(fetch(b.nsPath(), a.address, 31002, kDroppedWait).has_value()) << "b reached a's unoffered port";
  EXPECT_TRUE(fetch(a.nsPath(), "127.0.0.1", 31002).has_value());
  EXPECT_TRUE(fetch(a.nsPath(), b.address, 31011).has_value());
}

TEST_F(NetworkRoot, AllowExecutorTrafficOpensUnofferedPorts) {
  isolator_.reset();
  options_.allowExecutorTraffic = true;
  ASSERT_TRUE(removeNetwork(options_).ok());
  makeIsolator();
  ASSERT_TRUE(isolator_->recover({}).ok());
  Executor& a = start("a", "cpus:0.1", {31002});
  Executor& b = start("b", "cpus:0.1", {31003});
  ASSERT_TRUE(a.running && b.running);
  EXPECT_TRUE(fetch(b.nsPath(), a.address, 31002, kDroppedWait).has_value());
}

TEST_F(NetworkRoot, OfferedPortReachableFromHostLoopbackAndFromAnOutsideHost) {
  allot::testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  Executor& a = start("a", "cpus:0.1;" + offeredPort(port), {port});
  ASSERT_TRUE(a.running);
  makeOutside();
  auto local = fetch("", "127.0.0.1", port);
  ASSERT_TRUE(local.has_value()) << "127.0.0.1:" << port << " not forwarded";
  EXPECT_EQ(local->substr(0, a.address.size()), a.address);
  auto remote = fetch(outsidePath(), outsideHost_, port);
  ASSERT_TRUE(remote.has_value()) << "outside host cannot reach " << outsideHost_ << ":" << port;
  // The executor sees the real client (DNAT only, no source NAT).
  EXPECT_EQ(*remote, a.address + " " + outsidePeer_);
  // After cleanup the port is the host's again.
  stop(a);
  ASSERT_TRUE(isolator_->cleanup(a.id).ok());
  EXPECT_FALSE(fetch(outsidePath(), outsideHost_, port, kDroppedWait).has_value());
}

TEST_F(NetworkRoot, EgressLeavesThroughTheHostMasqueraded) {
  Executor& a = start("a", "cpus:0.1", {31005});
  makeOutside();
  std::string dir = workDir_ + "/outside";
  std::filesystem::create_directories(dir);
  spawnOutside({"/usr/bin/python3", "-c", kServer, "8080"}, dir);
  ASSERT_TRUE(runUntil(io_, [&] { return !readFile(dir + "/ready").empty(); }, 10s));
  auto seen = fetch(a.nsPath(), outsidePeer_, 8080);
  ASSERT_TRUE(seen.has_value()) << "executor cannot reach the outside host";
  EXPECT_EQ(*seen, "none " + outsideHost_) << "outside host saw the executor's own address";
}

TEST_F(NetworkRoot, DualStackExecutorHasAnIpv6AddressReachableFromTheHost) {
  makeDualStackIsolator();
  allot::testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  std::string offered = offeredPort(port);
  Executor& a = start("a", "cpus:0.1;" + offered, {port}, kServer6);
  ASSERT_TRUE(a.running);
  // The IPv6 address sits at the IPv4 address's offset in the prefix.
  auto v4 = *parseIpv4(a.address);
  auto cidr6 = *Ipv6Cidr::parse(options_.cidr6);
  auto expected = cidr6.executorAddress(*Ipv4Cidr::parse(options_.cidr), v4);
  ASSERT_TRUE(expected.has_value());
  EXPECT_EQ(a.address6, expected->toString());
  std::string inside = capture("nsenter --net=" + a.nsPath() + " ip -6 addr show dev eth0");
  EXPECT_NE(inside.find(a.address6 + "/128"), std::string::npos) << inside;
  std::string route = capture("nsenter --net=" + a.nsPath() + " ip -6 route show default");
  EXPECT_NE(route.find("via " + cidr6.gateway().toString()), std::string::npos) << route;
  std::string state = readFile(options_.stateDir + "/" + a.id.name());
  EXPECT_NE(state.find("address6 " + a.address6), std::string::npos) << state;
  // Its offered port on the host's own IPv6 address (the bridge's), and
  // still on IPv4.
  auto six = fetch("", cidr6.gateway().toString(), port);
  ASSERT_TRUE(six.has_value()) << "[" << cidr6.gateway().toString() << "]:" << port << " not forwarded";
  EXPECT_EQ(*six, a.address6 + " " + cidr6.gateway().toString());
  EXPECT_TRUE(fetch("", "127.0.0.1", port).has_value());
  // After cleanup the port is the host's again.
  stop(a);
  ASSERT_TRUE(isolator_->cleanup(a.id).ok());
  EXPECT_FALSE(fetch("", cidr6.gateway().toString(), port, kDroppedWait).has_value());
}

TEST_F(NetworkRoot, Ipv6OfferedPortFromAnOutsideHostAndEgressMasqueraded) {
  if (!ipv6Forwards()) {
    GTEST_SKIP() << "IPv6 forwarding is global on this kernel (no per-interface force_forwarding before Linux "
                    "6.17) and net.ipv6.conf.all.forwarding is 0; the test does not change it for the host";
  }
  makeDualStackIsolator();
  allot::testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  std::string offered = offeredPort(port);
  Executor& a = start("a", "cpus:0.1;" + offered, {port}, kServer6);
  ASSERT_TRUE(a.running);
  makeOutside(/*withIpv6=*/true);
  // An outside host to the agent's IPv6 address: DNAT only, the executor
  // sees the client.
  auto remote = fetch(outsidePath(), outsideHost6_, port);
  ASSERT_TRUE(remote.has_value()) << "outside host cannot reach [" << outsideHost6_ << "]:" << port;
  EXPECT_EQ(*remote, a.address6 + " " + outsidePeer6_);
  // The executor to an outside host: masqueraded to the host's address.
  std::string dir = workDir_ + "/outside";
  std::filesystem::create_directories(dir);
  spawnOutside({"/usr/bin/python3", "-c", kServer6, "8080"}, dir);
  ASSERT_TRUE(runUntil(io_, [&] { return !readFile(dir + "/ready6").empty(); }, 10s));
  auto seen = fetch(a.nsPath(), outsidePeer6_, 8080);
  ASSERT_TRUE(seen.has_value()) << "executor cannot reach the outside host over IPv6";
  EXPECT_EQ(*seen, "none " + outsideHost6_) << "outside host saw the executor's own address";
}

}  // namespace
}  // namespace allot::nettest
