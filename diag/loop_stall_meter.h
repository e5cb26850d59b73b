// LoopStallMeter: how long the daemon's loop leaves due work waiting. A
// timer re-armed every `period` records how late each expiry ran: a handler
// that blocks the loop for S ms delays the next expiry by up to S ms, so the
// longest stall is at most maxLateMs + period (and at least maxLateMs).
// Each lateness is split by the thread's schedstat run_delay (time spent
// runnable but waiting for a CPU, /proc/thread-self/schedstat): the part the
// machine's other load cost, against the part allot's own code blocked for.
// The interval since the previous tick is also split three ways (TickSplit):
// waiting for a CPU, running (schedstat's run time), and off the CPU, not
// runnable, with the voluntary sleeps and major page faults that put it
// there (getrusage(RUSAGE_THREAD)). A late tick whose interval was mostly
// off the CPU in one sleep was the loop's idle wait woken late (its timer's
// interrupt came late: a virtual machine's timer, a host's steal), not a
// call of allot's that blocked (that is a second sleep, or a fault).
// On a virtual machine the host may not run a vCPU when the guest wants it:
// a late tick also gets the host's steal time on the CPU the loop ran on at
// the tick before and at this one (diag/cpu_steal.h: /proc/stat, USER_HZ
// ticks), read only for a tick kLogAtMs late or more against a snapshot
// taken at most kStealSnapshotEvery before (so up to that much steal from
// before the interval can be counted; capped at the lateness).
//
//   LoopStallMeter meter(io, {.period = 5ms}, [&](double lateS) { ... });
//   meter.start();  ...  meter.stats().maxLateMs
//
// Resting (options.idlePeriod > 0): after idleTicks ticks in a row that
// found the loop idle (under kIdleRunMs of the thread's running per tick,
// none 1 ms late), the meter ticks only every idlePeriod, so that an idle
// daemon is not woken 200 times a second for nothing (the agent's idle CPU:
// 1.1 % of a core with the 5 ms tick); wake() (the daemon's handlers start:
// LoopSections::onOutermostStart) brings the period back at once, so a
// stall in a timed handler is measured as before. One in untimed work that
// starts while the meter rests shows only if it outlasts the next resting
// tick's due time.
//
// onTick gets every expiry's lateness in seconds (for a histogram). A
// lateness of kLogAtMs or more is logged, at most once a second, with the
// tick's CLOCK_MONOTONIC time ("tick at 78087.517612 s monotonic").
// Thread: the loop's thread (construct, start, stop, stats).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "base/asio.h"
#include "diag/cpu_steal.h"
#include "base/unique_fd.h"

namespace allot {

struct LoopStallMeterOptions {
  std::chrono::milliseconds period{5};
  std::string procStat = "/proc/stat";  // where the host's steal is read (CpuSteal)
  std::chrono::milliseconds idlePeriod{0};  // resting period; 0: never rests
  int idleTicks = 4;                        // idle ticks in a row before resting
};

// The loop thread's time between two ticks (intervalMs: from the previous
// tick to this one), as the kernel accounted it.
struct TickSplit {
  double intervalMs = 0;
  double cpuWaitMs = 0;      // runnable, waiting for a CPU (schedstat run_delay)
  double onCpuMs = 0;        // running (schedstat run time)
  double offCpuMs = 0;       // neither: asleep or blocked (the rest of the interval)
  uint64_t sleeps = 0;       // voluntary context switches (ru_nvcsw)
  uint64_t majorFaults = 0;  // page faults that waited for I/O (ru_majflt)
  // The host's steal on the loop's CPUs (the larger of the CPU at the tick
  // before and at this one) since the last steal snapshot, capped at the
  // interval; 0 when not read (a tick under kLogAtMs late) or unknown.
  double hostStealMs = 0;
  int stealCpu = -1;         // the CPU that steal was on (-1: not read)

  // From the counters' growth over the interval; negative growth (unknown
  // counters) counts as none, and the off-CPU rest is never negative.
  static TickSplit of(double intervalMs, double cpuWaitMs, double onCpuMs, int64_t sleeps, int64_t majorFaults,
                      double hostStealMs = 0, int stealCpu = -1);
  // "2.1 ms waiting for a CPU, 0.3 ms running, 14.6 ms off the CPU in 1
  // sleep and 0 major page faults, since the tick 17.0 ms before" and, when
  // steal was read, "; host steal 10.00 ms on cpu 0"
  std::string describe() const;
  // What made a tick `lateMs` late when none of the loop's timed sections
  // ran since the tick before (LoopSections): "host steal" (the host's
  // steal on the loop's CPU at least half of the lateness: the vCPU did not
  // run, whether the loop waited for it or slept through its late timer),
  // "cpu wait" (at least half of the lateness waiting for a CPU), "page fault" (a major fault), "late
  // wakeup" (at least half of it off the CPU in at most one sleep with
  // under 1 ms running: the loop's idle wait, woken late: its timer's
  // interrupt came late), or "none" (untimed work or a call that blocked).
  const char* untimedCause(double lateMs) const;
  // The lateness with the host's steal taken off (never below 0).
  double lessStealMs(double lateMs) const;
};

class LoopStallMeter {
 public:
  static constexpr double kLogAtMs = 10;
  // Steal is read on a tick kLogAtMs late or more, and at least this often
  // for the snapshot it is compared with (one /proc/stat read: ~33 us).
  static constexpr std::chrono::milliseconds kStealSnapshotEvery{100};

