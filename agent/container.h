// ContainerLifecycle: the state of one executor's container, as one state
// machine, and why its tasks end, decided once.
//
//   preparing --cloning--> starting --launched--> isolating --isolated-->
//     registering --registered--> running --shutdownSent--> shuttingDown
//   isolating, registering, recovering, running, shuttingDown --exited--> exited
//   preparing, starting (no process: none started, or its clone failed) and
//     exited --finalized--> destroying --reaped--> gone
//   preparing --adopted--> recovering (an executor that outlived an agent
//   restart) --registered--> running; recovering --exited--> exited.
//   running/shuttingDown --registered--> itself (a reconnect on a new link).
//
// Every other (state, event) pair is refused with an Error naming both; the
// state does not change (input from executors and the kernel can arrive
// late or twice, so this is never a CHECK). take() is for the events the
// caller's own state check guarantees: there a refusal is a programmer
// error, and it CHECKs.
//
// Why the container's tasks end is recorded as it happens (the first of
// each kind wins) and decided once, by finalized, with this precedence:
//   1. a limit the container hit (memory, pids, disk): TASK_FAILED with the
//      limit's reason and usage, whatever else happened;
//   2. a failure the agent decided (it could not start, isolation failed,
//      it did not register, it was lost across an agent restart): that
//      failure's state and reason;
//   3. per task, a kill asked for by the framework, the allocator
//      (revocation) or the agent (max duration): TASK_KILLED with that
//      kill's reason;
//   4. the framework was removed: TASK_KILLED, REASON_FRAMEWORK_REMOVED;
//   5. the executor's own end: TASK_FAILED, REASON_EXECUTOR_SIGNALED with
//      the signal or REASON_EXECUTOR_EXITED with the exit code.
// After finalized nothing more is recorded.
//
// ContainerLifecycle is pure (no I/O, no timers). Container, below, is the
// record of one container that holds it, with the container's process,
// link, tasks and timers.
// Thread: the agent's io_context thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/checkpoint.h"
#include "agent/run_as.h"
#include "base/asio.h"
#include "base/clock.h"
#include "base/result.h"
#include "isolators/isolator.h"
#include "launcher/launcher.h"
#include "proto/allot.pb.h"
#include "proto/connection.h"
#include "proto/resources.h"
#include "proto/state.pb.h"

namespace allot {

// The image a container's executor or tasks run in, once pulled
// (filesystem/linux): its layers and the config that makes a task's
// process when the task gives no command.
struct ContainerImage {
  std::vector<std::string> layers;  // blob digests as 64 hex, bottom first
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::vector<std::string> env;     // "K=V", defaults under the task's own
  std::string workingDir;           // "": the sandbox
  std::string user;                 // "user|uid[:group|gid]" in the image's files; "": none
  std::string layersDir;            // where each layer's <hex>/rootfs is
  // Keeps the layers in the store from the pull to the container's end,
  // so that eviction never takes them before filesystem/linux holds them.
  std::shared_ptr<void> hold;
};

enum class ContainerState {
  kPreparing,     // sandbox, isolators' prepare(); no process yet
  kStarting,      // its clone is under way on the launcher's thread; no pid yet
  kIsolating,     // the executor process started; isolate() and watch()
  kRegistering,   // isolated; waiting for RegisterExecutor
  kRecovering,    // adopted after an agent restart; waiting for its reconnect
  kRunning,       // registered: tasks go to it
  kShuttingDown,  // ShutdownExecutor sent; waiting for its exit
  kExited,        // its process is gone; the link's last updates are read
  kDestroying,    // tasks' terminal updates sent; its cgroups are reaped
  kGone,          // cleaned up: the record may go
};

enum class ContainerEvent {
  kCloning,       // its executor's clone went to the launcher's thread
  kLaunched,      // the launcher started the executor
  kAdopted,       // a checkpointed executor is still alive after a restart
  kIsolated,      // every isolator isolated and watches it
  kRegistered,    // the executor registered (or re-registered)
  kShutdownSent,  // the agent asked it to exit
  kExited,        // its process ended (ExitInfo says how)
  kFinalized,     // its end is decided: tasks end, reaping starts
  kReaped,        // the isolators cleaned up after it
};

const char* containerStateName(ContainerState state);
const char* containerEventName(ContainerEvent event);

// What the agent should do to end a container (requestKill).
enum class KillAction {
  kSignal,    // its process runs: SIGKILL it; its exit finalizes it
  kFinalize,  // no process runs (never started, or already exited): finalize now
  kAwaitStart,  // its clone is under way: the clone's answer kills the process
                // it gets, or finalizes the container if it got none
  kNone,      // already destroying or gone
};

class ContainerLifecycle {
 public:
  ContainerState state() const { return state_; }

