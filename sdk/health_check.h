// Health checks for executor authors: what allot-executor runs for a task's
// TaskInfo.health_check (proto/allot.proto, docs/health-checks.md), as a
// library a custom executor can use the same way.
//
//   HealthChecker checker(io, HealthCheckSettings::of(task.health_check()),
//                         makeTcpProbe(io, port),
//                         [&](const HealthVerdict& v) { send RUNNING + healthy },
//                         [&](const std::string& output) { kill the task });
//   checker.start();   // at the task's launch
//
// - HealthPolicy is the pure rule (grace period, consecutive failures,
//   which verdicts are news); HealthChecker times the attempts on the
//   timer grid every check shares (sdk/health_timers.h) around a
//   HealthProbe; the probes are the seam: TCP and HTTP run
//   in-process on 127.0.0.1 (the executor lives in its tasks' network
//   namespace), COMMAND through a CheckProcesses the executor supplies, so
//   the command is started exactly as its tasks are.
// - Cost: a TCP attempt reads the kernel's socket table, an HTTP attempt is
//   a request on a kept loopback connection whose answer is read at the
//   grid's next point; neither starts a process nor wakes the loop of its
//   own. A COMMAND attempt is a fork and exec.
// - Thread: everything on the io_context's thread. Destroying a checker
//   abandons its attempt (a command's process group is killed and reaped);
//   no callback runs after that.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/asio.h"
#include "base/clock.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "proto/allot.pb.h"
#include "sdk/health_timers.h"

namespace allot {

// Mesos's defaults (HealthCheck in mesos.proto) for absent fields.
inline constexpr double kHealthDelayDefaultS = 15;
inline constexpr double kHealthIntervalDefaultS = 10;
inline constexpr double kHealthTimeoutDefaultS = 20;
inline constexpr double kHealthGraceDefaultS = 10;
inline constexpr uint32_t kHealthFailuresDefault = 3;
// What a status message keeps of a check's output (the rest is dropped).
inline constexpr size_t kHealthOutputBytesMax = 1024;
// A check's timers (its next attempt, its attempt's timeout) fire on a grid
// of this step in the steady clock (the same grid for every check), never
// before their time and less than a step after it: the checks an executor
// runs that fall due within one step start in one wakeup of its loop, not
// one wakeup each (sdk/health_timers.h).
inline constexpr Duration kHealthTimerSlack = std::chrono::milliseconds(10);

// The first point of the grid of `step` at or after `due` (step > 0).
TimePoint onHealthTimerGrid(TimePoint due, Duration step);

struct HealthCheckSettings {
  Duration delay;
  Duration interval;
  Duration timeout;  // zero: none
  Duration grace;
  uint32_t failuresMax = kHealthFailuresDefault;

  static HealthCheckSettings of(const wire::HealthCheck& check);
};

struct HealthVerdict {
  bool healthy = false;
  std::string output;
};

// The rule, apart from time and processes. Failures before the first
// success and within the grace period (counted from the launch) do not
// count; failuresMax failures in a row are fatal.
class HealthPolicy {
 public:
  enum class Action { kNone, kReport, kKill };

  HealthPolicy(const HealthCheckSettings& settings, TimePoint launchedAt)
      : settings_(settings), launchedAt_(launchedAt) {}

  // One attempt's result, ended at `at`. kReport: the verdict changed (the
  // first verdict too); kKill: past the threshold.
  Action record(bool healthy, TimePoint at);
  std::optional<bool> healthy() const { return reported_; }
  uint32_t consecutiveFailures() const { return failures_; }

