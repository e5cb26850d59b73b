// Clock: the one source of "now" for logic that has timeouts (offer timeouts,
// refusal filters, heartbeats). Daemons use SystemClock; unit tests use
// FakeClock and advance it by hand, so they are deterministic.
#pragma once

#include <chrono>

namespace allot {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;
using Duration = SteadyClock::duration;
using Millis = std::chrono::milliseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint now() const override { return SteadyClock::now(); }
};

class FakeClock final : public Clock {
 public:
  TimePoint now() const override { return now_; }
  void advance(Duration d) { now_ += d; }

 private:
  TimePoint now_{std::chrono::hours(1)};
};

// Wall-clock time as seconds since the epoch (status timestamps).
inline double wallClockSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline Duration secondsToDuration(double seconds) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}

}  // namespace allot
