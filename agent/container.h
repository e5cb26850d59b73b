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
// Pure: no I/O, no timers; ExecutorManager does what each transition asks.
// Thread: the agent's io_context thread.
#pragma once

#include <optional>
#include <string>

#include "base/result.h"
#include "isolators/isolator.h"
#include "launcher/launcher.h"
#include "proto/allot.pb.h"

namespace allot {

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

}  // namespace allot