  // Moves along the diagram above; refuses any other event. `exit` is used
  // by kExited only.
  Status on(ContainerEvent event, const ExitInfo& exit = {});
  // on() for an event the caller's state check guarantees; CHECKs that it
  // was taken (a refusal here is a bug of the caller, never input).
  void take(ContainerEvent event, const ExitInfo& exit = {});

  // The executor process runs (isolating .. shuttingDown; not while its
  // clone is under way: there is no pid yet).
  bool hasProcess() const;
  // New tasks may join this executor (else they wait for its replacement).
  bool acceptsTasks() const;
  // Ended (exited, destroying, gone).
  bool ended() const;

  // Causes of the end, recorded until finalized (the first of each kind
  // is kept). Return false once the end is decided.
  bool recordLimitation(const Limitation& limitation);
  bool recordFailure(wire::TaskState state, wire::Reason reason, const std::string& message);
  bool recordFrameworkRemoved();
  // The agent wants the container gone, for `why`: what to do about it.
  KillAction requestKill(const std::string& why);
  // requestKill was called: a container still preparing must not start
  // its executor (its finalize is on its way), and one starting must kill
  // the process its clone returns.
  bool killRequested() const { return killRequested_; }

  bool frameworkRemoved() const { return frameworkRemoved_; }
  const std::optional<Limitation>& limitation() const { return limitation_; }
  const std::string& failureMessage() const;
  const ExitInfo& exit() const { return exit_; }
  // "executor exited with status 3", "... killed by signal 9 before registering".
  std::string describeExit() const;

  // The terminal update of one unfinished task, once finalized: state,
  // reason, message, exit code or signal, and usage (for a limit), filled
  // into *status by the precedence above. `killing`: a kill of this task
  // was asked for, with `killReason`. Returns an Error before finalized.
  Status fillTerminal(bool killing, wire::Reason killReason, wire::TaskStatus* status) const;

 private:
  struct Failure {
    wire::TaskState state;
    wire::Reason reason;
    std::string message;
  };
  enum class Cause { kUndecided, kLimitation, kFailure, kOwnEnd };

  std::optional<ContainerState> next(ContainerEvent event) const;

  ContainerState state_ = ContainerState::kPreparing;
  bool hadProcess_ = false;
  bool everRegistered_ = false;
  bool frameworkRemoved_ = false;
  ExitInfo exit_;
  std::optional<Limitation> limitation_;
  std::optional<Failure> failure_;
  std::string killedWhy_;
  bool killRequested_ = false;
  Cause cause_ = Cause::kUndecided;
};

// One task of a container, as the agent tracks it.
struct ContainerTask {
  wire::TaskInfo info;
  std::optional<wire::TaskStatus> latest;
  bool sent = false;     // LaunchTask went to the executor
  bool killing = false;  // KillTask went to the executor
  double graceS = 0;
  // Why the agent or master asked for the kill (REVOKED, MAX_DURATION...):
  // the terminal TASK_KILLED carries it, whatever the executor says.
  wire::Reason killReason = wire::REASON_KILLED_BY_FRAMEWORK;
  std::unique_ptr<asio::steady_timer> killTimer;      // its kill grace (+ killSlack)
  std::unique_ptr<asio::steady_timer> durationTimer;  // max_duration_s (task_deadline.cpp)
};

// Container: one executor's container as the agent keeps it. What to do
// on each event is ExecutorManager's; what must stay true whatever it does
// is kept here:
// - Its lifecycle moves only through on()/take(), which also cancel the
//   timers the new state makes moot: registered, the register timer;
//   exited, the register, idle and shutdown timers and every task's kill
//   and duration timers; finalized, the drain timer.
// - Its tasks: the ones its executor runs (tasks()) and the ones waiting
//   for the executor that replaces it (waiting()); a task id is in at most
//   one of them, once (addTask and addWaiting CHECK it: the ids come from
//   input, so callers check hasTask first). A task ends with its timers.
// - Its timers (arm): a callback runs at most once per arm and never once
//   the container is gone; a cancel or a new arm drops a wait not yet due
//   (one already due may still run: callbacks re-check what they act on).
// Thread: the agent's io_context thread.
class Container {
 public:
  enum class Timer {
    kRegister,  // registerTimeout, or recoveryTimeout for an adopted one
    kIdle,      // idleShutdown
    kShutdown,  // shutdownTimeout after ShutdownExecutor
    kDrain,     // drainTimeout after the exit
    kReap,      // the next reap attempt (executor_end.cpp)
  };

