#include "diag/loop_stall_meter.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "base/log.h"

namespace allot {

using Clock = std::chrono::steady_clock;

LoopStallMeter::LoopStallMeter(asio::io_context& io, LoopStallMeterOptions options,
                               std::function<void(double)> onTick)
    : timer_(io), options_(options), onTick_(std::move(onTick)), steal_(options_.procStat) {}

void LoopStallMeter::start() {
  if (running_) return;
  running_ = true;
  // thread-self: the loop's thread, which start() runs on.
  schedstat_ = UniqueFd(open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC));
  last_ = read();
  lastCpu_ = sched_getcpu();
  stealThenKnown_ = false;
  stealThenAt_ = {};  // the first tick takes the first snapshot
  due_ = Clock::now();
  lastTick_ = due_;
  resting_ = false;
  idleRun_ = 0;
  arm(options_.period);
}

void LoopStallMeter::stop() {
  running_ = false;
  timer_.cancel();
}

// A wait that a later arm() replaced does not tick, even when it had
// already expired and its handler was queued (cancel cannot stop that).
void LoopStallMeter::arm(std::chrono::milliseconds after) {
  due_ += after;
  timer_.expires_at(due_);
  timer_.async_wait([this, armed = ++armed_](const boost::system::error_code& ec) {
    if (!ec && running_ && armed == armed_) tick();
  });
}

void LoopStallMeter::unrest() {
  resting_ = false;
  idleRun_ = 0;
  if (!running_) return;
  due_ = Clock::now();
  arm(options_.period);
}

void LoopStallMeter::noteIdle(double lateMs, int64_t runNs) {
  if (options_.idlePeriod.count() <= 0) return;
  bool idle = runNs >= 0 && static_cast<double>(runNs) / 1e6 < kIdleRunMs && lateMs < 1;
  idleRun_ = idle ? idleRun_ + 1 : 0;
  resting_ = idleRun_ >= options_.idleTicks;
}

// Two reads per tick: schedstat's "run time, run delay, timeslices" (pread
// of a file opened once) and getrusage of this thread (no file).
LoopStallMeter::Counters LoopStallMeter::read() const {
  Counters c;
  if (schedstat_) {
    char buf[128];
    ssize_t n = pread(schedstat_.get(), buf, sizeof buf - 1, 0);
    if (n > 0) {
      buf[n] = '\0';
      char* end = nullptr;
      long long run = std::strtoll(buf, &end, 10);
      if (end != buf) {
        char* end2 = nullptr;
        long long delay = std::strtoll(end, &end2, 10);
        if (end2 != end) {
          c.runNs = run;
          c.runDelayNs = delay;
        }
      }
    }
  }
  rusage ru{};
  if (getrusage(RUSAGE_THREAD, &ru) == 0) {
    c.sleeps = ru.ru_nvcsw;
    c.majorFaults = ru.ru_majflt;
  }
  return c;
}

TickSplit TickSplit::of(double intervalMs, double cpuWaitMs, double onCpuMs, int64_t sleeps, int64_t majorFaults,
                        double hostStealMs, int stealCpu) {
  TickSplit t;
  t.intervalMs = std::max(intervalMs, 0.0);
  t.cpuWaitMs = std::clamp(cpuWaitMs, 0.0, t.intervalMs);
  t.onCpuMs = std::clamp(onCpuMs, 0.0, t.intervalMs - t.cpuWaitMs);
  t.offCpuMs = t.intervalMs - t.cpuWaitMs - t.onCpuMs;
  t.sleeps = sleeps > 0 ? static_cast<uint64_t>(sleeps) : 0;
  t.majorFaults = majorFaults > 0 ? static_cast<uint64_t>(majorFaults) : 0;
  t.hostStealMs = std::clamp(hostStealMs, 0.0, t.intervalMs);
  t.stealCpu = stealCpu;
  return t;
}

std::string TickSplit::describe() const {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(2);
  out << cpuWaitMs << " ms waiting for a CPU, " << onCpuMs << " ms running, " << offCpuMs
      << " ms off the CPU in " << sleeps << (sleeps == 1 ? " sleep" : " sleeps") << " and " << majorFaults
      << (majorFaults == 1 ? " major page fault" : " major page faults") << ", since the tick " << intervalMs
      << " ms before";
  if (stealCpu >= 0) out << "; host steal " << hostStealMs << " ms on cpu " << stealCpu;
  return out.str();
}

const char* TickSplit::untimedCause(double lateMs) const {
  if (lateMs <= 0) return "none";
  if (hostStealMs >= lateMs / 2) return "host steal";
  if (cpuWaitMs >= lateMs / 2) return "cpu wait";
  if (majorFaults > 0) return "page fault";
  if (offCpuMs >= lateMs / 2 && sleeps <= 1 && onCpuMs < 1) return "late wakeup";
  return "none";
}

