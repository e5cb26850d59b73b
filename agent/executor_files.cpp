// ExecutorManager::taskSandbox: which sandbox holds a task's files, for the
// files API (agent/files_api.h).
#include "agent/executor_manager.h"

namespace allot {

std::optional<ExecutorManager::TaskSandbox> ExecutorManager::taskSandbox(const std::string& frameworkId,
                                                                         const std::string& taskId) const {
  // At most executorsMax containers: linear is fine for an HTTP request.
  for (const auto& [name, c] : containers_) {
    if (c->framework.id() != frameworkId || !c->tasks().count(taskId)) continue;
    return TaskSandbox{c->name, c->sandbox, c->framework.principal(), isBuiltinExecutor(c->executor)};
  }
  auto it = endedTasks_.find({frameworkId, taskId});
  if (it == endedTasks_.end()) return std::nullopt;
  return it->second;
}

bool ExecutorManager::taskRunsIn(const std::string& container, const std::string& taskId) const {
  auto it = containers_.find(container);
  return it != containers_.end() && it->second->tasks().count(taskId);
}

void ExecutorManager::rememberEnded(const Container& c, const std::string& taskId) {
  std::pair<std::string, std::string> key{c.framework.id(), taskId};
  auto [it, inserted] = endedTasks_.insert_or_assign(
      key, TaskSandbox{c.name, c.sandbox, c.framework.principal(), isBuiltinExecutor(c.executor)});
  if (!inserted) return;
  endedOrder_.push_back(std::move(key));
  while (endedOrder_.size() > kEndedTasksRemembered) {
    endedTasks_.erase(endedOrder_.front());
    endedOrder_.pop_front();
  }
}

}  // namespace allot
