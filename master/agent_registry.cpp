#include "master/agent_registry.h"

namespace allot {

AgentRecord& AgentRegistry::add(const std::string& id, bool* inserted) {
  auto [it, fresh] = agents_.try_emplace(id);
  if (fresh) {
    it->second.id = id;
    it->second.recheck_ = recheck_.emplace(TimePoint::min(), &it->second);
  }
  if (inserted) *inserted = fresh;
  return it->second;
}

void AgentRegistry::remove(const std::string& id) {
  auto it = agents_.find(id);
  if (it == agents_.end()) return;
  unsetHandle(it->second);
  undrain(it->second);
  recheck_.erase(it->second.recheck_);
  agents_.erase(it);
}

void AgentRegistry::recheckAt(AgentRecord& agent, TimePoint at) {
  auto entry = recheck_.extract(agent.recheck_);
  entry.key() = at;
  agent.recheck_ = recheck_.insert(std::move(entry));
}

AgentRecord* AgentRegistry::dueFirst(TimePoint now) {
  if (recheck_.empty() || !(recheck_.begin()->first < now)) return nullptr;
  return recheck_.begin()->second;
}

void AgentRegistry::setHandle(AgentRecord& agent, AgentHandle handle) {
  unsetHandle(agent);
  agent.handle_ = handle;
  agent.hasHandle_ = true;
  byHandle_[handle] = agent.id;
}

void AgentRegistry::drain(AgentRecord& agent, double deadlineS) {
  if (!agent.draining_) ++draining_;
  agent.draining_ = true;
  agent.drainDeadlineS_ = deadlineS;
}

bool AgentRegistry::undrain(AgentRecord& agent) {
  if (!agent.draining_) return false;
  --draining_;
  agent.draining_ = false;
  agent.drainDeadlineS_ = 0;
  return true;
}

AgentRecord* AgentRegistry::find(const std::string& id) {
  auto it = agents_.find(id);
  return it == agents_.end() ? nullptr : &it->second;
}

const AgentRecord* AgentRegistry::find(const std::string& id) const {
  auto it = agents_.find(id);
  return it == agents_.end() ? nullptr : &it->second;
}

AgentRecord* AgentRegistry::byHandle(AgentHandle handle) {
  auto it = byHandle_.find(handle);
  return it == byHandle_.end() ? nullptr : find(it->second);
}

void AgentRegistry::unsetHandle(AgentRecord& agent) {
  if (!agent.hasHandle_) return;
  auto it = byHandle_.find(agent.handle_);
  if (it != byHandle_.end() && it->second == agent.id) byHandle_.erase(it);
  agent.hasHandle_ = false;
}

}  // namespace allot
