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

namespace allot {

Container::Container(asio::io_context& io, std::string name, uint64_t generation,
                     wire::FrameworkInfo framework, wire::ExecutorInfo executor)
    : name(std::move(name)),
      generation(generation),
      id{framework.id(), executor.executor_id()},
      framework(std::move(framework)),
      executor(std::move(executor)),
      registerTimer_(io),
      idleTimer_(io),
      shutdownTimer_(io),
      drainTimer_(io),
      reapTimer_(io) {}

Status Container::on(ContainerEvent event, const ExitInfo& exit) {
  Status st = life_.on(event, exit);
  if (st) cancelTimersMootIn(life_.state());
  return st;
}

void Container::take(ContainerEvent event, const ExitInfo& exit) {
  life_.take(event, exit);
  cancelTimersMootIn(life_.state());
}

void Container::cancelTimersMootIn(ContainerState state) {
  switch (state) {
    case ContainerState::kRunning:
    case ContainerState::kShuttingDown:
      registerTimer_.cancel();
      break;
    case ContainerState::kExited:
      registerTimer_.cancel();
      idleTimer_.cancel();
      shutdownTimer_.cancel();
      for (auto& [id, t] : tasks_) {
        if (t.killTimer) t.killTimer->cancel();
        if (t.durationTimer) t.durationTimer->cancel();
      }
      break;
    case ContainerState::kDestroying:
      drainTimer_.cancel();
      break;
    default: break;
  }
}

ContainerTask* Container::task(const std::string& taskId) {
  auto it = tasks_.find(taskId);
  return it == tasks_.end() ? nullptr : &it->second;
}

ContainerTask& Container::addTask(wire::TaskInfo info) {
  CHECK(!hasTask(info.task_id()));  // callers check hasTask: ids come from input
  idleTimer_.cancel();
  ContainerTask& t = tasks_[info.task_id()];
  t.info = std::move(info);
  return t;
}

bool Container::endTask(const std::string& taskId) { return tasks_.erase(taskId) > 0; }

bool Container::hasTask(const std::string& taskId) const {
  if (tasks_.count(taskId)) return true;
  for (const auto& w : waiting_) {
    if (w.task_id() == taskId) return true;
  }
  return false;
}

Resources Container::limits() const {
  Resources total;
  if (auto r = Resources::fromWire(executor.resources())) total += *r;
  for (const auto& [taskId, t] : tasks_) {
    if (auto r = Resources::fromWire(t.info.resources())) total += *r;
  }
  return total;
}

void Container::addWaiting(wire::TaskInfo info) {
  CHECK(!hasTask(info.task_id()));  // callers check hasTask: ids come from input
  waiting_.push_back(std::move(info));
}

std::optional<wire::TaskInfo> Container::removeWaiting(const std::string& taskId) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (it->task_id() != taskId) continue;
    wire::TaskInfo info = std::move(*it);
    waiting_.erase(it);
    return info;
  }
  return std::nullopt;
}

std::vector<wire::TaskInfo> Container::takeWaiting() {
  std::vector<wire::TaskInfo> out = std::move(waiting_);
  waiting_.clear();
  return out;
}

asio::steady_timer& Container::timer(Timer which) {
  switch (which) {
    case Timer::kRegister: return registerTimer_;
    case Timer::kIdle: return idleTimer_;
    case Timer::kShutdown: return shutdownTimer_;
    case Timer::kDrain: return drainTimer_;
    case Timer::kReap: break;
  }
  return reapTimer_;
}

void Container::arm(Timer which, Duration after, std::function<void(Container&)> fn) {
  arm(timer(which), after, std::move(fn));
}

void Container::arm(asio::steady_timer& timer, Duration after, std::function<void(Container&)> fn) {
  timer.expires_after(after);
  std::weak_ptr<int> alive = alive_;
  timer.async_wait([this, alive, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    fn(*this);
  });
}