  struct Stats {
    uint64_t ticks = 0;
    double maxLateMs = 0;        // the longest lateness seen
    double maxLateCpuWaitMs = 0; // of that one, time spent waiting for a CPU
    double maxOwnLateMs = 0;     // the longest lateness minus its CPU wait
    TickSplit maxLateSplit;      // of the longest lateness: its interval's split
    double maxLessStealMs = 0;   // the longest lateness minus its host steal
    double lateStealMs = 0;      // host steal summed over ticks kLogAtMs late or more (each capped at its lateness)
    uint64_t stealReadErrors = 0;  // /proc/stat not readable or malformed
    uint64_t lateOver1Ms = 0, lateOver10Ms = 0, lateOver100Ms = 0;

    // Counts one expiry that ran `lateMs` late, of which `cpuWaitMs` (the
    // thread's run_delay growth since the previous expiry, so possibly more
    // than the lateness: capped at it) went to waiting for a CPU.
    // `split` is the interval's, kept when this is the longest lateness.
    void record(double lateMs, double cpuWaitMs, const TickSplit& split = {});
  };

  LoopStallMeter(asio::io_context& io, LoopStallMeterOptions options, std::function<void(double)> onTick = {});
  LoopStallMeter(const LoopStallMeter&) = delete;
  LoopStallMeter& operator=(const LoopStallMeter&) = delete;

  // A tick's interval with less running than this (the tick's own work
  // included) found the loop idle.
  static constexpr double kIdleRunMs = 0.25;

  void start();
  void stop();
  // The loop has work: a resting meter ticks every `period` again, the
  // next tick `period` from now. Cheap when not resting.
  void wake() {
    if (resting_) unrest();
  }
  bool resting() const { return resting_; }
  const Stats& stats() const { return stats_; }
  // Of the tick onTick is being told about (stats().ticks is its number,
  // 1 for the first): the time its thread spent waiting for a CPU since
  // the tick before, capped at the tick's lateness, in ms. A handler that
  // runs on (or blocks) the loop shows as lateness without CPU wait.
  double lastCpuWaitMs() const { return lastCpuWaitMs_; }
  // Of the same tick: the interval since the tick before, split.
  const TickSplit& lastSplit() const { return lastSplit_; }
  std::chrono::milliseconds period() const { return options_.period; }

 private:
  // The next tick `after` past the last due time.
  void arm(std::chrono::milliseconds after);
  void tick();
  void unrest();
  // Counts an idle tick (or not) and rests after idleTicks in a row.
  void noteIdle(double lateMs, int64_t runNs);
  struct Counters {
    int64_t runNs = -1, runDelayNs = -1;  // -1 when unknown (no CONFIG_SCHED_INFO)
    int64_t sleeps = -1, majorFaults = -1;
  };
  Counters read() const;
  // Host steal for a tick `lateMs` late on `cpu` (see TickSplit::hostStealMs);
  // refreshes the snapshot when due. Sets `stealCpu`.
  double readSteal(std::chrono::steady_clock::time_point now, double lateMs, int cpu, int& stealCpu);

  asio::steady_timer timer_;
  LoopStallMeterOptions options_;
  std::function<void(double)> onTick_;
  UniqueFd schedstat_;
  CpuSteal steal_;
  CpuSteal::Sample stealThen_, stealNow_;
  std::chrono::steady_clock::time_point stealThenAt_;
  bool stealThenKnown_ = false;
  int lastCpu_ = -1;
  std::chrono::steady_clock::time_point due_;
  Counters last_;
  std::chrono::steady_clock::time_point lastTick_;
  double lastCpuWaitMs_ = 0;
  TickSplit lastSplit_;
  std::chrono::steady_clock::time_point lastLog_;
  bool running_ = false;
  bool resting_ = false;
  int idleRun_ = 0;        // idle ticks in a row
  uint64_t armed_ = 0;     // the wait a tick must come from (wake() re-arms)
  Stats stats_;
};

}  // namespace allot
