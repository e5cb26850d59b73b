#include "shard/fold.h"

namespace allot {

Status AgentFold::attach(Slot slot) {
  if (agents_.size() >= maxAgents_) {
    return Error{"the shard holds " + std::to_string(maxAgents_) + " agents already"};
  }
  if (!agents_.emplace(slot, Agent{}).second) return Error{"slot " + std::to_string(slot) + " is taken"};
  return okStatus();
}

void AgentFold::detach(Slot slot) { agents_.erase(slot); }

void AgentFold::heard(Slot slot, Agent& agent) {
  if (agent.heard) return;
  agent.heard = true;
  heardOrder_.push_back(slot);
}

FoldAction AgentFold::fold(Slot slot, const wire::Envelope& message, wire::Envelope* answer) {
  auto it = agents_.find(slot);
  if (it == agents_.end()) return FoldAction::kDrop;
  Agent& agent = it->second;
  heard(slot, agent);
  switch (message.body_case()) {
    case wire::Envelope::kHeartbeat:
      answer->mutable_heartbeat_ack()->set_sequence(message.heartbeat().sequence());
      ++counts_.answered;
      return FoldAction::kAnswer;
    case wire::Envelope::kUsageReport: {
      std::string usage = message.usage_report().SerializeAsString();
      if (usage == agent.lastUsage) {
        ++counts_.dropped;
        return FoldAction::kDrop;
      }
      agent.lastUsage = std::move(usage);
      break;
    }
    case wire::Envelope::kRegisterAgent:
      agent.report = message.register_agent();
      agent.lastUsage.clear();
      break;
    case wire::Envelope::kStatusUpdate:
      if (agent.report) applyStatus(*agent.report, message.status_update().status());
      break;
    default:
      break;
  }
  ++counts_.forwarded;
  return FoldAction::kForward;
}

// Linear in the report: a status names its executor, whose latest list
// holds at most one status per task.
void AgentFold::applyStatus(wire::RegisterAgent& report, const wire::TaskStatus& status) {
  for (auto& executor : *report.mutable_executors()) {
    if (executor.info().framework_id() != status.framework_id() ||
        executor.info().executor_id() != status.executor_id()) {
      continue;
    }
    for (auto& latest : *executor.mutable_latest()) {
      if (latest.task_id() == status.task_id()) {
        latest = status;
        return;
      }
    }
    for (const auto& task : executor.tasks()) {
      if (task.task_id() == status.task_id()) {
        *executor.add_latest() = status;
        return;
      }
    }
    return;
  }
}

void AgentFold::registered(Slot slot, const wire::AgentRegistered& m) {
  auto it = agents_.find(slot);
  if (it == agents_.end() || !it->second.report) return;
  it->second.report->mutable_info()->set_id(m.agent_id());
  it->second.report->set_agent_secret(m.agent_secret());
}

std::vector<Slot> AgentFold::takeLiveness() {
  std::vector<Slot> out;
  out.reserve(heardOrder_.size());
  for (Slot slot : heardOrder_) {
    auto it = agents_.find(slot);
    if (it == agents_.end()) continue;
    it->second.heard = false;
    out.push_back(slot);
  }
  heardOrder_.clear();
  return out;
}

const wire::RegisterAgent* AgentFold::report(Slot slot) const {
  auto it = agents_.find(slot);
  if (it == agents_.end() || !it->second.report) return nullptr;
  return &*it->second.report;
}

}  // namespace allot
