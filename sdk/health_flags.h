// Health-check and restart flags for command-line frameworks (allot-execute,
// examples/service; README "allot-execute"): what they add to each task (a
// TaskInfo.health_check) and when a task that ended is launched again.
//
//   --health-cmd CMD | --health-http PORT/PATH | --health-tcp PORT
//   --health-delay S --health-interval S --health-timeout S
//   --health-grace S --health-failures N
//   --restart never|on-failure|always --max-restarts N
//
// Absent timing flags keep the protocol's defaults (sdk/health_check.h).
// Thread: pure functions and values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/flags.h"
#include "base/result.h"
#include "proto/allot.pb.h"

namespace allot {

struct HealthFlags {
  std::string command;
  std::string http;  // PORT/PATH or PORT
  int64_t tcp = 0;
  // Negative: not given (the protocol's default).
  double delayS = -1, intervalS = -1, timeoutS = -1, graceS = -1;
  int64_t failures = -1;
};

void addHealthFlags(Flags& flags, HealthFlags* target);
// The check the flags describe (nullopt: none), or an Error naming the flag.
Result<std::optional<wire::HealthCheck>> healthCheckOf(const HealthFlags& flags);

// A task that ends is launched again after a backoff that doubles from
// kRestartBackoffMin up to kRestartBackoffMax.
inline constexpr Duration kRestartBackoffMin = std::chrono::seconds(1);
inline constexpr Duration kRestartBackoffMax = std::chrono::seconds(60);
// --max-restarts: -1 is unlimited; more than this is refused.
inline constexpr int64_t kMaxRestartsMax = 1000000;

struct RestartFlags {
  std::string mode = "never";
  int64_t maxRestarts = 3;
};

void addRestartFlags(Flags& flags, RestartFlags* target);

class RestartPolicy {
 public:
  enum class Mode { kNever, kOnFailure, kAlways };

  static Result<RestartPolicy> of(const RestartFlags& flags);
  // Whether a task in terminal `state` is launched again after `done`
  // restarts of its instance already.
  bool restarts(wire::TaskState state, int64_t done) const;
  // The wait before restart number `n` (1, 2, ...).
  static Duration backoff(int64_t n);
  Mode mode() const { return mode_; }
  int64_t maxRestarts() const { return max_; }

 private:
  Mode mode_ = Mode::kNever;
  int64_t max_ = 0;
};

}  // namespace allot
