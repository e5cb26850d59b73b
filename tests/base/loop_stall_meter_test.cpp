// LoopStallMeter on a real io_context: a handler that blocks the loop shows
// as lateness at least as long as the block (minus one period), counted as
// the loop's own (the thread slept: it was not waiting for a CPU).
#include "base/loop_stall_meter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace allot {
namespace {

using namespace std::chrono_literals;

TEST(LoopStallMeter, ABlockingHandlerShowsAsLateness) {
  asio::io_context io;
  int ticks = 0;
  LoopStallMeter meter(io, {.period = 5ms}, [&](double) { ++ticks; });
  meter.start();
  asio::steady_timer block(io), end(io);
  block.expires_after(20ms);
  block.async_wait([](const boost::system::error_code&) { std::this_thread::sleep_for(40ms); });
  end.expires_after(150ms);
  end.async_wait([&](const boost::system::error_code&) { meter.stop(); });
  io.run();
  const auto& s = meter.stats();
  EXPECT_EQ(s.ticks, static_cast<uint64_t>(ticks));
  EXPECT_GE(s.maxLateMs, 35.0) << "a 40 ms block, 5 ms period";
  EXPECT_GE(s.lateOver10Ms, 1u);
  EXPECT_GE(s.maxOwnLateMs, 20.0) << "sleeping is not waiting for a CPU";
  EXPECT_LE(s.maxLateCpuWaitMs, s.maxLateMs);
}

TEST(LoopStallMeter, StopsTickingWhenStopped) {
  asio::io_context io;
  LoopStallMeter meter(io, {.period = 1ms});
  meter.start();
  asio::steady_timer end(io);
  end.expires_after(30ms);
  end.async_wait([&](const boost::system::error_code&) { meter.stop(); });
  io.run();  // returns: nothing re-arms after stop()
  EXPECT_GT(meter.stats().ticks, 0u);
}

}  // namespace
}  // namespace allot
