// Operator actions on the master (allotctl drain / undrain / kill) and the
// gauges /metrics reads (from counts kept where the state changes). The
// HTTP side is master/http_api.cpp.
#include "base/log.h"
#include "master/master.h"

namespace allot {

Status Master::drainAgent(const std::string& agentId, Duration deadline) {
  AgentRecord* found = agents_.find(agentId);
  if (found == nullptr) return Error{"no agent " + agentId};
  AgentRecord& agent = *found;
  double deadlineS = std::chrono::duration<double>(deadline).count();
  agents_.drain(agent, wallClockSeconds() + deadlineS);
  allocator_->setAgentActive(agent.handle(), false);
  removeOffers(offers_.ofAgent(agent.id), true, true);
  size_t asked = 0;
  if (agent.peer) {
    for (const auto& [fid, taskIds] : tasks_.onAgent(agent.id)) {
      for (const auto& tid : taskIds) {
        wire::Envelope e;
        auto* k = e.mutable_kill_task();
        k->set_framework_id(fid);
        k->set_task_id(tid);
        k->set_agent_id(agentId);
        k->set_grace_s(deadlineS);
        k->set_reason(wire::REASON_AGENT_DRAINED);
        outbox_.send(*agent.peer, e);
        ++asked;
      }
    }
  }
  LOG_WARNING("agent " << agentId << " draining: offers stopped, " << asked
                       << " tasks asked to finish within " << deadlineS << " s");
  return okStatus();
}

Status Master::undrainAgent(const std::string& agentId) {
  AgentRecord* agent = agents_.find(agentId);
  if (agent == nullptr) return Error{"no agent " + agentId};
  if (!agents_.undrain(*agent)) return okStatus();
  if (agent->peer) allocator_->setAgentActive(agent->handle(), true);
  allocationPending_ = true;
  LOG_WARNING("agent " << agentId << " undrained: offers resume");
  return okStatus();
}

Status Master::killTask(const std::string& taskId, const std::string& frameworkId) {
  FrameworkRecord* owner = nullptr;
  for (auto& [fid, fw] : frameworks_) {
    if (!frameworkId.empty() && fid != frameworkId) continue;
    if (tasks_.find(fid, taskId)) {
      if (owner) return Error{"task id " + taskId + " is ambiguous: name the framework"};
      owner = &fw;
    }
  }
  if (!owner) return Error{"no task " + taskId};
  wire::KillTask kill;
  kill.set_framework_id(owner->id);
  kill.set_task_id(taskId);
  LOG_WARNING("operator kills task " << taskId << " of framework " << owner->id);
  metrics_.tasksKilledByOperator().Increment();
  onKill(*owner, kill);
  return okStatus();
}

void Master::refreshGauges() {
  for (int s = wire::TaskState_MIN; s <= wire::TaskState_MAX; ++s) {
    if (!wire::TaskState_IsValid(s)) continue;
    auto state = static_cast<wire::TaskState>(s);
    metrics_.tasks(state).Set(static_cast<double>(tasks_.countOf(state)));
  }
  metrics_.agents().Set(static_cast<double>(agents_.size()));
  metrics_.agentsDraining().Set(static_cast<double>(agents_.drainingCount()));
  metrics_.frameworks().Set(static_cast<double>(frameworks_.size()));
  metrics_.offersOutstanding().Set(static_cast<double>(offers_.size()));
}

}  // namespace allot
