// LoopStallMeter: how long the daemon's loop leaves due work waiting. A
// timer re-armed every `period` records how late each expiry ran: a handler
// that blocks the loop for S ms delays the next expiry by up to S ms, so the
// longest stall is at most maxLateMs + period (and at least maxLateMs).
// Each lateness is split by the thread's schedstat run_delay (time spent
// runnable but waiting for a CPU, /proc/thread-self/schedstat): the part the
// machine's other load cost, against the part allot's own code blocked for.
//
//   LoopStallMeter meter(io, {.period = 5ms}, [&](double lateS) { ... });
//   meter.start();  ...  meter.stats().maxLateMs
//
// onTick gets every expiry's lateness in seconds (for a histogram). A
// lateness of kLogAtMs or more is logged, at most once a second.
// Thread: the loop's thread (construct, start, stop, stats).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "base/asio.h"
#include "base/unique_fd.h"

namespace allot {

struct LoopStallMeterOptions {
  std::chrono::milliseconds period{5};
};

class LoopStallMeter {
 public:
  static constexpr double kLogAtMs = 10;

  struct Stats {
    uint64_t ticks = 0;
    double maxLateMs = 0;        // the longest lateness seen
    double maxLateCpuWaitMs = 0; // of that one, time spent waiting for a CPU
    double maxOwnLateMs = 0;     // the longest lateness minus its CPU wait
    uint64_t lateOver1Ms = 0, lateOver10Ms = 0, lateOver100Ms = 0;

    // Counts one expiry that ran `lateMs` late, of which `cpuWaitMs` (the
    // thread's run_delay growth since the previous expiry, so possibly more
    // than the lateness: capped at it) went to waiting for a CPU.
    void record(double lateMs, double cpuWaitMs);
  };

  LoopStallMeter(asio::io_context& io, LoopStallMeterOptions options, std::function<void(double)> onTick = {});
  LoopStallMeter(const LoopStallMeter&) = delete;
  LoopStallMeter& operator=(const LoopStallMeter&) = delete;

  void start();
  void stop();
  const Stats& stats() const { return stats_; }
  // Of the tick onTick is being told about (stats().ticks is its number,
  // 1 for the first): the time its thread spent waiting for a CPU since
  // the tick before, capped at the tick's lateness, in ms. A handler that
  // runs on (or blocks) the loop shows as lateness without CPU wait.
  double lastCpuWaitMs() const { return lastCpuWaitMs_; }
  std::chrono::milliseconds period() const { return options_.period; }

 private:
  void arm();
  void tick();
  int64_t runDelayNs() const;  // -1 when unknown (no CONFIG_SCHED_INFO)

  asio::steady_timer timer_;
  LoopStallMeterOptions options_;
  std::function<void(double)> onTick_;
  UniqueFd schedstat_;
  std::chrono::steady_clock::time_point due_;
  int64_t lastRunDelayNs_ = -1;
  double lastCpuWaitMs_ = 0;
  std::chrono::steady_clock::time_point lastLog_;
  bool running_ = false;
  Stats stats_;
};

}  // namespace allot
