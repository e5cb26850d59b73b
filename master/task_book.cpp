#include "master/task_book.h"

#include "base/check.h"
#include "proto/task_state.h"

namespace allot {
namespace {

std::string endedKey(const std::string& frameworkId, const std::string& taskId) {
  return frameworkId + "/" + taskId;
}

}  // namespace

const TaskRecord& TaskBook::launch(const std::string& frameworkId, const wire::TaskInfo& info,
                                   Resources charged, TimePoint now) {
  auto [it, inserted] = byFramework_[frameworkId].try_emplace(info.task_id());
  CHECK(inserted);  // validateTask refuses a task id in use
  TaskRecord& record = it->second;
  record.info = info;
  record.charged = std::move(charged);
  record.latest.set_task_id(info.task_id());
  record.latest.set_framework_id(frameworkId);
  record.latest.set_agent_id(info.agent_id());
  record.latest.set_state(wire::TASK_STAGING);
  record.launchedAt = now;
  ++live_;
  count(record.latest, 1);
  index(info.agent_id(), frameworkId, info.task_id());
  return record;
}

bool TaskBook::adopt(const std::string& frameworkId, const wire::TaskInfo& info, Resources charged,
                     const wire::TaskStatus& latest) {
  bool names = latest.task_id() == info.task_id();
  CHECK(!(names && isTerminal(latest.state())));  // an ended task is not adopted
  auto [it, inserted] = byFramework_[frameworkId].try_emplace(info.task_id());
  TaskRecord& record = it->second;
  if (inserted) {
    ++live_;
    count(record.latest, 1);
  } else if (record.info.agent_id() != info.agent_id()) {
    return false;
  }
  record.info = info;
  record.charged = std::move(charged);
  if (names) {
    count(record.latest, -1);
    record.latest = latest;
    count(record.latest, 1);
  }
  index(info.agent_id(), frameworkId, info.task_id());
  return true;
}

const TaskRecord* TaskBook::update(const std::string& frameworkId, const std::string& taskId,
                                   const wire::TaskStatus& status) {
  Tasks* tasks = nullptr;
  auto t = findLive(frameworkId, taskId, &tasks);
  if (tasks == nullptr || t == tasks->end()) return nullptr;
  count(t->second.latest, -1);
  t->second.latest = status;
  if (!isTerminal(status.state())) {
    count(t->second.latest, 1);
    return nullptr;
  }
  --live_;
  std::string agentId = t->second.info.agent_id();
  ended_.push_back(EndedTask{frameworkId, std::move(t->second)});
  tasks->erase(t);
  unindex(agentId, frameworkId, taskId);
  rememberEnded(agentId, frameworkId, taskId);
  const TaskRecord* record = &ended_.back().record;
  if (ended_.size() > kEndedTasksShown) {
    ended_.pop_front();
    ++endedDropped_;
  }
  return record;
}

const TaskRecord* TaskBook::markRevoking(const std::string& frameworkId, const std::string& taskId) {
  Tasks* tasks = nullptr;
  auto t = findLive(frameworkId, taskId, &tasks);
  if (tasks == nullptr || t == tasks->end()) return nullptr;
  t->second.revoking = true;
  return &t->second;
}

std::optional<wire::TaskInfo> TaskBook::drop(const std::string& frameworkId, const std::string& taskId) {
  Tasks* tasks = nullptr;
  auto t = findLive(frameworkId, taskId, &tasks);
  if (tasks == nullptr || t == tasks->end()) return std::nullopt;
  wire::TaskInfo info = std::move(t->second.info);
  erase(*tasks, t);
  unindex(info.agent_id(), frameworkId, taskId);
  return info;
}

std::unordered_set<std::string> TaskBook::dropFramework(const std::string& frameworkId) {
  std::unordered_set<std::string> agents;
  auto fw = byFramework_.find(frameworkId);
  if (fw == byFramework_.end()) return agents;
  for (const auto& [taskId, task] : fw->second) {
    count(task.latest, -1);
    --live_;
    agents.insert(task.info.agent_id());
  }
  for (const auto& agentId : agents) {
    auto a = byAgent_.find(agentId);
    if (a != byAgent_.end()) a->second.live.erase(frameworkId);
  }
  byFramework_.erase(fw);
  return agents;
}

std::vector<std::pair<std::string, wire::TaskInfo>> TaskBook::dropAgent(const std::string& agentId) {
  std::vector<std::pair<std::string, wire::TaskInfo>> dropped;
  auto a = byAgent_.find(agentId);
  if (a == byAgent_.end()) return dropped;
  for (const auto& [frameworkId, taskIds] : a->second.live) {
    auto fw = byFramework_.find(frameworkId);
    if (fw == byFramework_.end()) continue;
    for (const auto& taskId : taskIds) {
      auto t = fw->second.find(taskId);
      if (t == fw->second.end()) continue;
      dropped.emplace_back(frameworkId, std::move(t->second.info));
      erase(fw->second, t);
    }
  }
  byAgent_.erase(a);
  return dropped;
}

void TaskBook::rememberEnded(const std::string& agentId, const std::string& frameworkId,
                             const std::string& taskId) {
  AgentTasks& agent = byAgent_[agentId];
  std::string key = endedKey(frameworkId, taskId);
  if (!agent.ended.insert(key).second) return;
  agent.endedOrder.push_back(std::move(key));
  if (agent.endedOrder.size() > kMaxEndedTasksPerAgent) {
    agent.ended.erase(agent.endedOrder.front());
    agent.endedOrder.pop_front();
  }
}

const TaskRecord* TaskBook::find(const std::string& frameworkId, const std::string& taskId) const {
  const Tasks& tasks = ofFramework(frameworkId);
  auto t = tasks.find(taskId);
  return t == tasks.end() ? nullptr : &t->second;
}

const TaskBook::Tasks& TaskBook::ofFramework(const std::string& frameworkId) const {
  static const Tasks kNone;
  auto fw = byFramework_.find(frameworkId);
  return fw == byFramework_.end() ? kNone : fw->second;
}

const TaskBook::TaskIds& TaskBook::onAgent(const std::string& agentId) const {
  static const TaskIds kNone;
  auto a = byAgent_.find(agentId);
  return a == byAgent_.end() ? kNone : a->second.live;
}

size_t TaskBook::countOnAgent(const std::string& agentId) const {
  size_t n = 0;
  for (const auto& [frameworkId, taskIds] : onAgent(agentId)) n += taskIds.size();
  return n;
}

bool TaskBook::endedOn(const std::string& agentId, const std::string& frameworkId,
                       const std::string& taskId) const {
  auto a = byAgent_.find(agentId);
  return a != byAgent_.end() && a->second.ended.count(endedKey(frameworkId, taskId)) > 0;
}

int64_t TaskBook::countOf(wire::TaskState state) const {
  return wire::TaskState_IsValid(state) ? byState_[static_cast<size_t>(state)] : byState_.back();
}

TaskBook::Tasks::iterator TaskBook::findLive(const std::string& frameworkId, const std::string& taskId,
                                             Tasks** tasks) {
  auto fw = byFramework_.find(frameworkId);
  if (fw == byFramework_.end()) return {};
  *tasks = &fw->second;
  return fw->second.find(taskId);
}

void TaskBook::index(const std::string& agentId, const std::string& frameworkId,
                     const std::string& taskId) {
  byAgent_[agentId].live[frameworkId].insert(taskId);
}

void TaskBook::unindex(const std::string& agentId, const std::string& frameworkId,
                       const std::string& taskId) {
  auto a = byAgent_.find(agentId);
  if (a == byAgent_.end()) return;
  auto ids = a->second.live.find(frameworkId);
  if (ids == a->second.live.end()) return;
  ids->second.erase(taskId);
  if (ids->second.empty()) a->second.live.erase(ids);
}

void TaskBook::erase(Tasks& tasks, Tasks::iterator task) {
  count(task->second.latest, -1);
  --live_;
  tasks.erase(task);
}

void TaskBook::count(const wire::TaskStatus& status, int64_t delta) {
  int state = status.state();
  size_t slot = wire::TaskState_IsValid(state) ? static_cast<size_t>(state) : byState_.size() - 1;
  byState_[slot] += delta;
}

}  // namespace allot
