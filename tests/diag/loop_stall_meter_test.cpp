// LoopStallMeter. Its arithmetic (Stats::record) with given latenesses and
// CPU waits; on a real io_context, only what holds on any machine however
// loaded: a handler that blocks the loop for 40 ms makes the next tick at
// least 35 ms late (5 ms period), and nothing ticks after stop(). How much
// of a lateness the schedstat split attributes to the loop itself depends
// on the machine's load, so no test here asserts it; what the kernel's
// accounts say of a loop that sleeps against one that computes (TickSplit)
// holds on any machine.
#include "diag/loop_stall_meter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

namespace allot {
namespace {

using namespace std::chrono_literals;

TEST(LoopStallMeterStats, SplitsLatenessIntoCpuWaitAndOwnTime) {
  LoopStallMeter::Stats s;
  s.record(0.5, 0.2);
  s.record(40, 5);    // the loop's own 35 ms
  s.record(12, 30);   // a CPU wait longer than the lateness counts as all of it
  s.record(150, 140);
  EXPECT_EQ(s.ticks, 4u);
  EXPECT_DOUBLE_EQ(s.maxLateMs, 150);
  EXPECT_DOUBLE_EQ(s.maxLateCpuWaitMs, 140);
  EXPECT_DOUBLE_EQ(s.maxOwnLateMs, 35);
  EXPECT_EQ(s.lateOver1Ms, 3u);
  EXPECT_EQ(s.lateOver10Ms, 3u);
  EXPECT_EQ(s.lateOver100Ms, 1u);
}

TEST(LoopStallMeterStats, BoundariesCountAsLate) {
  LoopStallMeter::Stats s;
  s.record(1, 0);
  s.record(10, 10);
  s.record(100, 0);
  EXPECT_EQ(s.lateOver1Ms, 3u);
  EXPECT_EQ(s.lateOver10Ms, 2u);
  EXPECT_EQ(s.lateOver100Ms, 1u);
  EXPECT_DOUBLE_EQ(s.maxOwnLateMs, 100);
}

TEST(TickSplit, TheRestOfTheIntervalIsOffTheCpu) {
  TickSplit t = TickSplit::of(20, 2, 3, 1, 0);
  EXPECT_DOUBLE_EQ(t.offCpuMs, 15);
  EXPECT_EQ(t.sleeps, 1u);
  // Counters that overshoot the interval (read at slightly different times)
  // are capped; unknown ones (-1) count as none.
  t = TickSplit::of(10, 8, 5, -1, -1);
  EXPECT_DOUBLE_EQ(t.cpuWaitMs, 8);
  EXPECT_DOUBLE_EQ(t.onCpuMs, 2);
  EXPECT_DOUBLE_EQ(t.offCpuMs, 0);
  EXPECT_EQ(t.sleeps, 0u);
  EXPECT_EQ(t.majorFaults, 0u);
  EXPECT_EQ(TickSplit::of(17, 0.04, 0.2, 1, 0).describe(),
            "0.04 ms waiting for a CPU, 0.20 ms running, 16.76 ms off the CPU in 1 sleep and 0 major page "
            "faults, since the tick 17.00 ms before");
}

TEST(TickSplit, NamesTheCauseOfAnUntimedLateTick) {
  // 12.8 ms late, 0.04 waiting, in one sleep: the idle wait woken late.
  EXPECT_STREQ(TickSplit::of(17.8, 0.04, 0.2, 1, 0).untimedCause(12.8), "late wakeup");
  EXPECT_STREQ(TickSplit::of(15, 9.4, 0.5, 1, 0).untimedCause(10.1), "cpu wait");
  EXPECT_STREQ(TickSplit::of(17, 0.1, 0.3, 2, 1).untimedCause(12), "page fault");
  // Two sleeps: the loop also slept in a call of its own.
  EXPECT_STREQ(TickSplit::of(17, 0.1, 0.3, 2, 0).untimedCause(12), "none");
  // Mostly running: untimed work.
  EXPECT_STREQ(TickSplit::of(17, 0.1, 14, 1, 0).untimedCause(12), "none");
}

TEST(TickSplit, HostStealExplainsATickItCoversHalfOf) {
  // A 94.2 ms tick seen in a hog run: 33.5 ms runnable on
  // an idle vCPU, then asleep in the idle wait past a late timer; with 60 ms
  // of the host's steal on its CPU, the host's.
  TickSplit t = TickSplit::of(99, 33.5, 0.2, 1, 0, 60, 0);
  EXPECT_STREQ(t.untimedCause(94.2), "host steal");
  EXPECT_NEAR(t.lessStealMs(94.2), 34.2, 1e-9);
  // Steal under half the lateness leaves the other causes.
  EXPECT_STREQ(TickSplit::of(99, 33.5, 0.2, 1, 0, 40, 0).untimedCause(94.2), "late wakeup");
  EXPECT_STREQ(TickSplit::of(15, 9.4, 0.5, 1, 0, 4, 1).untimedCause(10.1), "cpu wait");
  EXPECT_STREQ(TickSplit::of(17, 0.1, 0.3, 2, 1, 6, 1).untimedCause(12), "host steal");
  // Steal is capped at the interval; the lateness less it never below 0.
  TickSplit capped = TickSplit::of(12, 0, 0, 0, 0, 30, 1);
  EXPECT_DOUBLE_EQ(capped.hostStealMs, 12);
  EXPECT_DOUBLE_EQ(TickSplit::of(30, 0, 0, 0, 0, 30, 1).lessStealMs(20), 0);
  EXPECT_DOUBLE_EQ(TickSplit::of(30, 0, 0, 0, 0, -5, 1).hostStealMs, 0);
  EXPECT_EQ(TickSplit::of(17, 0.04, 0.2, 1, 0, 10, 1).describe(),
            "0.04 ms waiting for a CPU, 0.20 ms running, 16.76 ms off the CPU in 1 sleep and 0 major page "
            "faults, since the tick 17.00 ms before; host steal 10.00 ms on cpu 1");
}

TEST(LoopStallMeterStats, TakesTheHostsStealOffTheLongestLateness) {
  LoopStallMeter::Stats s;
  s.record(94.2, 33.5, TickSplit::of(99, 33.5, 0.2, 1, 0, 60, 0));
  s.record(12.8, 0.04, TickSplit::of(17.8, 0.04, 0.2, 1, 0, 0, 1));
  s.record(3, 0, TickSplit::of(8, 0, 1, 1, 0));
  EXPECT_DOUBLE_EQ(s.maxLateMs, 94.2);
  EXPECT_NEAR(s.maxLessStealMs, 34.2, 1e-9);
  EXPECT_DOUBLE_EQ(s.lateStealMs, 60);
  // Steal beyond a tick's lateness is not counted as its.
  s.record(11, 0, TickSplit::of(40, 0, 0, 1, 0, 30, 0));
  EXPECT_DOUBLE_EQ(s.lateStealMs, 71);
}

// What the meter saw of one handler run on the loop 20 ms after it started:
// the first tick after the handler (its lateness, CPU wait and split), and
// the meter's statistics over the whole run.
struct AfterHandler {
  double lateMs = -1;
  double cpuWaitMs = -1;
  TickSplit split;
  LoopStallMeter::Stats stats;
  int ticks = 0;
};

template <typename Handler>
AfterHandler runAfter(Handler handler, LoopStallMeterOptions options = {.period = 5ms}) {
  asio::io_context io;
  bool done = false;
  AfterHandler out;
  LoopStallMeter* m = nullptr;
  // The first tick after the handler ends the run: a tick was due within
  // one period of the handler's start, and ran after it.
  LoopStallMeter meter(io, options, [&](double lateS) {
    ++out.ticks;
    if (!done) return;
    out.split = m->lastSplit();
    out.cpuWaitMs = m->lastCpuWaitMs();
    out.lateMs = lateS * 1000;
    m->stop();
  });
  m = &meter;
  meter.start();
  asio::steady_timer at(io);
  at.expires_after(20ms);
  at.async_wait([&](const boost::system::error_code&) {
    handler();
    done = true;
  });
  io.run();  // returns once stopped: nothing else is pending
  out.stats = meter.stats();
  return out;
}

TEST(LoopStallMeter, ABlockingHandlerShowsAsLateness) {
  AfterHandler run = runAfter([] { std::this_thread::sleep_for(40ms); });
  const auto& s = run.stats;
  EXPECT_EQ(s.ticks, static_cast<uint64_t>(run.ticks));
  EXPECT_GE(run.lateMs, 35.0) << "a 40 ms block, 5 ms period";
  EXPECT_GE(s.maxLateMs, 35.0);
  EXPECT_GE(s.lateOver10Ms, 1u);
  EXPECT_LE(s.maxLateCpuWaitMs, s.maxLateMs);
  // The 40 ms asleep were not spent waiting for a CPU, however loaded the
  // machine: since the tick before (at most one 5 ms period before the
  // due time), the thread waited for a CPU at most lateness - 35 ms.
  EXPECT_GE(run.cpuWaitMs, 0.0);
  EXPECT_LE(run.cpuWaitMs, run.lateMs);
  EXPECT_GE(run.lateMs - run.cpuWaitMs, 34.0);
}

// A handler that sleeps blocks the loop off the CPU; one that computes
// keeps it on the CPU (or waiting for one, on a loaded machine). Whatever
// the load, the kernel's accounts tell the two apart.
TEST(LoopStallMeter, SplitsABlockedLoopFromABusyOne) {
  AfterHandler slept = runAfter([] { std::this_thread::sleep_for(40ms); });
  const TickSplit& asleep = slept.split;
  EXPECT_GE(slept.lateMs, 35.0);
  EXPECT_GE(asleep.intervalMs, 40.0);
  EXPECT_GE(asleep.offCpuMs, 39.0) << asleep.describe();
  EXPECT_GE(asleep.sleeps, 1u) << asleep.describe();

  AfterHandler spun = runAfter([] {
    auto end = std::chrono::steady_clock::now() + 40ms;
    volatile uint64_t spin = 0;
    while (std::chrono::steady_clock::now() < end) spin = spin + 1;
  });
  const TickSplit& busy = spun.split;
  EXPECT_GE(spun.lateMs, 35.0);
  // Up to one scheduler tick (4 ms at HZ 250) of the current run is not yet
  // in schedstat's run time when the loop reads it, and the loop may have
  // slept up to a period (5 ms) before the handler ran.
  EXPECT_GE(busy.onCpuMs + busy.cpuWaitMs, 40.0 - 4 - 1) << busy.describe();
  EXPECT_LE(busy.offCpuMs, busy.intervalMs - 35) << busy.describe();
}

// The steal the meter reads comes from the file it is given: a made-up
// /proc/stat whose every CPU gains 3 ticks of steal while a handler blocks
// the loop for 40 ms. The late tick gets them, on the CPU the loop ran on.
TEST(LoopStallMeter, ALateTickGetsTheHostsStealOnItsCpu) {
  std::string path = ::testing::TempDir() + "loop_stall_meter_test_stat";
  auto write = [&](int steal) {
    std::ofstream out(path, std::ios::trunc);
    out << "cpu  0 0 0 0 0 0 0 0 0 0\n";
    for (int cpu = 0; cpu < 8; ++cpu) out << "cpu" << cpu << " 1 2 3 4 5 6 7 " << steal << " 0 0\n";
  };
  write(100);
  AfterHandler run = runAfter(
      [&] {
        write(103);
        std::this_thread::sleep_for(40ms);
      },
      {.period = 5ms, .procStat = path});
  std::remove(path.c_str());
  EXPECT_GE(run.lateMs, 35.0);
  EXPECT_DOUBLE_EQ(run.split.hostStealMs, 3 * CpuSteal::tickMs()) << run.split.describe();
  EXPECT_GE(run.split.stealCpu, 0);
  EXPECT_STREQ(run.split.untimedCause(run.lateMs), "host steal") << run.split.describe();
  EXPECT_NEAR(run.stats.maxLessStealMs, run.lateMs - 3 * CpuSteal::tickMs(), 1e-6);
  EXPECT_EQ(run.stats.stealReadErrors, 0u);
}

TEST(LoopStallMeter, AMalformedProcStatIsCountedAndTheMeterGoesOn) {
  std::string path = ::testing::TempDir() + "loop_stall_meter_test_bad_stat";
  std::ofstream(path, std::ios::trunc) << "cpu0 1 2 3\n";
  AfterHandler run = runAfter([] { std::this_thread::sleep_for(40ms); }, {.period = 5ms, .procStat = path});
  std::remove(path.c_str());
  EXPECT_GE(run.lateMs, 35.0);
  EXPECT_GE(run.stats.stealReadErrors, 2u) << "the first snapshot and the late tick";
  EXPECT_EQ(run.split.stealCpu, -1);
  EXPECT_DOUBLE_EQ(run.split.hostStealMs, 0);
  EXPECT_STRNE(run.split.untimedCause(run.lateMs), "host steal");
}

TEST(LoopStallMeter, StopsTickingWhenStopped) {
  asio::io_context io;
  LoopStallMeter* m = nullptr;
  int ticks = 0;
  LoopStallMeter meter(io, {.period = 1ms}, [&](double) {
    if (++ticks == 3) m->stop();
  });
  m = &meter;
  meter.start();
  io.run();  // returns: nothing re-arms after stop()
  EXPECT_EQ(meter.stats().ticks, 3u);
  EXPECT_EQ(ticks, 3);
}

// Resting: an idle loop's meter ticks every idlePeriod after idleTicks
// idle ticks, and wake() brings the period back at once. Counts, not
// times: a loaded machine makes ticks later, never more frequent (a tick
// that finds the loop busy there takes the meter back to its period for a
// few ticks only).
TEST(LoopStallMeter, AnIdleLoopRestsAndAWakeBringsThePeriodBack) {
  asio::io_context io;
  LoopStallMeter meter(io, {.period = 5ms, .idlePeriod = 1000ms, .idleTicks = 4});
  meter.start();
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!meter.resting() && std::chrono::steady_clock::now() < deadline) io.run_for(10ms);
  ASSERT_TRUE(meter.resting()) << "an idle loop's meter never rested";
  uint64_t atRest = meter.stats().ticks;
  io.run_for(500ms);
  // At most one resting tick; at 5 ms, ~100.
  EXPECT_LE(meter.stats().ticks - atRest, 30u);
  // Woken: the next tick 5 ms away, not up to a second.
  meter.wake();
  EXPECT_FALSE(meter.resting());
  uint64_t woken = meter.stats().ticks;
  io.run_for(100ms);
  EXPECT_GE(meter.stats().ticks - woken, 1u);
  meter.stop();
}

// A handler that wakes the resting meter and then blocks 40 ms is measured
// as when the meter never rested (a timed section of the agent's wakes it).
TEST(LoopStallMeter, AStallRightAfterAWakeIsMeasured) {
  asio::io_context io;
  LoopStallMeter meter(io, {.period = 5ms, .idlePeriod = 1000ms, .idleTicks = 2});
  meter.start();
  io.run_for(100ms);
  ASSERT_TRUE(meter.resting());
  asio::post(io, [&] {
    meter.wake();
    std::this_thread::sleep_for(40ms);
  });
  io.run_for(80ms);
  EXPECT_GE(meter.stats().maxLateMs, 35.0) << "a 40 ms block, 5 ms period after the wake";
  meter.stop();
}

// Busy ticks (the loop ran more than kIdleRunMs between them) never rest;
// without an idle period the meter never rests.
TEST(LoopStallMeter, ABusyLoopDoesNotRestNorOneWithoutAnIdlePeriod) {
  asio::io_context io;
  LoopStallMeter busy(io, {.period = 5ms, .idlePeriod = 200ms, .idleTicks = 4});
  LoopStallMeter plain(io, {.period = 5ms});
  busy.start();
  plain.start();
  asio::steady_timer work(io);
  bool resting = false;
  std::function<void()> spin = [&] {
    auto end = std::chrono::steady_clock::now() + 1ms;
    volatile uint64_t n = 0;
    while (std::chrono::steady_clock::now() < end) n = n + 1;
    resting = resting || busy.resting();
    work.expires_after(2ms);
    work.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) spin();
    });
  };
  spin();
  io.run_for(200ms);
  EXPECT_FALSE(resting);
  work.cancel();
  busy.stop();
  uint64_t before = plain.stats().ticks;
  io.run_for(300ms);  // idle now: the meter without an idle period ticks on
  EXPECT_FALSE(plain.resting());
  EXPECT_GE(plain.stats().ticks - before, 10u) << "~60 at 5 ms";
  plain.stop();
}

}  // namespace
}  // namespace allot