void Container::explainUpdate(wire::TaskStatus* status) const {
  auto it = tasks_.find(status->task_id());
  if (status->state() == wire::TASK_KILLED && it != tasks_.end() && it->second.killing &&
      it->second.killReason != wire::REASON_KILLED_BY_FRAMEWORK) {
    wire::Reason reason = it->second.killReason;
    status->set_reason(reason);
    if (status->message().empty() || reason == wire::REASON_REVOKED || reason == wire::REASON_AGENT_DRAINED) {
      switch (reason) {
        case wire::REASON_REVOKED: status->set_message("revoked by the allocation module"); break;
        case wire::REASON_AGENT_DRAINED:
          status->set_message("the agent was drained (allotctl drain) and its deadline passed");
          break;
        case wire::REASON_MAX_DURATION: status->set_message("task exceeded its max_duration_s"); break;
        default: break;
      }
    }
  }
  // A container that hit a limit is destroyed by the agent: its executor
  // may still report a task it saw die (the agent's kill, or the kernel's
  // OOM kill) before it goes. The limit is what ended that task.
  const auto& limit = life_.limitation();
  if (!limit) return;
  if (status->state() != wire::TASK_FAILED && status->state() != wire::TASK_KILLED) return;
  std::string seen = status->message();
  status->set_state(wire::TASK_FAILED);
  status->set_reason(limit->reason);
  status->set_message(limit->message + (seen.empty() ? "" : " (executor: " + seen + ")"));
  *status->mutable_usage() = limit->usage;
}

ExecutorCheckpoint Container::checkpointRecord() const {
  ExecutorCheckpoint ck;
  ck.container = name;
  ck.framework = framework;
  ck.executor = executor;
  ck.pid = pid;
  ck.startTime = startTime;
  ck.sandbox = sandbox;
  ck.secret = secret;
  if (image) ck.imageLayers = image->layers;
  for (const auto& [taskId, t] : tasks_) {
    ck.tasks.push_back(t.info);
    if (t.latest) ck.latest[taskId] = *t.latest;
  }
  return ck;
}

void Container::fillRegistration(wire::ExecutorState* out) const {
  *out->mutable_info() = executor;
  auto add = [&](const wire::TaskInfo& info, const std::optional<wire::TaskStatus>& latest) {
    *out->add_tasks() = info;
    wire::TaskStatus* s = out->add_latest();
    if (latest) {
      *s = *latest;
    } else {
      s->set_task_id(info.task_id());
      s->set_framework_id(framework.id());
      s->set_state(wire::TASK_STAGING);
    }
  };
  for (const auto& [taskId, t] : tasks_) add(t.info, t.latest);
  for (const auto& w : waiting_) add(w, std::nullopt);
}

void Container::fillView(const std::string& agentId, state::ExecutorView* v) const {
  v->set_framework_id(id.frameworkId);
  v->set_executor_id(id.executorId);
  v->set_name(name);
  v->set_phase(containerStateName(life_.state()));
  v->set_pid(pid);
  v->set_sandbox(sandbox);
  v->set_image(executor.container().image());
  limits().toWire(v->mutable_limits());
  for (const auto& [taskId, t] : tasks_) {
    state::TaskView* tv = v->add_tasks();
    tv->set_task_id(taskId);
    tv->set_framework_id(id.frameworkId);
    tv->set_agent_id(agentId);
    tv->set_executor_id(id.executorId);
    tv->set_name(t.info.name());
    // A task runs in its executor's root: the image is the executor's
    // unless the task names its own, as the master reports it.
    const std::string& own = t.info.container().image();
    tv->set_image(own.empty() ? executor.container().image() : own);
    *tv->mutable_resources() = t.info.resources();
    if (t.latest) {
      tv->set_state(t.latest->state());
      tv->set_reason(t.latest->reason());
      tv->set_message(t.latest->message());
      tv->set_updated_s(t.latest->timestamp_s());
      if (t.latest->has_healthy()) tv->set_healthy(t.latest->healthy());
    }
  }
}

}  // namespace allot
