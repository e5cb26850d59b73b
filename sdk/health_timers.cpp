#include "sdk/health_timers.h"

#include "sdk/health_check.h"

namespace allot {

HealthTimer::HealthTimer(asio::io_context& io, std::function<void()> fired)
    : service_(asio::use_service<HealthTimerService>(io)), fired_(std::move(fired)) {}

void HealthTimer::at(TimePoint due) {
  cancel();
  service_.add(*this, onHealthTimerGrid(due, kHealthTimerSlack));
}

void HealthTimer::cancel() {
  if (armed_) service_.remove(*this);
}

HealthTimerService::HealthTimerService(asio::execution_context& context)
    : asio::execution_context::service(context), wakeup_(static_cast<asio::io_context&>(context)) {}

void HealthTimerService::shutdown() {
  for (auto& [due, list] : slots_) {
    while (!list.empty()) {
      HealthTimer& timer = list.front();
      list.pop_front();
      timer.inSlot_ = timer.armed_ = false;
    }
  }
  slots_.clear();
  waiting_ = false;
  wakeup_.cancel();
}

// Timers at one point keep the order they were set in.
void HealthTimerService::add(HealthTimer& timer, TimePoint due) {
  timer.slot_ = slots_.try_emplace(due).first;
  timer.slot_->second.push_back(timer);
  timer.inSlot_ = timer.armed_ = true;
  if (!waiting_ || due < waitingFor_) wait(due);
}

void HealthTimerService::remove(HealthTimer& timer) {
  timer.armed_ = false;
  timer.unlink();
  if (timer.inSlot_ && timer.slot_->second.empty()) slots_.erase(timer.slot_);
  timer.inSlot_ = false;
}

// A later wait replaces the current one: its aborted completion is ignored
// by its stale point.
void HealthTimerService::wait(TimePoint until) {
  waiting_ = true;
  waitingFor_ = until;
  wakeup_.expires_at(until);
  wakeup_.async_wait([this, until](const boost::system::error_code& ec) {
    if (ec || !waiting_ || waitingFor_ != until) return;
    waiting_ = false;
    fire();
  });
}

// Every timer due by now, each once, point by point: a point's list is
// taken out of the map before its callbacks run, since they may cancel or
// set timers (one set again is due a grid point later at the earliest, or
// now when set for the past).
void HealthTimerService::fire() {
  TimePoint now = SteadyClock::now();
  while (!slots_.empty() && slots_.begin()->first <= now) {
    HealthTimer::List due;
    due.swap(slots_.begin()->second);
    slots_.erase(slots_.begin());
    for (HealthTimer& timer : due) timer.inSlot_ = false;
    while (!due.empty()) {
      HealthTimer& timer = due.front();
      due.pop_front();
      timer.armed_ = false;
      timer.fired_();  // may destroy the timer, or cancel or set others
    }
  }
  if (!slots_.empty() && (!waiting_ || slots_.begin()->first < waitingFor_)) wait(slots_.begin()->first);
}

}  // namespace allot
