#include "base/loop_stall_meter.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/log.h"

namespace allot {

using Clock = std::chrono::steady_clock;

LoopStallMeter::LoopStallMeter(asio::io_context& io, LoopStallMeterOptions options,
                               std::function<void(double)> onTick)
    : timer_(io), options_(options), onTick_(std::move(onTick)) {}

void LoopStallMeter::start() {
  if (running_) return;
  running_ = true;
  // thread-self: the loop's thread, which start() runs on.
  schedstat_ = UniqueFd(open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC));
  lastRunDelayNs_ = runDelayNs();
  due_ = Clock::now();
  arm();
}

void LoopStallMeter::stop() {
  running_ = false;
  timer_.cancel();
}

void LoopStallMeter::arm() {
  due_ += options_.period;
  timer_.expires_at(due_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && running_) tick();
  });
}

int64_t LoopStallMeter::runDelayNs() const {
  if (!schedstat_) return -1;
  char buf[128];
  ssize_t n = pread(schedstat_.get(), buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char* end = nullptr;
  std::strtoll(buf, &end, 10);  // run time
  if (end == buf) return -1;
  return std::strtoll(end, nullptr, 10);
}

void LoopStallMeter::Stats::record(double lateMs, double cpuWaitMs) {
  // The CPU wait counted spans the whole period, not only the lateness.
  if (cpuWaitMs > lateMs) cpuWaitMs = lateMs;
  ++ticks;
  if (lateMs > maxLateMs) {
    maxLateMs = lateMs;
    maxLateCpuWaitMs = cpuWaitMs;
  }
  if (lateMs - cpuWaitMs > maxOwnLateMs) maxOwnLateMs = lateMs - cpuWaitMs;
  lateOver1Ms += lateMs >= 1;
  lateOver10Ms += lateMs >= 10;
  lateOver100Ms += lateMs >= 100;
}

void LoopStallMeter::tick() {
  auto now = Clock::now();
  double lateMs = std::chrono::duration<double, std::milli>(now - due_).count();
  int64_t delay = runDelayNs();
  double cpuWaitMs = delay >= 0 && lastRunDelayNs_ >= 0 ? static_cast<double>(delay - lastRunDelayNs_) / 1e6 : 0;
  lastRunDelayNs_ = delay;
  stats_.record(lateMs, cpuWaitMs);
  lastCpuWaitMs_ = std::min(std::max(cpuWaitMs, 0.0), std::max(lateMs, 0.0));
  if (lateMs >= kLogAtMs && now - lastLog_ >= std::chrono::seconds(1)) {
    lastLog_ = now;
    LOG_WARNING("the loop ran " << lateMs << " ms late (" << cpuWaitMs << " ms of it waiting for a CPU)");
  }
  if (onTick_) onTick_(lateMs / 1000);
  // After a long stall, start again from now: no burst of catch-up ticks.
  if (lateMs > static_cast<double>(options_.period.count())) due_ = now;
  if (running_) arm();  // onTick may have stopped the meter
}

}  // namespace allot