 private:
  HealthCheckSettings settings_;
  TimePoint launchedAt_;
  bool succeededOnce_ = false;
  uint32_t failures_ = 0;
  std::optional<bool> reported_;
};

// One attempt at a time. done runs once per start(), on the loop, unless
// cancel() comes first (then never).
class HealthProbe {
 public:
  virtual ~HealthProbe() = default;
  virtual void start(std::function<void(HealthVerdict)> done) = 0;
  virtual void cancel() = 0;
  // At the attempt's timeout, before it is given up: a probe that looks
  // for its answer only at set times (the HTTP probe, on the timer grid)
  // takes what has come; done may run within, and may destroy the caller.
  virtual void settle() {}
};

class ListenerSource;  // sdk/health_listeners.h
// Healthy when a connection to 127.0.0.1:port would be accepted, as
// `listeners` says (nullptr: the kernel's socket table, one per thread);
// where they cannot say, by connecting (closed with a reset).
std::unique_ptr<HealthProbe> makeTcpProbe(asio::io_context& io, uint16_t port,
                                          std::shared_ptr<ListenerSource> listeners = nullptr);

// An HTTP check keeps its connection from one attempt to the next
// (HTTP/1.1 keep-alive) and opens a new one when the server closed it,
// after an attempt that failed or timed out, and once the connection is
// kHttpCheckConnectionMaxAge old or has carried kHttpCheckConnectionUsesMax
// attempts, whichever comes first: a server that stops accepting
// connections while it still answers on the open one is seen within that.
inline constexpr Duration kHttpCheckConnectionMaxAge = std::chrono::seconds(30);
inline constexpr uint32_t kHttpCheckConnectionUsesMax = 30;

struct HttpCheckReuse {
  Duration maxAge = kHttpCheckConnectionMaxAge;
  uint32_t usesMax = kHttpCheckConnectionUsesMax;
  const Clock* clock = nullptr;  // the connection's age; nullptr: the steady clock
};

// GET path (empty: "/") on 127.0.0.1:port; 200-399 is healthy. The answer
// is read whole (sdk/http_answer.h): one that is malformed, past its
// bounds' limits or cut off fails the attempt.
std::unique_ptr<HealthProbe> makeHttpProbe(asio::io_context& io, uint16_t port, std::string path,
                                           HttpCheckReuse reuse = {});

// A check command's process: its own process group (pid), a pidfd, and the
// read end of a pipe holding its stdout and stderr.
struct CheckProcess {
  pid_t pid = 0;
  UniqueFd pidfd;
  UniqueFd output;
};

// How an executor starts a check command (as it starts its tasks) and
// collects its status.
class CheckProcesses {
 public:
  virtual ~CheckProcesses() = default;
  virtual Result<CheckProcess> spawn(const wire::CommandInfo& command) = 0;
  // The process ended (its pidfd is readable) or was killed: reap it and
  // return its wait status as waitid(2) reports it.
  virtual siginfo_t reap(const CheckProcess& process) = 0;
};

// Exit status 0 is healthy. `processes` outlives the probe.
std::unique_ptr<HealthProbe> makeCommandProbe(asio::io_context& io, wire::CommandInfo command,
                                              CheckProcesses& processes);

// The probe for a check (NONE: nullptr). COMMAND needs `processes`.
std::unique_ptr<HealthProbe> makeProbe(asio::io_context& io, const wire::HealthCheck& check,
                                       CheckProcesses* processes);

class HealthChecker {
 public:
  using Changed = std::function<void(const HealthVerdict&)>;
  using Failed = std::function<void(const std::string& output)>;

  // changed: each verdict that is news; failed: past the threshold (the
  // checker has stopped; kill the task). Either may destroy the checker.
  HealthChecker(asio::io_context& io, HealthCheckSettings settings, std::unique_ptr<HealthProbe> probe,
                Changed changed, Failed failed);
  ~HealthChecker();
  HealthChecker(const HealthChecker&) = delete;
  HealthChecker& operator=(const HealthChecker&) = delete;

  void start();  // at the task's launch: the first attempt after the delay
  void stop();
  std::optional<bool> healthy() const { return policy_.healthy(); }

 private:
  void arm(Duration after);
  void attempt();
  void timedOut();
  void onResult(HealthVerdict verdict);

  HealthCheckSettings settings_;
  std::unique_ptr<HealthProbe> probe_;
  Changed changed_;
  Failed failed_;
  HealthPolicy policy_;
  HealthTimer next_;
  HealthTimer deadline_;
  std::shared_ptr<bool> alive_;
  bool running_ = false;
  bool inFlight_ = false;
  uint64_t generation_ = 0;
};

}  // namespace allot