  Container(asio::io_context& io, std::string name, uint64_t generation, wire::FrameworkInfo framework,
            wire::ExecutorInfo executor);
  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;

  const std::string name;  // containerName(framework, executor)
  const uint64_t generation;
  const ContainerId id;
  wire::FrameworkInfo framework;  // as the latest task for it came
  const wire::ExecutorInfo executor;

  // Its process and link, as the launch and the registration set them.
  pid_t pid = 0;
  uint64_t startTime = 0;
  std::string sandbox;
  std::optional<RunAsUser> user;  // none: the agent's own user
  std::string secret;             // ALLOT_EXECUTOR_SECRET, checked at registration
  bool rootAllowed = false;       // RunTask.allow_root, for the tasks waiting()
  // Pulled before the launch when executor.container names an image.
  std::optional<ContainerImage> image;
  std::shared_ptr<Connection> conn;
  // The failed reap attempts and the last one's error (executor_end.cpp).
  size_t reapFailures = 0;
  std::string reapError;
  bool checkpointPending = false;

  // The lifecycle (ContainerLifecycle above).
  const ContainerLifecycle& life() const { return life_; }
  ContainerState state() const { return life_.state(); }
  Status on(ContainerEvent event, const ExitInfo& exit = {});
  void take(ContainerEvent event, const ExitInfo& exit = {});
  bool recordLimitation(const Limitation& limitation) { return life_.recordLimitation(limitation); }
  bool recordFailure(wire::TaskState state, wire::Reason reason, const std::string& message) {
    return life_.recordFailure(state, reason, message);
  }
  bool recordFrameworkRemoved() { return life_.recordFrameworkRemoved(); }
  KillAction requestKill(const std::string& why) { return life_.requestKill(why); }

  // Its tasks. A new task also ends the wait for idleness.
  const std::map<std::string, ContainerTask>& tasks() const { return tasks_; }
  ContainerTask* task(const std::string& taskId);
  ContainerTask& addTask(wire::TaskInfo info);
  // False when it has no such task.
  bool endTask(const std::string& taskId);
  // Runs `taskId` or keeps it for its replacement.
  bool hasTask(const std::string& taskId) const;
  // What its isolators enforce: the executor's resources and its tasks'.
  Resources limits() const;

  // The tasks waiting for the executor that replaces this one, in order.
  const std::vector<wire::TaskInfo>& waiting() const { return waiting_; }
  void addWaiting(wire::TaskInfo info);
  std::optional<wire::TaskInfo> removeWaiting(const std::string& taskId);
  std::vector<wire::TaskInfo> takeWaiting();

  // Runs fn(*this) on the loop `after` from now (see the contract above).
  void arm(Timer which, Duration after, std::function<void(Container&)> fn);
  void arm(asio::steady_timer& timer, Duration after, std::function<void(Container&)> fn);

  // An executor's update as the agent knows it better: a kill the agent or
  // master asked for keeps that kill's reason; a task that died with a
  // limit the container hit says so (a task that finished keeps FINISHED).
  void explainUpdate(wire::TaskStatus* status) const;

  // What survives an agent restart (checkpoint.h).
  ExecutorCheckpoint checkpointRecord() const;
  // Its tasks, the waiting ones too, as RegisterAgent lists them.
  void fillRegistration(wire::ExecutorState* out) const;
  // Its part of GET /state (the isolators add usage and cgroups).
  void fillView(const std::string& agentId, state::ExecutorView* out) const;

 private:
  asio::steady_timer& timer(Timer which);
  void cancelTimersMootIn(ContainerState state);

  ContainerLifecycle life_;
  std::map<std::string, ContainerTask> tasks_;  // by id
  std::vector<wire::TaskInfo> waiting_;
  asio::steady_timer registerTimer_;
  asio::steady_timer idleTimer_;
  asio::steady_timer shutdownTimer_;
  asio::steady_timer drainTimer_;
  asio::steady_timer reapTimer_;
  // Expires with the container: a timer's callback queued before the
  // container went finds it expired.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace allot
