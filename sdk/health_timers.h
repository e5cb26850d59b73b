// The timers of every health check on one io_context (sdk/health_check.h):
// each due time is rounded up to the grid of kHealthTimerSlack, and one
// Asio timer stands for the earliest grid point; the timers due at a point
// fire in one wakeup of the loop, in the order they were set.
//
// An Asio timer per check costs each attempt a heap insertion, a
// cancellation that is itself a completion through the loop, and a wakeup
// of its own; here setting and cancelling a timer is a map insertion and
// erasure, and a cancelled timer never runs.
//
//   HealthTimer next(io, [this] { attempt(); });
//   next.at(SteadyClock::now() + interval);   // replaces any earlier setting
//   next.cancel();                            // it will not fire
//
// Thread: the io_context's. The io_context outlives its timers (as for an
// Asio timer). A timer's callback may destroy the timer.
#pragma once

#include <functional>
#include <map>

#include "base/asio.h"
#include "base/clock.h"

namespace allot {

class HealthTimerService;

class HealthTimer {
 public:
  HealthTimer(asio::io_context& io, std::function<void()> fired);
  ~HealthTimer() { cancel(); }
  HealthTimer(const HealthTimer&) = delete;
  HealthTimer& operator=(const HealthTimer&) = delete;

  // Fires at the first grid point at or after `due`.
  void at(TimePoint due);
  void cancel();
  bool armed() const { return armed_; }

 private:
  friend class HealthTimerService;
  HealthTimerService& service_;
  std::function<void()> fired_;
  std::multimap<TimePoint, HealthTimer*>::iterator slot_;
  bool armed_ = false;
};

class HealthTimerService final : public asio::execution_context::service {
 public:
  static inline asio::execution_context::id id;
  explicit HealthTimerService(asio::execution_context& context);

  // How many timers are set (each check has at most two).
  size_t armedCount() const { return slots_.size(); }

 private:
  friend class HealthTimer;
  void shutdown() override;
  void add(HealthTimer& timer, TimePoint due);
  void remove(HealthTimer& timer);
  void wait(TimePoint until);
  void fire();

  asio::steady_timer wakeup_;
  std::multimap<TimePoint, HealthTimer*> slots_;
  bool waiting_ = false;
  TimePoint waitingFor_;
};

}  // namespace allot
