#include "agent/container.h"

#include "base/check.h"
#include "base/log.h"

namespace allot {

const char* containerStateName(ContainerState state) {
  switch (state) {
    case ContainerState::kPreparing: return "preparing";
    case ContainerState::kStarting: return "starting";
    case ContainerState::kIsolating: return "isolating";
    case ContainerState::kRegistering: return "registering";
    case ContainerState::kRecovering: return "recovering";
    case ContainerState::kRunning: return "running";
    case ContainerState::kShuttingDown: return "shutting-down";
    case ContainerState::kExited: return "exited";
    case ContainerState::kDestroying: return "destroying";
    case ContainerState::kGone: return "gone";
  }
  return "unknown";
}

const char* containerEventName(ContainerEvent event) {
  switch (event) {
    case ContainerEvent::kCloning: return "cloning";
    case ContainerEvent::kLaunched: return "launched";
    case ContainerEvent::kAdopted: return "adopted";
    case ContainerEvent::kIsolated: return "isolated";
    case ContainerEvent::kRegistered: return "registered";
    case ContainerEvent::kShutdownSent: return "shutdown-sent";
    case ContainerEvent::kExited: return "exited";
    case ContainerEvent::kFinalized: return "finalized";
    case ContainerEvent::kReaped: return "reaped";
  }
  return "unknown";
}

// The diagram of container.h, one case per state.
std::optional<ContainerState> ContainerLifecycle::next(ContainerEvent e) const {
  using S = ContainerState;
  using E = ContainerEvent;
  switch (state_) {
    case S::kPreparing:
      if (e == E::kCloning) return S::kStarting;
      if (e == E::kAdopted) return S::kRecovering;
      if (e == E::kFinalized) return S::kDestroying;
      break;
    case S::kStarting:
      if (e == E::kLaunched) return S::kIsolating;
      if (e == E::kFinalized) return S::kDestroying;
      break;
    case S::kIsolating:
      if (e == E::kIsolated) return S::kRegistering;
      if (e == E::kExited) return S::kExited;
      break;
    case S::kRegistering:
    case S::kRecovering:
      if (e == E::kRegistered) return S::kRunning;
      if (e == E::kExited) return S::kExited;
      break;
    case S::kRunning:
      if (e == E::kRegistered) return S::kRunning;
      if (e == E::kShutdownSent) return S::kShuttingDown;
      if (e == E::kExited) return S::kExited;
      break;
    case S::kShuttingDown:
      if (e == E::kRegistered) return S::kShuttingDown;
      if (e == E::kExited) return S::kExited;
      break;
    case S::kExited:
      if (e == E::kFinalized) return S::kDestroying;
      break;
    case S::kDestroying:
      if (e == E::kReaped) return S::kGone;
      break;
    case S::kGone:
      break;
  }
  return std::nullopt;
}

Status ContainerLifecycle::on(ContainerEvent event, const ExitInfo& exit) {
  auto to = next(event);
  if (!to) {
    return Error{std::string("a container ") + containerStateName(state_) + " cannot take event " +
                 containerEventName(event)};
  }
  switch (event) {
    case ContainerEvent::kLaunched: hadProcess_ = true; break;
    case ContainerEvent::kAdopted: hadProcess_ = everRegistered_ = true; break;
    case ContainerEvent::kRegistered: everRegistered_ = true; break;
    case ContainerEvent::kExited: exit_ = exit; break;
    case ContainerEvent::kFinalized:
      cause_ = limitation_ ? Cause::kLimitation : failure_ ? Cause::kFailure : Cause::kOwnEnd;
      break;
    default: break;
  }
  state_ = *to;
  return okStatus();
}

void ContainerLifecycle::take(ContainerEvent event, const ExitInfo& exit) {
  Status st = on(event, exit);
  if (!st) LOG_ERROR("container lifecycle: " << st.error().describe());
  CHECK(st);
}

bool ContainerLifecycle::hasProcess() const {
  switch (state_) {
    case ContainerState::kIsolating:
    case ContainerState::kRegistering:
    case ContainerState::kRecovering:
    case ContainerState::kRunning:
    case ContainerState::kShuttingDown: return true;
    default: return false;
  }
}

bool ContainerLifecycle::acceptsTasks() const {
  return state_ != ContainerState::kShuttingDown && !ended();
}

bool ContainerLifecycle::ended() const {
  return state_ == ContainerState::kExited || state_ == ContainerState::kDestroying ||
         state_ == ContainerState::kGone;
}

bool ContainerLifecycle::recordLimitation(const Limitation& limitation) {
  if (cause_ != Cause::kUndecided) return false;
  if (!limitation_) limitation_ = limitation;
  return true;
}

bool ContainerLifecycle::recordFailure(wire::TaskState state, wire::Reason reason,
                                       const std::string& message) {
  if (cause_ != Cause::kUndecided) return false;
  if (!failure_) failure_ = Failure{state, reason, message};
  return true;
}

bool ContainerLifecycle::recordFrameworkRemoved() {
  if (cause_ != Cause::kUndecided) return false;
  frameworkRemoved_ = true;
  return true;
}

KillAction ContainerLifecycle::requestKill(const std::string& why) {
  if (cause_ != Cause::kUndecided) return KillAction::kNone;
  if (killedWhy_.empty()) killedWhy_ = why;
  killRequested_ = true;
  if (state_ == ContainerState::kStarting) return KillAction::kAwaitStart;
  return hasProcess() ? KillAction::kSignal : KillAction::kFinalize;
}

const std::string& ContainerLifecycle::failureMessage() const {
  static const std::string kNone;
  return failure_ ? failure_->message : kNone;
}

std::string ContainerLifecycle::describeExit() const {
  if (!hadProcess_) return "executor never started";
  const ExitInfo& e = exit_;
  std::string text;
  if (!e.statusKnown) {
    text = "executor exited (status unknown: it was adopted after an agent restart)";
  } else if (!e.setupError.empty()) {
    text = "executor failed to start: " + e.setupError;
  } else if (e.signal) {
    text = "executor killed by signal " + std::to_string(e.signal);
  } else {
    text = "executor exited with status " + std::to_string(e.exitCode);
  }
  if (!everRegistered_) text += " before registering";
  return text;
}

Status ContainerLifecycle::fillTerminal(bool killing, wire::Reason killReason,
                                        wire::TaskStatus* s) const {
  s->set_state(wire::TASK_FAILED);
  s->set_reason(wire::REASON_EXECUTOR_EXITED);
  switch (cause_) {
    case Cause::kUndecided:
      return Error{std::string("a container ") + containerStateName(state_) + " has no terminal reason yet"};
    case Cause::kLimitation:
      s->set_reason(limitation_->reason);
      s->set_message(limitation_->message);
      *s->mutable_usage() = limitation_->usage;
      return okStatus();
    case Cause::kFailure:
      s->set_state(failure_->state);
      s->set_reason(failure_->reason);
      s->set_message(failure_->message);
      return okStatus();
    case Cause::kOwnEnd:
      break;
  }
  std::string exitText = describeExit();
  if (killing) {
    s->set_state(wire::TASK_KILLED);
    s->set_reason(killReason);
    s->set_message("task killed with its executor: " + (killedWhy_.empty() ? exitText : killedWhy_));
  } else if (frameworkRemoved_) {
    s->set_state(wire::TASK_KILLED);
    s->set_reason(wire::REASON_FRAMEWORK_REMOVED);
    s->set_message("framework was removed");
  } else {
    if (exit_.statusKnown && exit_.signal) {
      s->set_reason(wire::REASON_EXECUTOR_SIGNALED);
      s->set_signal(exit_.signal);
    } else if (exit_.statusKnown) {
      s->set_exit_code(exit_.exitCode);
    }
    s->set_message(killedWhy_.empty() ? exitText : exitText + " (" + killedWhy_ + ")");
  }
  return okStatus();
}

}  // namespace allot
