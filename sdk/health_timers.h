// The timers of every health check on one io_context (sdk/health_check.h):
// each due time is rounded up to the grid of kHealthTimerSlack, and one
// Asio timer stands for the earliest grid point; the timers due at a point
// fire in one wakeup of the loop, in the order they were set.
//
// An Asio timer per check costs each attempt a heap insertion, a
// cancellation that is itself a completion through the loop, and a wakeup
// of its own; here a grid point holds a list of the timers due then:
// setting a timer is a lookup of its point among the points in use and a
// link, cancelling it an unlink (the point goes when its list is empty),
// and a cancelled timer never runs. Nothing is allocated per timer.
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

#include <boost/intrusive/list.hpp>

#include "base/asio.h"
#include "base/clock.h"

namespace allot {

class HealthTimerService;

class HealthTimer
    : public boost::intrusive::list_base_hook<boost::intrusive::link_mode<boost::intrusive::auto_unlink>> {
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
  using List = boost::intrusive::list<HealthTimer, boost::intrusive::constant_time_size<false>>;
  HealthTimerService& service_;
  std::function<void()> fired_;
  // Its grid point's entry; none once the point is firing (it is then in
  // the firing list, which a cancel unlinks it from all the same).
  std::map<TimePoint, List>::iterator slot_;
  bool inSlot_ = false;
  bool armed_ = false;
};

class HealthTimerService final : public asio::execution_context::service {
 public:
  static inline asio::execution_context::id id;
  explicit HealthTimerService(asio::execution_context& context);

  // How many grid points have timers set (at most one per timer).
  size_t pointsInUse() const { return slots_.size(); }

 private:
  friend class HealthTimer;
  void shutdown() override;
  void add(HealthTimer& timer, TimePoint due);
  void remove(HealthTimer& timer);
  void wait(TimePoint until);
  void fire();

  asio::steady_timer wakeup_;
  std::map<TimePoint, HealthTimer::List> slots_;
  bool waiting_ = false;
  TimePoint waitingFor_;
};

}  // namespace allot
