// The health checks' timers (sdk/health_timers.h) on a real loop: due
// times on one grid, one wakeup for the timers due at a grid point,
// cancellation that is final.
#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "sdk/health_check.h"
#include "sdk/health_timers.h"

namespace allot {
namespace {

using namespace std::chrono_literals;

TEST(HealthTimers, TimersDueWithinAStepFireInOneWakeupNeverEarly) {
  asio::io_context io;
  TimePoint base = onHealthTimerGrid(SteadyClock::now() + 20ms, kHealthTimerSlack);
  std::vector<std::pair<int, TimePoint>> fired;
  std::vector<std::unique_ptr<HealthTimer>> timers;
  std::vector<TimePoint> due;
  for (int i = 0; i < 3; ++i) {
    timers.push_back(std::make_unique<HealthTimer>(io, [&fired, i] { fired.emplace_back(i, SteadyClock::now()); }));
    due.push_back(base + 1ns + i * (kHealthTimerSlack / 4));
    timers.back()->at(due.back());
  }
  EXPECT_EQ(io.run_one_for(2s), 1u);
  ASSERT_EQ(fired.size(), 3u) << "one completion of the loop for all three";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(fired[i].first, i) << "in the order they were set";
    EXPECT_GE(fired[i].second, due[i]) << i;
    EXPECT_FALSE(timers[i]->armed());
  }
  EXPECT_EQ(asio::use_service<HealthTimerService>(io).pointsInUse(), 0u);
}

TEST(HealthTimers, CancelledOrResetTimersDoNotFireThen) {
  asio::io_context io;
  int a = 0, b = 0;
  HealthTimer ta(io, [&a] { ++a; });
  HealthTimer tb(io, [&b] { ++b; });
  TimePoint now = SteadyClock::now();
  ta.at(now + 10ms);
  tb.at(now + 10ms);
  ta.cancel();
  tb.at(now + 60ms);  // replaces the earlier setting
  EXPECT_EQ(asio::use_service<HealthTimerService>(io).pointsInUse(), 1u) << "an emptied point goes";
  io.run_for(40ms);
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 0);
  EXPECT_TRUE(tb.armed());
  io.run_for(200ms);
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1) << "once";
}

// A callback may cancel or destroy timers due at the same point, or
// destroy its own.
TEST(HealthTimers, ACallbackMayCancelOthersOrDestroyItsOwn) {
  asio::io_context io;
  int others = 0;
  std::optional<HealthTimer> other;
  std::unique_ptr<HealthTimer> third;
  std::unique_ptr<HealthTimer> self;
  self = std::make_unique<HealthTimer>(io, [&] {
    other->cancel();
    third.reset();
    self.reset();
  });
  other.emplace(io, [&others] { ++others; });
  third = std::make_unique<HealthTimer>(io, [&others] { ++others; });
  TimePoint due = SteadyClock::now() + 10ms;
  self->at(due);
  other->at(due);
  third->at(due);
  io.run_for(100ms);
  EXPECT_EQ(self, nullptr);
  EXPECT_EQ(others, 0);
  EXPECT_EQ(asio::use_service<HealthTimerService>(io).pointsInUse(), 0u);
}

}  // namespace
}  // namespace allot
