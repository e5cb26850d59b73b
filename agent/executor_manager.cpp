#include "agent/executor_manager.h"
#include "base/clock.h"
#include "proto/task_state.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "agent/gc.h"
#include "agent/run_as.h"
#include "agent/status_updates.h"
#include "base/log.h"
#include "base/secrets.h"
#include "base/unique_fd.h"
#include "launcher/process_tree.h"
#include "proto/connection.h"
#include "proto/input_limits.h"
#include "proto/resources.h"

namespace allot {
namespace {

std::string seconds(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

ExecutorManager::ExecutorManager(asio::io_context& io, Launcher& launcher,
                                 std::vector<std::unique_ptr<Isolator>>& isolators,
                                 CheckpointStore& checkpoints, ExecutorManagerOptions options,
                                 Callbacks callbacks)
    : io_(io),
      launcher_(launcher),
      isolators_(isolators),
      checkpoints_(checkpoints),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      listener_(io,
                {.path = options_.workDir + "/agent.sock",
                 .openToAllUsers = !options_.defaultUser.empty(),
                 .pendingMax = options_.pendingConnectionsMax,
                 .handshakeTimeout = options_.executorHandshakeTimeout},
                listenerCallbacks()),
      sandboxPool_(io, {.threads = 1, .queueMax = options_.sandboxQueueMax, .name = "allot-sandbox"}),
      // Niced as the launcher's clone thread is: in the hog bench (node
      // cgroup) the loop waited 25 ms for its CPU while a thread of the
      // agent, by its id one of these workers, ran 17.6 ms there at the
      // loop's own priority (a kill's /proc scan reads every process's
      // stat, 256 spinners among them). The sandboxes' pool is on the
      // launch path: not niced.
      pool_(io, {.threads = options_.workerThreads,
                 .queueMax = options_.workerQueueMax,
                 .niceness = kBackgroundNiceness,
                 .name = "allot-reap"}) {
  updatePrefix_ = "agent-" + std::to_string(getpid()) + "-" +
                  std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "-";
}

ExecutorManager::~ExecutorManager() {
  alive_.reset();
  for (auto& [name, c] : containers_) {
    if (c->conn) c->conn->close("agent stopping");
  }
}

LoopSections::Timer ExecutorManager::timed(AgentSection section) const {
  if (!sections_) return LoopSections::Timer(nullptr, 0);
  return sections_->time(section);
}

LoopSections::Timer ExecutorManager::timed(IsolatorCall call, size_t isolator) const {
  if (!sections_) return LoopSections::Timer(nullptr, 0);
  return sections_->time(call, isolator);
}

size_t ExecutorManager::liveTaskCount() const {
  size_t n = 0;
  for (const auto& [name, c] : containers_) n += c->tasks().size() + c->waiting().size();
  return n;
}

Container* ExecutorManager::find(const std::string& frameworkId,
                                                  const std::string& executorId) {
  auto it = containers_.find(containerName(frameworkId, executorId));
  return it == containers_.end() ? nullptr : it->second.get();
}

Container* ExecutorManager::byName(const std::string& name, uint64_t generation) {
  auto it = containers_.find(name);
  if (it == containers_.end() || it->second->generation != generation) return nullptr;
  return it->second.get();
}

Container& ExecutorManager::create(const wire::FrameworkInfo& framework, const wire::ExecutorInfo& executor) {
  std::string name = containerName(framework.id(), executor.executor_id());
  CHECK(!containers_.count(name));
  auto c = std::make_unique<Container>(io_, name, nextGeneration_++, framework, executor);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch()).count();
  c->sandbox = options_.workDir + "/sandboxes/" + name + "." + std::to_string(ms);
  c->secret = randomHex(16);  // 128 bits
  Container& ref = *c;
  containers_.emplace(name, std::move(c));
  return ref;
}

// The container's timers, with the loop's section timing around them.
void ExecutorManager::armTimer(Container& c, Container::Timer which, Duration after,
                               std::function<void(Container&)> fn) {
  c.arm(which, after, [this, fn = std::move(fn)](Container& c) {
    auto timer = timed(AgentSection::kContainerTimer);
    fn(c);
  });
}

void ExecutorManager::armTimer(Container& c, asio::steady_timer& timer, Duration after,
                               std::function<void(Container&)> fn) {
  c.arm(timer, after, [this, fn = std::move(fn)](Container& c) {
    auto timer = timed(AgentSection::kContainerTimer);
    fn(c);
  });
}

bool ExecutorManager::runsTask(const std::string& frameworkId, const std::string& taskId) const {
  for (const auto& [name, c] : containers_) {
    if (c->framework.id() != frameworkId) continue;
    if (c->hasTask(taskId)) return true;
  }
  return false;
}

void ExecutorManager::runTask(const wire::FrameworkInfo& framework, wire::TaskInfo task, bool rootAllowed) {
  if (task.task_id().empty() || framework.id().empty()) {
    LOG_ERROR("RunTask without a task or framework id; ignored");
    return;
  }
  const std::string& fid = framework.id();
  wire::ExecutorInfo executor = executorFor(framework, task, options_.defaultUser);
  auto refuse = [&](wire::TaskState state, wire::Reason reason, const std::string& why) {
    emit(nullptr, agentStatus(fid, executor.executor_id(), task.task_id(), state, reason, why));
  };
  if (!executor.container().image().empty() && !options_.pullImage) {
    return refuse(wire::TASK_ERROR, wire::REASON_INVALID_LAUNCH,
                  "this agent runs no images (--isolation without filesystem/linux)");
  }
  if (isBuiltinExecutor(executor) && task.container().image().empty() && task.command().shell().empty() &&
      task.command().argv().empty()) {
    return refuse(wire::TASK_ERROR, wire::REASON_INVALID_LAUNCH,
                  "a command task needs command.shell or command.argv");
  }
  if (runsTask(fid, task.task_id())) {
    LOG_WARNING("task " << task.task_id() << " of framework " << fid << " already runs here; ignored");
    return;
  }
  Container* c = find(fid, executor.executor_id());
  if (c && !c->life().acceptsTasks()) {
    if (c->reapFailures >= options_.reapFailuresBeforeRefusing) {
      return refuse(wire::TASK_FAILED, wire::REASON_ISOLATION_FAILED, unreapedReason(*c));
    }
    if (c->waiting().size() >= options_.tasksPerExecutorMax) {
      return refuse(wire::TASK_FAILED, wire::REASON_EXEC_FAILED,
                    "executor's replacement already waits for its limit of tasks");
    }
    c->addWaiting(std::move(task));  // for the executor that replaces this one
    return;
  }
  if (!c && containers_.size() >= options_.executorsMax) {
    return refuse(wire::TASK_FAILED, wire::REASON_EXEC_FAILED,
                  "the agent runs its limit of " + std::to_string(options_.executorsMax) + " executors");
  }
  if (c && c->tasks().size() >= options_.tasksPerExecutorMax) {
    return refuse(wire::TASK_FAILED, wire::REASON_EXEC_FAILED, "executor runs its limit of tasks");
  }
  if (c) {
    c->framework = framework;
    return addTask(*c, std::move(task));
  }
  startExecutor(framework, executor, std::move(task), rootAllowed);
}

void ExecutorManager::addTask(Container& c, wire::TaskInfo task) {
  ContainerTask& t = c.addTask(std::move(task));
  updateLimits(c);
  if (c.life().state() == ContainerState::kRunning && c.conn) sendLaunch(c, t);
  checkpoint(c);
}

void ExecutorManager::updateLimits(Container& c) {
  if (isolators_.empty() || !c.life().hasProcess()) return;
  Resources limits = c.limits();
  for (size_t i = 0; i < isolators_.size(); ++i) {
    auto timer = timed(IsolatorCall::kUpdate, i);
    if (auto st = isolators_[i]->update(c.id, limits); !st) {
      LOG_WARNING("container " << c.name << ": " << isolators_[i]->name() << " update: " << st.error().describe());
    }
  }
}

void ExecutorManager::checkpoint(Container& c) {
  // Coalesced and written after the current handler: a LaunchTask or an
  // update goes out first, and a batch of launches costs one write. Safe
  // because recovery trusts what a reconnecting executor reports.
  if (c.checkpointPending) return;
  c.checkpointPending = true;
  std::weak_ptr<int> alive = alive_;
  asio::post(io_, [this, alive, name = c.name, gen = c.generation] {
    if (alive.expired()) return;
    if (Container* c = byName(name, gen)) {
      auto timer = timed(AgentSection::kCheckpoint);
      c->checkpointPending = false;
      writeCheckpoint(*c);
    }
  });
}

void ExecutorManager::writeCheckpoint(Container& c) {
  if (!c.life().hasProcess()) return;
  if (auto st = checkpoints_.saveExecutor(c.checkpointRecord()); !st) {
    LOG_ERROR("checkpoint of " << c.name << ": " << st.error().describe());
  }
}

void ExecutorManager::refuseTask(const std::string& frameworkId, const std::string& taskId,
                                 wire::Reason reason, const std::string& why) {
  LOG_WARNING("task " << taskId << " of framework " << frameworkId << ": " << why);
  emit(nullptr, agentStatus(frameworkId, "", taskId, wire::TASK_ERROR, reason,
                            why.substr(0, limits::kStatusMessageBytesMax)));
}

void ExecutorManager::killTask(const wire::KillTask& m) {
  for (auto& [name, cp] : containers_) {
    Container& c = *cp;
    if (c.framework.id() != m.framework_id()) continue;
    wire::Reason reason = m.reason() != wire::REASON_NONE ? m.reason() : wire::REASON_KILLED_BY_FRAMEWORK;
    if (c.removeWaiting(m.task_id())) {
      return emit(nullptr, agentStatus(m.framework_id(), c.executor.executor_id(), m.task_id(),
                                       wire::TASK_KILLED, reason,
                                       "killed before its executor started"));
    }
    ContainerTask* found = c.task(m.task_id());
    if (!found) continue;
    ContainerTask& t = *found;
    if (!t.sent) {
      return emit(&c, agentStatus(m.framework_id(), c.executor.executor_id(), m.task_id(),
                                  wire::TASK_KILLED, reason,
                                  "killed before its executor started"));
    }
    double grace = m.grace_s() > 0 ? m.grace_s()
                   : t.info.kill_grace_s() > 0
                       ? t.info.kill_grace_s()
                       : std::chrono::duration<double>(options_.defaultKillGrace).count();
    t.killing = true;
    t.graceS = grace;
    t.killReason = reason;
    wire::Envelope e;
    *e.mutable_kill_task() = m;
    e.mutable_kill_task()->set_grace_s(grace);
    sendToExecutor(c, e);
    t.killTimer = std::make_unique<asio::steady_timer>(io_);
    std::string taskId = m.task_id();
    armTimer(c, *t.killTimer, secondsToDuration(grace) + options_.killSlack, [this, taskId, grace](Container& c) {
      if (!c.task(taskId)) return;
      endContainer(c, "task " + taskId + " outlived its kill grace period of " +
                           seconds(secondsToDuration(grace)));
    });
    return;
  }
  emit(nullptr, agentStatus(m.framework_id(), "", m.task_id(), wire::TASK_LOST,
                            wire::REASON_UNKNOWN_TASK, "the agent runs no task " + m.task_id()));
}

void ExecutorManager::shutdownFramework(const std::string& frameworkId) {
  std::vector<Container*> matching;
  for (auto& [name, c] : containers_) {
    if (c->framework.id() == frameworkId) matching.push_back(c.get());
  }
  for (Container* c : matching) {
    c->recordFrameworkRemoved();
    for (const auto& n : c->takeWaiting()) {
      emit(nullptr, agentStatus(frameworkId, c->executor.executor_id(), n.task_id(), wire::TASK_KILLED,
                                wire::REASON_FRAMEWORK_REMOVED, "framework was removed"));
    }
    if (c->life().state() != ContainerState::kRunning || !c->conn) {
      endContainer(*c, "framework " + frameworkId + " was removed");
      continue;
    }
    sendShutdown(*c);
    armTimer(*c, Container::Timer::kShutdown, options_.shutdownTimeout, [this](Container& c) {
      endContainer(c, "executor did not exit within " + seconds(options_.shutdownTimeout) +
                           " of its shutdown");
    });
  }
}

void ExecutorManager::maybeIdle(Container& c) {
  if (c.life().state() != ContainerState::kRunning || !c.tasks().empty() || !c.waiting().empty()) return;
  armTimer(c, Container::Timer::kIdle, options_.idleShutdown, [this](Container& c) {
    if (c.life().state() != ContainerState::kRunning || !c.tasks().empty() || !c.waiting().empty()) return;
    sendShutdown(c);
    armTimer(c, Container::Timer::kShutdown, options_.shutdownTimeout, [this](Container& c) {
      endContainer(c, "idle executor did not exit within " + seconds(options_.shutdownTimeout));
    });
  });
}

// Asks the executor to exit (running -> shutting down); sent again when it
// re-registers on a new link while shutting down.
void ExecutorManager::sendShutdown(Container& c) {
  // A running container takes shutdownSent; a shutting-down one is
  // sent it again (a re-registration on a new link).
  if (c.life().state() == ContainerState::kRunning) c.take(ContainerEvent::kShutdownSent);
  wire::Envelope e;
  e.mutable_shutdown_executor()->set_framework_id(c.framework.id());
  e.mutable_shutdown_executor()->set_executor_id(c.executor.executor_id());
  sendToExecutor(c, e);
}

wire::TaskStatus ExecutorManager::agentStatus(const std::string& frameworkId,
                                              const std::string& executorId,
                                              const std::string& taskId, wire::TaskState state,
                                              wire::Reason reason, const std::string& message) {
  wire::TaskStatus s;
  s.set_task_id(taskId);
  s.set_framework_id(frameworkId);
  s.set_agent_id(agentId_);
  s.set_executor_id(executorId);
  s.set_state(state);
  s.set_reason(reason);
  s.set_message(message);
  s.set_update_id(updatePrefix_ + std::to_string(++updateSequence_));
  s.set_timestamp_s(wallClockSeconds());
  return s;
}

void ExecutorManager::emit(Container* c, wire::TaskStatus status) {
  callbacks_.onUpdate(status, [taskId = status.task_id()](Status st) {
    if (!st) LOG_ERROR("update for task " << taskId << " not persisted: " << st.error().describe());
  });
  if (c) applyStatus(*c, status);
}

void ExecutorManager::applyStatus(Container& c, const wire::TaskStatus& status) {
  ContainerTask* t = c.task(status.task_id());
  if (!t) return;
  if (isTerminal(status.state())) {
    rememberEnded(c, status.task_id());
    c.endTask(status.task_id());
    updateLimits(c);
    maybeIdle(c);
  } else {
    t->latest = status;
  }
  checkpoint(c);
}

void ExecutorManager::acceptExecutorUpdate(Container& c, wire::TaskStatus status) {
  status.set_framework_id(c.framework.id());
  status.set_executor_id(c.executor.executor_id());
  status.set_agent_id(agentId_);
  if (status.update_id().empty()) status.set_update_id(updatePrefix_ + std::to_string(++updateSequence_));
  if (status.task_id().empty()) {
    LOG_ERROR("executor " << c.name << " sent a status update without a task id");
    return;
  }
  c.explainUpdate(&status);
  // Acknowledged once durable; until then the executor keeps it and resends
  // it after a reconnect.
  std::weak_ptr<Connection> conn = c.conn;
  callbacks_.onUpdate(status, [conn, fid = status.framework_id(), tid = status.task_id(),
                               uid = status.update_id()](Status st) {
    if (!st) {
      LOG_ERROR("update " << uid << " of task " << tid << " not persisted: " << st.error().describe());
      return;
    }
    auto link = conn.lock();
    if (!link || !link->open()) return;
    wire::Envelope ack;
    auto* a = ack.mutable_status_acknowledgement();
    a->set_framework_id(fid);
    a->set_task_id(tid);
    a->set_update_id(uid);
    (void)link->send(ack);
  });
  applyStatus(c, status);
}

void ExecutorManager::collectUsage(wire::UsageReport* report) const {
  if (isolators_.empty()) return;
  for (const auto& [name, c] : containers_) {
    if (!c->life().hasProcess()) continue;
    wire::ExecutorUsage* u = report->add_executors();
    u->set_framework_id(c->id.frameworkId);
    u->set_executor_id(c->id.executorId);
    for (size_t i = 0; i < isolators_.size(); ++i) {
      auto timer = timed(IsolatorCall::kUsage, i);
      if (Status st = isolators_[i]->usage(c->id, u->mutable_usage()); !st) {
        LOG_DEBUG(isolators_[i]->name() << ": usage of " << name << ": " << st.error().describe());
      }
    }
  }
}

}  // namespace allot
