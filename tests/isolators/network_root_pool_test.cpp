// Root tests of network/netns against the real kernel (fixture and what
// every test checks at its end: network_root_fixture.h): the warm pool of
// networks made ahead, and the egress rate limit (tbf; iperf3).
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "tests/common/test_ports.h"
#include "tests/common/test_util.h"
#include "tests/isolators/network_root_fixture.h"

namespace allot::nettest {
namespace {

TEST_F(NetworkRoot, WarmPoolMakesNetworksAheadAndRefillsAfterATake) {
  ASSERT_EQ(options_.warmPool, 4);
  ASSERT_TRUE(runUntil(io_, [&] { return bridgePorts().size() == 4; }, 20s)) << bridgePorts().size() << " made";
  auto warm = bridgePorts();
  allot::testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  Executor& a = start("a", "cpus:0.1;" + offeredPort(port), {port});
  ASSERT_TRUE(a.running);
  EXPECT_NE(std::find(warm.begin(), warm.end(), vethOf(a.address)), warm.end())
      << "a's network " << vethOf(a.address) << " was not one made ahead";
  EXPECT_TRUE(runUntil(io_, [&] { return bridgePorts().size() == 5; }, 20s)) << "the pool did not refill";
  auto answer = fetch("", "127.0.0.1", port);
  ASSERT_TRUE(answer.has_value()) << "a's offered port unreachable";
  EXPECT_EQ(answer->substr(0, a.address.size()), a.address);
}

TEST_F(NetworkRoot, WithoutAWarmPoolEachLaunchMakesItsOwnNetwork) {
  isolator_.reset();
  options_.warmPool = 0;
  makeIsolator();
  ASSERT_TRUE(isolator_->recover({}).ok());
  for (int i = 0; i < 5; ++i) io_.poll();
  EXPECT_TRUE(bridgePorts().empty());
  allot::testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  Executor& a = start("a", "cpus:0.1;" + offeredPort(port), {port});
  ASSERT_TRUE(a.running);
  EXPECT_EQ(bridgePorts(), std::vector<std::string>{vethOf(a.address)});
  EXPECT_TRUE(fetch("", "127.0.0.1", port).has_value());
}

// iperf3 -J: end.sum_received.bits_per_second.
double receivedBitsPerSecond(const std::string& json) {
  size_t at = json.find("\"sum_received\"");
  if (at == std::string::npos) return 0;
  at = json.find("\"bits_per_second\"", at);
  if (at == std::string::npos) return 0;
  return std::atof(json.c_str() + json.find(':', at) + 1);
}

TEST_F(NetworkRoot, EgressRateLimitHoldsAndUnlimitedIsFaster) {
  if (!haveTool("/usr/bin/iperf3")) GTEST_SKIP() << "needs iperf3 (Debian package iperf3)";
  constexpr double kMbit = 40;
  Executor& limited = start("limited", "cpus:0.1;net_mbps:" + std::to_string(kMbit), {31006});
  Executor& open = start("open", "cpus:0.1", {31007});
  makeOutside();
  std::string dir = workDir_ + "/outside";
  std::filesystem::create_directories(dir);
  spawnOutside({"/usr/bin/iperf3", "-s", "-p", "5201"}, dir);
  auto client = [&](const Executor& e) {
    std::string out = workDir_ + "/iperf-" + e.id.executorId + ".json";
    // Up to 10 tries while the server starts.
    for (int i = 0; i < 10; ++i) {
      std::string cmd = "nsenter --net=" + e.nsPath() + " /usr/bin/iperf3 -J -t 3 -O 1 -c " + outsidePeer_ +
                        " -p 5201 > " + out + " 2>&1";
      if (std::system(cmd.c_str()) == 0) {
        if (double bps = receivedBitsPerSecond(readFile(out)); bps > 0) return bps / 1e6;
      }
      usleep(300000);
    }
    ADD_FAILURE() << "iperf3 from " << e.id.executorId << ": " << readFile(out);
    return 0.0;
  };
  double limitedMbit = client(limited);
  double openMbit = client(open);
  std::printf("egress: limited %.1f Mbit/s (configured %.0f), unlimited %.1f Mbit/s, load %s", limitedMbit, kMbit,
              openMbit, readFile("/proc/loadavg").c_str());
  EXPECT_NEAR(limitedMbit, kMbit, kMbit * 0.10);
  EXPECT_GE(openMbit, 5 * kMbit);
}

TEST_F(NetworkRoot, PerExecutorRateOnAWarmNetworkReplacesTheDefault) {
  ASSERT_TRUE(runUntil(io_, [&] { return bridgePorts().size() == 4; }, 20s));
  Executor& a = start("a", "cpus:0.1;net_mbps:40", {31020});
  ASSERT_TRUE(a.running);
  std::string qdisc = capture("nsenter --net=" + a.nsPath() + " tc qdisc show dev eth0");
  EXPECT_NE(qdisc.find("tbf"), std::string::npos) << qdisc;
  EXPECT_NE(qdisc.find("rate 40Mbit"), std::string::npos) << qdisc;
  std::string state = readFile(options_.stateDir + "/" + a.id.name());
  EXPECT_NE(state.find("egress 40"), std::string::npos) << state;
}

}  // namespace
}  // namespace allot::nettest
