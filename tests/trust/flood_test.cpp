// No peer starves another: while one connection floods a real master with
// registrations and reconciles, a second framework's reconciles are each
// answered within 100 ms (the master handles at most kMaxFramesPerPass
// frames of a connection per pass of its loop). The p99 against no flood
// in the same run: bench/trust/flood_bench.cpp.
#include <gtest/gtest.h>

#include <thread>

#include "tests/agent/cluster.h"
#include "tests/common/flood.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::Cluster;
using testing::Flood;
using testing::ReconcileProbe;

constexpr double kAnswerWithinMs = 100;
constexpr int kProbes = 50;

TEST(Flood, AnotherFrameworksReconcilesAreAnsweredWithin100MsDuringARegistrationFlood) {
  Cluster cluster;
  if (auto why = cluster.missing(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(cluster.startMaster()) << cluster.masterLog();
  ReconcileProbe probe(cluster.masterPort());
  ASSERT_TRUE(probe.registered()) << cluster.masterLog();
  Flood flood(cluster.masterPort(), Flood::Kind::kRegistrations);
  ASSERT_TRUE(flood.start()) << cluster.masterLog();
  // The flood is on: the master is handling the flooder's frames.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (flood.answers() < 1000 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  ASSERT_GE(flood.answers(), 1000u) << "the flood did not get going";
  uint64_t before = flood.answers();
  for (int i = 0; i < kProbes; ++i) {
    auto ms = probe.roundTripMs();
    ASSERT_TRUE(ms.has_value()) << "probe " << i << " got no answer";
    EXPECT_LT(*ms, kAnswerWithinMs) << "probe " << i;
    std::this_thread::sleep_for(10ms);
  }
  uint64_t during = flood.answers() - before;
  flood.stop();
  EXPECT_GE(during, 1000u) << "the flood stalled while the probes ran: nothing was measured";
  EXPECT_EQ(kill(cluster.masterProcess().pid(), 0), 0) << cluster.masterLog();
}

}  // namespace
}  // namespace allot
