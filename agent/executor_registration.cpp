// The executor side of ExecutorManager: executors' registration (first
// start and reconnect after an agent restart) on the links ExecutorListener
// (executor_link.h) accepts, and recovery from checkpoints.
#include <set>
#include <unordered_map>

#include "agent/executor_manager.h"
#include "base/log.h"
#include "base/secrets.h"
#include "launcher/process_tree.h"
#include "proto/input_limits.h"

namespace allot {
namespace {

// What the isolators were told at prepare(), as the checkpoint has it.
KnownContainer knownContainer(const ExecutorCheckpoint& ck) {
  Resources limits;
  if (auto r = Resources::fromWire(ck.executor.resources())) limits += *r;
  for (const auto& t : ck.tasks) {
    if (auto r = Resources::fromWire(t.resources())) limits += *r;
  }
  ContainerConfig config(std::move(limits), ck.sandbox);
  config.imageLayers = ck.imageLayers;
  return KnownContainer(ContainerId{ck.framework.id(), ck.executor.executor_id()}, std::move(config));
}

}  // namespace

// The listener knows the containers only through these; none of them acts
// once the manager is being destroyed.
ExecutorListener::Callbacks ExecutorManager::listenerCallbacks() {
  std::weak_ptr<int> alive = alive_;
  ExecutorListener::Callbacks cb;
  cb.executorPids = [this] {
    std::unordered_map<pid_t, std::string> pids;
    for (const auto& [name, c] : containers_) {
      if (c->life().hasProcess()) pids[c->pid] = name;
    }
    return pids;
  };
  cb.startsUnderWay = [this] { return startsUnderWay_; };
  cb.onRegister = [this, alive](const std::shared_ptr<Connection>& conn, const wire::RegisterExecutor& m,
                                const std::string& owner) -> std::optional<ExecutorBinding> {
    if (alive.expired()) return std::nullopt;
    auto timer = timed(AgentSection::kExecutorMessage);
    return onRegister(conn, m, owner);
  };
  cb.onMessage = [this, alive](const ExecutorBinding& b, const std::shared_ptr<Connection>& conn,
                               wire::Envelope& e) {
    if (alive.expired()) return;
    Container* c = byName(b.container, b.generation);
    if (!c || c->conn != conn) return conn->close("executor's container is gone");
    auto timer = timed(AgentSection::kExecutorMessage);
    onExecutorMessage(*c, e);
  };
  cb.onClosed = [this, alive](const ExecutorBinding& b, const std::shared_ptr<Connection>& conn,
                              const std::string& reason) {
    if (alive.expired()) return;
    Container* c = byName(b.container, b.generation);
    if (!c || c->conn != conn) return;
    LOG_DEBUG("executor link of " << c->name << " closed: " << reason);
    onLinkClosed(*c);
  };
  return cb;
}

// Why `m` may not register (empty: it may): the container must run, the
// connecting process must be of its tree, and the secret must match.
std::string ExecutorManager::registrationRefusal(const Container* c, const wire::RegisterExecutor& m,
                                                 const std::string& owner) const {
  if (!c || !c->life().hasProcess()) {
    return "this agent runs no executor " + m.executor_id() + " of framework " + m.framework_id();
  }
  if (c->name != owner) {
    // A task of another executor (another framework) presenting these ids.
    return "not authorized: the connecting process does not belong to executor " + m.executor_id();
  }
  if (!c->secret.empty() && !sameSecret(c->secret, m.executor_secret())) {
    return "not authorized: wrong executor secret for executor " + m.executor_id();
  }
  return "";
}

std::optional<ExecutorBinding> ExecutorManager::onRegister(const std::shared_ptr<Connection>& conn,
                                                          const wire::RegisterExecutor& m,
                                                          const std::string& owner) {
  Container* c = find(m.framework_id(), m.executor_id());
  if (std::string refusal = registrationRefusal(c, m, owner); !refusal.empty()) {
    LOG_WARNING("executor registration refused: " << refusal);
    wire::Envelope e;
    e.mutable_error()->set_message(refusal);
    e.mutable_error()->set_fatal(true);
    (void)conn->send(e);
    conn->closeAfterFlush(refusal);
    return std::nullopt;
  }
  bool recovering = c->life().state() == ContainerState::kRecovering;
  if (Status st = c->on(ContainerEvent::kRegistered); !st) {
    LOG_WARNING("executor registration of " << c->name << " refused: " << st.error().describe());
    conn->close(st.error().describe());
    return std::nullopt;
  }
  if (c->conn && c->conn != conn) c->conn->close("executor registered on a new connection");
  c->conn = conn;
  acceptUnacknowledged(*c, m);
  if (recovering) {
    reattach(*c, m);
  } else {
    loseUndelivered(*c, m);
  }
  wire::Envelope reply;
  auto* r = reply.mutable_executor_registered();
  r->set_agent_id(agentId_);
  *r->mutable_framework() = c->framework;
  *r->mutable_executor() = c->executor;
  sendToExecutor(*c, reply);
  resume(*c);
  checkpoint(*c);
  maybeIdle(*c);
  return ExecutorBinding{c->name, c->generation};
}

// Only updates of tasks this executor runs (as the agent knows them, or
// as it reports them after an agent restart) go on to the framework.
void ExecutorManager::acceptUnacknowledged(Container& c, const wire::RegisterExecutor& m) {
  std::set<std::string> reportedTasks;
  for (const auto& t : m.tasks()) reportedTasks.insert(t.task_id());
  size_t unknown = 0;
  for (const auto& s : m.unacknowledged()) {
    if (c.tasks().count(s.task_id()) || reportedTasks.count(s.task_id())) {
      acceptExecutorUpdate(c, s);
    } else {
      ++unknown;
    }
  }
  if (unknown > 0 && c.conn) {
    refuseExecutorMessage(*c.conn, c.name, std::to_string(unknown) + " unacknowledged updates of tasks this executor does not run",
           false);
  }
}

// An executor that outlived an agent restart reports the tasks it still
// runs: the agent's checkpointed tasks it no longer runs are lost, the ones
// it reports and the agent did not know of are adopted.
void ExecutorManager::reattach(Container& c, const wire::RegisterExecutor& m) {
  std::set<std::string> reported;
  for (const auto& t : m.tasks()) reported.insert(t.task_id());
  std::vector<std::string> lost;
  for (const auto& [id, t] : c.tasks()) {
    if (t.sent && !reported.count(id)) lost.push_back(id);
  }
  for (const auto& id : lost) {
    emit(&c, agentStatus(c.framework.id(), c.executor.executor_id(), id, wire::TASK_LOST,
                         wire::REASON_AGENT_RESTARTED,
                         "the executor no longer runs this task after the agent restarted"));
  }
  for (const auto& t : m.tasks()) {
    if (c.hasTask(t.task_id())) continue;
    ContainerTask& task = c.addTask(t);
    task.sent = true;
    armMaxDuration(c, task);
  }
  LOG_INFO("executor " << c.executor.executor_id() << " of framework " << c.framework.id()
                       << " re-attached with " << c.tasks().size() << " tasks");
}

// An executor that reconnects while the agent ran on reports every task it
// runs (and the terminal updates it still holds, accepted above). A task
// the agent put on the old link that it does not report was lost with that
// link before the executor read it: TASK_LOST, as after an agent restart
// (at most once: the framework decides whether to run it again), or
// TASK_KILLED if it was being killed. Tasks that found no link at all were
// never sent and go out in resume().
void ExecutorManager::loseUndelivered(Container& c, const wire::RegisterExecutor& m) {
  std::set<std::string> reported;
  for (const auto& t : m.tasks()) reported.insert(t.task_id());
  std::vector<std::pair<std::string, const ContainerTask*>> gone;
  for (const auto& [id, t] : c.tasks()) {
    if (t.sent && !reported.count(id)) gone.emplace_back(id, &t);
  }
  std::vector<wire::TaskStatus> ends;
  for (const auto& [id, t] : gone) {
    ends.push_back(t->killing ? agentStatus(c.framework.id(), c.executor.executor_id(), id, wire::TASK_KILLED,
                                            t->killReason, "killed; its executor never received it")
                              : agentStatus(c.framework.id(), c.executor.executor_id(), id, wire::TASK_LOST,
                                            wire::REASON_NONE,
                                            "lost with the executor's old link: it re-registered without this task"));
  }
  for (auto& status : ends) emit(&c, std::move(status));
}

// After a (re-)registration: the tasks not yet sent, the kills not yet
// answered, and a shutdown the executor was asked for on its old link.
void ExecutorManager::resume(Container& c) {
  std::vector<std::string> ids;
  for (const auto& [id, t] : c.tasks()) ids.push_back(id);
  for (const auto& id : ids) {
    ContainerTask& t = *c.task(id);
    if (!t.sent) {
      sendLaunch(c, t);
    } else if (t.killing) {
      wire::Envelope k;
      k.mutable_kill_task()->set_framework_id(c.framework.id());
      k.mutable_kill_task()->set_task_id(id);
      k.mutable_kill_task()->set_grace_s(t.graceS);
      sendToExecutor(c, k);
    }
  }
  if (c.life().state() == ContainerState::kShuttingDown) sendShutdown(c);
}

void ExecutorManager::onExecutorMessage(Container& c, wire::Envelope& e) {
  if (e.has_status_update()) {
    const std::string& taskId = e.status_update().status().task_id();
    if (!c.task(taskId)) {
      return refuseExecutorMessage(*c.conn, c.name, "status update for task " + taskId + ", which this executor does not run",
                    false);
    }
    return acceptExecutorUpdate(c, e.status_update().status());
  }
  LOG_DEBUG("executor " << c.name << ": ignoring message field " << e.body_case());
}

void ExecutorManager::onLinkClosed(Container& c) {
  c.conn.reset();
  if (c.life().state() == ContainerState::kExited) return postFinalize(c);
  LOG_WARNING("executor " << c.executor.executor_id() << " of framework " << c.framework.id()
                          << " (pid " << c.pid << ") dropped its link; waiting for it to reconnect or exit");
}

// A task counts as sent once its LaunchTask is on the executor's link;
// with no link (the executor is reconnecting) it waits for resume().
void ExecutorManager::sendLaunch(Container& c, ContainerTask& t) {
  wire::Envelope e;
  *e.mutable_launch_task()->mutable_task() = t.info;
  if (c.image && isBuiltinExecutor(c.executor)) {
    // Checked when the image came (onPulled): a command is there.
    if (Result<wire::TaskInfo> run = withImageConfig(t.info, *c.image)) *e.mutable_launch_task()->mutable_task() = *run;
  }
  if (!sendToExecutor(c, e)) return;
  t.sent = true;
  armMaxDuration(c, t);
}

bool ExecutorManager::sendToExecutor(Container& c, const wire::Envelope& e) {
  return c.conn && c.conn->open() && static_cast<bool>(c.conn->send(e));
}

void ExecutorManager::recover(std::vector<ExecutorCheckpoint> checkpoints) {
  std::vector<KnownContainer> known;
  for (const auto& ck : checkpoints) known.push_back(knownContainer(ck));
  for (auto& iso : isolators_) {
    if (auto st = iso->recover(known); !st) LOG_ERROR(iso->name() << " recover: " << st.error().describe());
  }
  std::weak_ptr<int> alive = alive_;
  for (auto& ck : checkpoints) {
    if (containers_.count(containerName(ck.framework.id(), ck.executor.executor_id()))) continue;
    Container& c = create(ck.framework, ck.executor);
    c.sandbox = ck.sandbox;
    c.secret = ck.secret;
    c.pid = ck.pid;
    c.startTime = ck.startTime;
    if (!ck.imageLayers.empty()) c.image = ContainerImage{.layers = ck.imageLayers};
    c.take(ContainerEvent::kAdopted);  // a new record: preparing
    for (auto& t : ck.tasks) {
      if (c.hasTask(t.task_id())) continue;  // a damaged checkpoint: each id once
      ContainerTask& task = c.addTask(t);
      task.sent = true;
      auto l = ck.latest.find(t.task_id());
      if (l != ck.latest.end()) task.latest = l->second;
    }
    auto start = processStartTimeOf(ck.pid);
    Status watched = Error{"executor pid " + std::to_string(ck.pid) + " is gone"};
    if (start && *start == ck.startTime) {
      watched = launcher_.watch(ck.pid, [this, alive, name = c.name, gen = c.generation](const ExitInfo& e) {
        if (alive.expired()) return;
        auto timer = timed(AgentSection::kExecutorExit);
        onExit(name, gen, e);
      });
    }
    if (!watched) {
      LOG_WARNING("executor " << c.name << " did not survive the agent restart: " << watched.error().describe());
      c.take(ContainerEvent::kExited);  // recovering since kAdopted above
      failContainer(c, wire::TASK_LOST, wire::REASON_EXECUTOR_EXITED,
                    "executor (pid " + std::to_string(ck.pid) + ") exited while the agent was down");
      continue;
    }
    LOG_INFO("re-attaching to executor " << c.name << " (pid " << c.pid << ") with "
                                         << c.tasks().size() << " tasks");
    for (auto& iso : isolators_) {
      (void)iso->watch(c.id, limitWatcher(c));
    }
    armTimer(c, Container::Timer::kRegister, options_.recoveryTimeout, [this](Container& c) {
      if (c.life().state() != ContainerState::kRecovering) return;
      failContainer(c, wire::TASK_LOST, wire::REASON_AGENT_RESTARTED,
                    "executor did not reconnect after the agent restarted");
    });
  }
}

void ExecutorManager::fillRegistration(wire::RegisterAgent* registration) const {
  std::set<std::string> frameworks;
  for (const auto& [name, c] : containers_) {
    if (frameworks.insert(c->framework.id()).second) *registration->add_frameworks() = c->framework;
    c->fillRegistration(registration->add_executors());
  }
}

}  // namespace allot