double TickSplit::lessStealMs(double lateMs) const { return std::max(lateMs - hostStealMs, 0.0); }

void LoopStallMeter::Stats::record(double lateMs, double cpuWaitMs, const TickSplit& split) {
  // The CPU wait counted spans the whole period, not only the lateness.
  if (cpuWaitMs > lateMs) cpuWaitMs = lateMs;
  ++ticks;
  if (lateMs > maxLateMs) {
    maxLateMs = lateMs;
    maxLateCpuWaitMs = cpuWaitMs;
    maxLateSplit = split;
  }
  if (lateMs - cpuWaitMs > maxOwnLateMs) maxOwnLateMs = lateMs - cpuWaitMs;
  maxLessStealMs = std::max(maxLessStealMs, split.lessStealMs(lateMs));
  if (lateMs > 0) lateStealMs += std::min(split.hostStealMs, lateMs);
  lateOver1Ms += lateMs >= 1;
  lateOver10Ms += lateMs >= 10;
  lateOver100Ms += lateMs >= 100;
}

// One /proc/stat read for a late tick, and one every kStealSnapshotEvery
// for the snapshot it is compared with; none on the other ticks.
double LoopStallMeter::readSteal(Clock::time_point now, double lateMs, int cpu, int& stealCpu) {
  bool late = lateMs >= kLogAtMs;
  if (!late && now - stealThenAt_ < kStealSnapshotEvery) return 0;
  stealThenAt_ = now;
  if (auto st = steal_.read(stealNow_); !st) {
    // Counted; tried again at the next snapshot (or late tick), never a CHECK.
    if (stats_.stealReadErrors++ == 0) LOG_WARNING("the loop's steal meter: " << st.error().describe());
    stealThenKnown_ = false;
    return 0;
  }
  double stealMs = 0;
  if (late && stealThenKnown_) {
    for (int c : {lastCpu_, cpu}) {
      double ms = stealNow_.stealMsSince(stealThen_, c);
      if (c >= 0 && (stealCpu < 0 || ms > stealMs)) {
        stealMs = ms;
        stealCpu = c;
      }
    }
  }
  std::swap(stealThen_, stealNow_);
  stealThenKnown_ = true;
  return stealMs;
}

void LoopStallMeter::tick() {
  auto now = Clock::now();
  double lateMs = std::chrono::duration<double, std::milli>(now - due_).count();
  int cpu = sched_getcpu();
  int stealCpu = -1;
  double stealMs = readSteal(now, lateMs, cpu, stealCpu);
  lastCpu_ = cpu;
  Counters c = read();
  auto grew = [](int64_t now, int64_t before) { return now >= 0 && before >= 0 ? now - before : -1; };
  int64_t delayNs = grew(c.runDelayNs, last_.runDelayNs), runNs = grew(c.runNs, last_.runNs);
  double cpuWaitMs = delayNs >= 0 ? static_cast<double>(delayNs) / 1e6 : 0;
  lastSplit_ = TickSplit::of(std::chrono::duration<double, std::milli>(now - lastTick_).count(), cpuWaitMs,
                             runNs >= 0 ? static_cast<double>(runNs) / 1e6 : 0, grew(c.sleeps, last_.sleeps),
                             grew(c.majorFaults, last_.majorFaults), stealMs, stealCpu);
  last_ = c;
  lastTick_ = now;
  stats_.record(lateMs, cpuWaitMs, lastSplit_);
  lastCpuWaitMs_ = std::min(std::max(cpuWaitMs, 0.0), std::max(lateMs, 0.0));
  if (lateMs >= kLogAtMs && now - lastLog_ >= std::chrono::seconds(1)) {
    lastLog_ = now;
    // The tick's time on CLOCK_MONOTONIC (steady_clock's on Linux): what a
    // perf trace (-k CLOCK_MONOTONIC) or a steal timeline can be aligned to.
    char at[48];
    std::snprintf(at, sizeof at, "%.6f", std::chrono::duration<double>(now.time_since_epoch()).count());
    LOG_WARNING("the loop ran " << lateMs << " ms late (" << cpuWaitMs << " ms of it waiting for a CPU; "
                                << lastSplit_.describe() << "; tick at " << at << " s monotonic)");
  }
  noteIdle(lateMs, runNs);
  if (onTick_) onTick_(lateMs / 1000);
  // After a long stall, start again from now: no burst of catch-up ticks.
  if (lateMs > static_cast<double>(options_.period.count())) due_ = now;
  if (running_) arm(resting_ ? options_.idlePeriod : options_.period);  // onTick may have stopped the meter
}

}  // namespace allot
