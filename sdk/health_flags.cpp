#include "sdk/health_flags.h"

#include <cmath>

#include "proto/validate.h"

namespace allot {

void addHealthFlags(Flags& flags, HealthFlags* t) {
  flags.addString("health-cmd", &t->command, "health check: a shell command run beside each task; exit 0 is healthy");
  flags.addString("health-http", &t->http,
                  "health check: PORT/PATH answered 200-399 by the task on 127.0.0.1 (its network namespace)");
  flags.addInt("health-tcp", &t->tcp, "health check: a port the task accepts connections on");
  flags.addDouble("health-delay", &t->delayS, "seconds from the launch to the first check (default 15)");
  flags.addDouble("health-interval", &t->intervalS, "seconds between the end of a check and the next (default 10)");
  flags.addDouble("health-timeout", &t->timeoutS, "seconds a check may take; 0: no limit (default 20)");
  flags.addDouble("health-grace", &t->graceS,
                  "seconds from the launch during which failures do not count, until the first success (default 10)");
  flags.addInt("health-failures", &t->failures,
               "failures in a row that kill the task, reason HEALTH_CHECK_FAILED (default 3)");
}

namespace {

Result<std::optional<wire::HealthCheck>> ofType(const HealthFlags& f) {
  int given = !f.command.empty() + !f.http.empty() + (f.tcp != 0);
  if (given > 1) return Error{"--health-cmd, --health-http and --health-tcp exclude each other"};
  wire::HealthCheck check;
  if (!f.command.empty()) {
    check.set_type(wire::HealthCheck::COMMAND);
    check.mutable_command()->set_shell(f.command);
  } else if (!f.http.empty()) {
    check.set_type(wire::HealthCheck::HTTP);
    auto slash = f.http.find('/');
    std::string port = f.http.substr(0, slash);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
      return Error{"--health-http: '" + f.http + "' is not PORT/PATH"};
    }
    check.set_port(static_cast<uint32_t>(std::stoul(port)));
    if (slash != std::string::npos) check.set_path(f.http.substr(slash));
  } else if (f.tcp != 0) {
    if (f.tcp < 1 || f.tcp > 65535) return Error{"--health-tcp must be 1..65535"};
    check.set_type(wire::HealthCheck::TCP);
    check.set_port(static_cast<uint32_t>(f.tcp));
  } else {
    return std::optional<wire::HealthCheck>();
  }
  return std::optional<wire::HealthCheck>(std::move(check));
}

}  // namespace

Result<std::optional<wire::HealthCheck>> healthCheckOf(const HealthFlags& f) {
  auto typed = ofType(f);
  if (!typed) return typed.error();
  bool timing = f.delayS >= 0 || f.intervalS >= 0 || f.timeoutS >= 0 || f.graceS >= 0 || f.failures >= 0;
  if (!*typed) {
    if (timing) return Error{"--health-* timings need --health-cmd, --health-http or --health-tcp"};
    return typed;
  }
  wire::HealthCheck& check = **typed;
  if (f.delayS >= 0) check.set_delay_s(f.delayS);
  if (f.intervalS >= 0) check.set_interval_s(f.intervalS);
  if (f.timeoutS >= 0) check.set_timeout_s(f.timeoutS);
  if (f.graceS >= 0) check.set_grace_period_s(f.graceS);
  if (f.failures >= 0) {
    if (f.failures > UINT32_MAX) return Error{"--health-failures is too large"};
    check.set_consecutive_failures(static_cast<uint32_t>(f.failures));
  }
  // The master's own check, so a bad value is refused here, by flag.
  wire::TaskInfo probe;
  *probe.mutable_health_check() = check;
  if (auto st = validateTaskInfo(probe, "task"); !st) return Error{"--health-*: " + st.error().describe()};
  return typed;
}

void addRestartFlags(Flags& flags, RestartFlags* t) {
  flags.addString("restart", &t->mode,
                  "launch a task again when it ends: never, on-failure (not FINISHED) or always");
  flags.addInt("max-restarts", &t->maxRestarts, "restarts per instance with --restart; -1: no limit");
}

Result<RestartPolicy> RestartPolicy::of(const RestartFlags& f) {
  RestartPolicy p;
  if (f.mode == "never") {
    p.mode_ = Mode::kNever;
  } else if (f.mode == "on-failure") {
    p.mode_ = Mode::kOnFailure;
  } else if (f.mode == "always") {
    p.mode_ = Mode::kAlways;
  } else {
    return Error{"--restart must be never, on-failure or always (not '" + f.mode + "')"};
  }
  if (f.maxRestarts < -1 || f.maxRestarts > kMaxRestartsMax) {
    return Error{"--max-restarts must be -1..." + std::to_string(kMaxRestartsMax)};
  }
  p.max_ = f.maxRestarts;
  return p;
}

bool RestartPolicy::restarts(wire::TaskState state, int64_t done) const {
  if (mode_ == Mode::kNever || (max_ >= 0 && done >= max_)) return false;
  return mode_ == Mode::kAlways || state != wire::TASK_FINISHED;
}

Duration RestartPolicy::backoff(int64_t n) {
  Duration wait = kRestartBackoffMin;
  for (int64_t i = 1; i < n && wait < kRestartBackoffMax; ++i) wait *= 2;
  return std::min(wait, kRestartBackoffMax);
}

}  // namespace allot
