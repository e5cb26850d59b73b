#include "sdk/health_check.h"

namespace allot {

HealthCheckSettings HealthCheckSettings::of(const wire::HealthCheck& check) {
  HealthCheckSettings s;
  s.delay = secondsToDuration(check.has_delay_s() ? check.delay_s() : kHealthDelayDefaultS);
  s.interval = secondsToDuration(check.has_interval_s() ? check.interval_s() : kHealthIntervalDefaultS);
  s.timeout = secondsToDuration(check.has_timeout_s() ? check.timeout_s() : kHealthTimeoutDefaultS);
  s.grace = secondsToDuration(check.has_grace_period_s() ? check.grace_period_s() : kHealthGraceDefaultS);
  s.failuresMax = check.has_consecutive_failures() ? check.consecutive_failures() : kHealthFailuresDefault;
  if (s.failuresMax == 0) s.failuresMax = 1;
  return s;
}

TimePoint onHealthTimerGrid(TimePoint due, Duration step) {
  Duration sinceEpoch = due.time_since_epoch();
  Duration past = sinceEpoch % step;
  if (past < Duration::zero()) past += step;
  return past == Duration::zero() ? due : due - past + step;
}

HealthPolicy::Action HealthPolicy::record(bool healthy, TimePoint at) {
  if (healthy) {
    succeededOnce_ = true;
    failures_ = 0;
    if (reported_ == true) return Action::kNone;
    reported_ = true;
    return Action::kReport;
  }
  // The grace period ends at the first success: a task that was healthy
  // once is judged on every failure after.
  if (!succeededOnce_ && at < launchedAt_ + settings_.grace) return Action::kNone;
  ++failures_;
  if (failures_ >= settings_.failuresMax) {
    reported_ = false;
    return Action::kKill;
  }
  if (reported_ == false) return Action::kNone;
  reported_ = false;
  return Action::kReport;
}

std::unique_ptr<HealthProbe> makeProbe(asio::io_context& io, const wire::HealthCheck& check,
                                       CheckProcesses* processes) {
  switch (check.type()) {
    case wire::HealthCheck::TCP:
      return makeTcpProbe(io, static_cast<uint16_t>(check.port()));
    case wire::HealthCheck::HTTP:
      return makeHttpProbe(io, static_cast<uint16_t>(check.port()), check.path());
    case wire::HealthCheck::COMMAND:
      if (!processes) return nullptr;
      return makeCommandProbe(io, check.command(), *processes);
    default:
      return nullptr;
  }
}

HealthChecker::HealthChecker(asio::io_context& io, HealthCheckSettings settings,
                             std::unique_ptr<HealthProbe> probe, Changed changed, Failed failed)
    : settings_(settings), probe_(std::move(probe)), changed_(std::move(changed)),
      failed_(std::move(failed)), policy_(settings, SteadyClock::now()),
      next_(io, [this] {
        if (running_) attempt();
      }),
      deadline_(io, [this] { timedOut(); }), alive_(std::make_shared<bool>(true)) {}

HealthChecker::~HealthChecker() {
  *alive_ = false;
  stop();
}

void HealthChecker::start() {
  policy_ = HealthPolicy(settings_, SteadyClock::now());
  running_ = true;
  arm(settings_.delay);
}

void HealthChecker::stop() {
  running_ = false;
  inFlight_ = false;
  next_.cancel();
  deadline_.cancel();
  if (probe_) probe_->cancel();
}

void HealthChecker::arm(Duration after) { next_.at(SteadyClock::now() + after); }

// Each attempt ends once: by the probe's answer or by the deadline,
// whichever comes first (the generation tells a late answer from the
// next attempt's).
void HealthChecker::attempt() {
  uint64_t generation = ++generation_;
  inFlight_ = true;
  if (settings_.timeout > Duration::zero()) deadline_.at(SteadyClock::now() + settings_.timeout);
  probe_->start([this, alive = alive_, generation](HealthVerdict verdict) {
    if (!*alive || !running_ || !inFlight_ || generation != generation_) return;
    inFlight_ = false;
    deadline_.cancel();
    onResult(std::move(verdict));
  });
}

void HealthChecker::timedOut() {
  if (!running_ || !inFlight_) return;
  std::shared_ptr<bool> alive = alive_;
  probe_->settle();  // an answer that came in time counts
  if (!*alive || !running_ || !inFlight_) return;
  inFlight_ = false;
  probe_->cancel();
  double s = std::chrono::duration<double>(settings_.timeout).count();
  onResult({false, "health check timed out after " + std::to_string(s).substr(0, 6) + " s"});
}

void HealthChecker::onResult(HealthVerdict verdict) {
  if (verdict.output.size() > kHealthOutputBytesMax) verdict.output.resize(kHealthOutputBytesMax);
  switch (policy_.record(verdict.healthy, SteadyClock::now())) {
    case HealthPolicy::Action::kKill:
      running_ = false;
      failed_(verdict.output);  // may destroy this checker: nothing after
      return;
    case HealthPolicy::Action::kReport:
      arm(settings_.interval);
      changed_(verdict);  // may destroy this checker: nothing after
      return;
    case HealthPolicy::Action::kNone:
      arm(settings_.interval);
      return;
  }
}

}  // namespace allot
