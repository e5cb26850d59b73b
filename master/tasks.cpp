// The task half of the master: status updates (forwarded to frameworks,
// acknowledgements forwarded back to agents), kills and reconciliation.
#include "base/log.h"
#include "master/master.h"

namespace allot {
void Master::sendMasterUpdate(FrameworkRecord& fw, const wire::TaskInfo& task,
                              wire::TaskState state, wire::Reason reason,
                              const std::string& message) {
  wire::Envelope e;
  wire::TaskStatus* s = e.mutable_status_update()->mutable_status();
  s->set_task_id(task.task_id());
  s->set_framework_id(fw.id);
  s->set_agent_id(task.agent_id());
  if (task.has_executor()) s->set_executor_id(task.executor().executor_id());
  s->set_state(state);
  s->set_reason(reason);
  s->set_message(message);
  s->set_timestamp_s(wallClockSeconds());
  sendToFramework(fw, e);
}

void Master::freeEnded(AgentRecord& agent, FrameworkRecord& fw, const TaskRecord& ended) {
  // Resources revoked from a framework are for the starved one: the
  // victim, which may relaunch at once, is not offered them again on this
  // agent for a few allocation rounds (a refusal, so they count toward its
  // share meanwhile, as declined resources do).
  if (ended.revoking) {
    allocator_->recoverRevoked(fw.handle, agent.handle(), ended.charged,
                               kRevokedHoldRounds * options_.allocationInterval, clock_.now());
  } else {
    allocator_->recover(fw.handle, agent.handle(), ended.charged, std::nullopt, clock_.now());
  }
  allocationPending_ = true;
}

// The framework an agent's update is for, or null when the update was
// dealt with here (not kept, or acknowledged for a removed framework).
Master::FrameworkRecord* Master::frameworkOfUpdate(AgentRecord& agent, const wire::TaskStatus& status) {
  auto fwIt = frameworks_.find(status.framework_id());
  if (fwIt == frameworks_.end() && !removedFrameworks_.count(status.framework_id())) {
    // Not removed by this master: after a failover the new leader hears from
    // agents before schedulers. Never acknowledge on the framework's behalf;
    // keep the update for its re-registration (or its failover timeout).
    const std::string& id = status.framework_id();
    if (id.empty() || id.size() > kMaxIdBytes || frameworks_.size() >= limits::kFrameworksMax) {
      LOG_WARNING("agent " << agent.id << ": update of task " << status.task_id()
                           << " for unknown framework '" << id.substr(0, kMaxIdBytes)
                           << "' not kept (the agent resends it)");
      return nullptr;
    }
    wire::FrameworkInfo info;
    info.set_id(id);
    FrameworkRecord& fw = ensureFramework(info);
    allocator_->setActive(fw.handle, false);
    fwIt = frameworks_.find(id);
  }
  if (fwIt == frameworks_.end()) {
    // This master removed the framework (unregistered, or its failover
    // timeout passed): acknowledge for it so the agent stops retrying, and
    // have the agent shut the framework's executors down.
    wire::Envelope ack;
    auto* a = ack.mutable_status_acknowledgement();
    a->set_framework_id(status.framework_id());
    a->set_task_id(status.task_id());
    a->set_update_id(status.update_id());
    outbox_.send(*agent.peer, ack);
    wire::Envelope shutdown;
    shutdown.mutable_shutdown_framework()->set_framework_id(status.framework_id());
    outbox_.send(*agent.peer, shutdown);
    return nullptr;
  }
  return &fwIt->second;
}

void Master::onStatusUpdate(AgentRecord& agent, const wire::StatusUpdate& m) {
  const wire::TaskStatus& status = m.status();
  FrameworkRecord* known = frameworkOfUpdate(agent, status);
  if (known == nullptr) return;
  FrameworkRecord& fw = *known;
  const TaskRecord* task = tasks_.find(fw.id, status.task_id());
  bool placedHere = task != nullptr && task->info.agent_id() == agent.id;
  // An agent speaks only for tasks the master placed on it (or that it
  // re-registered with), and for those that ended there lately (resends).
  // Exception: a framework this master knows only from agents (it failed
  // over; no scheduler registered here yet, so no secret) keeps the update
  // for its scheduler, which reconciles it.
  bool learnedFromAgents = !fw.peer && peers_.owner(IdKind::kFramework, fw.id) == nullptr;
  if (!placedHere && !learnedFromAgents && !tasks_.endedOn(agent.id, fw.id, status.task_id())) {
    LOG_WARNING("agent " << agent.id << ": dropped an update for task " << status.task_id()
                         << " of framework " << fw.id << ", which does not run there");
    sendError(*agent.peer, "StatusUpdate: task " + status.task_id() + " of framework " + fw.id +
                               " does not run on agent " + agent.id, false);
    return;
  }
  if (!placedHere && learnedFromAgents && isTerminal(status.state())) {
    tasks_.rememberEnded(agent.id, fw.id, status.task_id());  // its acknowledgement may pass
  }
  if (placedHere) {
    if (const TaskRecord* ended = tasks_.update(fw.id, status.task_id(), status)) {
      freeEnded(agent, fw, *ended);
    }
  }
  wire::Envelope e;
  *e.mutable_status_update()->mutable_status() = status;
  e.mutable_status_update()->mutable_status()->set_agent_id(agent.id);
  sendToFramework(fw, e);
}

void Master::onKill(FrameworkRecord& caller, const wire::KillTask& m) {
  // Another framework's task: only for principals the ACLs let operate.
  FrameworkRecord* target = &caller;
  if (!m.framework_id().empty() && m.framework_id() != caller.id) {
    auto other = frameworks_.find(m.framework_id());
    if (!options_.acls.operate(principalOf(caller)) || other == frameworks_.end()) {
      LOG_WARNING("framework " << caller.id << " (principal '" << principalOf(caller)
                               << "') may not kill tasks of framework " << m.framework_id());
      if (caller.peer) {
        sendError(*caller.peer, "KillTask: not authorized to kill tasks of framework " +
                                    m.framework_id(), false);
      }
      return;
    }
    target = &other->second;
  }
  FrameworkRecord& fw = *target;
  const TaskRecord* task = tasks_.find(fw.id, m.task_id());
  if (task == nullptr) {
    wire::TaskInfo unknown;
    unknown.set_task_id(m.task_id());
    unknown.set_agent_id(m.agent_id());
    sendMasterUpdate(fw, unknown, wire::TASK_LOST, wire::REASON_UNKNOWN_TASK,
                     "the master knows no task " + m.task_id());
    return;
  }
  const AgentRecord* agent = agents_.find(task->info.agent_id());
  if (agent == nullptr || !agent->peer) {
    LOG_INFO("kill of task " << m.task_id() << " waits for agent "
                             << task->info.agent_id() << " to reconnect");
    return;
  }
  wire::Envelope e;
  *e.mutable_kill_task() = m;
  e.mutable_kill_task()->set_framework_id(fw.id);
  e.mutable_kill_task()->set_agent_id(agent->id);
  outbox_.send(*agent->peer, e);
}

void Master::onAcknowledge(FrameworkRecord& fw, const wire::Acknowledge& m) {
  if (!m.framework_id().empty() && m.framework_id() != fw.id) {
    if (fw.peer) {
      sendError(*fw.peer, "Acknowledge: framework " + fw.id + " may not acknowledge updates of " +
                              m.framework_id(), false);
    }
    return;
  }
  std::string agentId = m.agent_id();
  const TaskRecord* task = tasks_.find(fw.id, m.task_id());
  if (agentId.empty() && task != nullptr) agentId = task->info.agent_id();
  const AgentRecord* agent = agents_.find(agentId);
  if (agent == nullptr || !agent->peer || m.update_id().empty()) return;
  // Only the framework's own tasks on that agent, live or lately ended.
  bool own = (task != nullptr && task->info.agent_id() == agentId) ||
             tasks_.endedOn(agentId, fw.id, m.task_id());
  if (!own) return;
  wire::Envelope e;
  auto* a = e.mutable_status_acknowledgement();
  a->set_framework_id(fw.id);
  a->set_task_id(m.task_id());
  a->set_update_id(m.update_id());
  outbox_.send(*agent->peer, e);
}

void Master::onReconcile(FrameworkRecord& fw, const wire::Reconcile& m) {
  auto answer = [&](const TaskRecord& task) {
    wire::Envelope e;
    *e.mutable_status_update()->mutable_status() = task.latest;
    auto* s = e.mutable_status_update()->mutable_status();
    s->set_update_id("");
    s->set_reason(wire::REASON_RECONCILIATION);
    sendToFramework(fw, e);
  };
  if (m.tasks().empty()) {
    for (const auto& [id, task] : tasks_.ofFramework(fw.id)) answer(task);
    return;
  }
  for (const auto& ref : m.tasks()) {
    if (const TaskRecord* task = tasks_.find(fw.id, ref.task_id())) {
      answer(*task);
      continue;
    }
    wire::TaskInfo unknown;
    unknown.set_task_id(ref.task_id());
    unknown.set_agent_id(ref.agent_id());
    sendMasterUpdate(fw, unknown, wire::TASK_LOST, wire::REASON_RECONCILIATION,
                     "the master knows no task " + ref.task_id());
  }
}

}  // namespace allot
