#include "shard/fold.h"

#include <unordered_set>

#include "proto/input_limits.h"
#include "proto/task_state.h"

namespace allot {
namespace {

// Length-prefixed: ids are arbitrary bytes.
std::string taskKey(const std::string& frameworkId, const std::string& taskId) {
  return std::to_string(frameworkId.size()) + ':' + frameworkId + taskId;
}

struct TaskAt {
  int executor = 0;
  int task = 0;
};

// Where the report holds the framework's task, under any of its executors.
std::optional<TaskAt> findTask(const wire::RegisterAgent& report, const std::string& frameworkId,
                               const std::string& taskId) {
  for (int e = 0; e < report.executors_size(); ++e) {
    const wire::ExecutorState& ex = report.executors(e);
    if (ex.info().framework_id() != frameworkId) continue;
    for (int t = 0; t < ex.tasks_size(); ++t) {
      if (ex.tasks(t).task_id() == taskId) return TaskAt{e, t};
    }
  }
  return std::nullopt;
}

size_t taskCount(const wire::RegisterAgent& report) {
  size_t n = 0;
  for (const auto& ex : report.executors()) n += ex.tasks_size();
  return n;
}

// An executor's tasks and latest statuses are paired by index (the master
// reads them so); a missing status reads as an empty one.
void setLatest(wire::RegisterAgent& report, TaskAt at, const wire::TaskStatus& status) {
  wire::ExecutorState* ex = report.mutable_executors(at.executor);
  while (ex->latest_size() <= at.task) ex->add_latest();
  *ex->mutable_latest(at.task) = status;
}

void eraseTask(wire::RegisterAgent& report, TaskAt at) {
  wire::ExecutorState* ex = report.mutable_executors(at.executor);
  ex->mutable_tasks()->DeleteSubrange(at.task, 1);
  if (at.task < ex->latest_size()) ex->mutable_latest()->DeleteSubrange(at.task, 1);
}

// Adds the task under the executor `info` names (added when missing);
// nothing past the limits of a registration.
std::optional<TaskAt> addTask(wire::RegisterAgent& report, const wire::ExecutorInfo& info,
                              const wire::TaskInfo& task, const wire::TaskStatus& latest) {
  if (taskCount(report) >= limits::kTasksPerAgentMax) return std::nullopt;
  int e = 0;
  while (e < report.executors_size() && (report.executors(e).info().framework_id() != info.framework_id() ||
                                         report.executors(e).info().executor_id() != info.executor_id())) {
    ++e;
  }
  if (e == report.executors_size()) {
    if (report.executors_size() >= static_cast<int>(limits::kExecutorsPerAgentMax)) return std::nullopt;
    *report.add_executors()->mutable_info() = info;
  }
  wire::ExecutorState* ex = report.mutable_executors(e);
  TaskAt at{e, ex->tasks_size()};
  *ex->add_tasks() = task;
  setLatest(report, at, latest);
  return at;
}

// The executor the agent runs a launched task in (agent/executor_spec.h,
// executorFor). A command task with a user of its own under a framework
// without one depends on the agent's --default-user, which the shard does
// not know: its first status update names its executor and it moves there.
wire::ExecutorInfo launchExecutor(const wire::RunTask& m) {
  const wire::TaskInfo& task = m.task();
  wire::ExecutorInfo executor;
  if (task.has_executor()) {
    executor = task.executor();
    if (executor.executor_id().empty()) executor.set_executor_id(task.task_id());
  } else if (!task.container().image().empty()) {
    executor.set_executor_id(std::string(kCommandExecutorId) + "@" + task.task_id());
  } else if (!task.command().user().empty() && !m.framework().user().empty() &&
             task.command().user() != m.framework().user()) {
    executor.set_executor_id(std::string(kCommandExecutorId) + "." + task.command().user());
  } else {
    executor.set_executor_id(kCommandExecutorId);
  }
  executor.set_framework_id(m.framework().id());
  return executor;
}

}  // namespace

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
      keepEndings(agent);
      agent.lastUsage.clear();
      break;
    case wire::Envelope::kStatusUpdate:
      if (agent.report) applyStatus(agent, message.status_update().status());
      break;
    default:
      break;
  }
  ++counts_.forwarded;
  return FoldAction::kForward;
}

// A status names its executor; a task launched under another (see
// launchExecutor) moves there. An ended task stays, as the agent reports
// it (agent/agent.h addUnacknowledgedEndings): running, without resources,
// until its terminal update is acknowledged.
void AgentFold::applyStatus(Agent& agent, const wire::TaskStatus& status) {
  wire::RegisterAgent& report = *agent.report;
  std::string key = taskKey(status.framework_id(), status.task_id());
  if (agent.endings.contains(key)) return;
  std::optional<TaskAt> at = findTask(report, status.framework_id(), status.task_id());
  if (!at) return;
  const wire::ExecutorInfo& held = report.executors(at->executor).info();
  if (!status.executor_id().empty() && held.executor_id() != status.executor_id()) {
    wire::TaskInfo task = report.executors(at->executor).tasks(at->task);
    eraseTask(report, *at);
    wire::ExecutorInfo named;
    named.set_framework_id(status.framework_id());
    named.set_executor_id(status.executor_id());
    at = addTask(report, named, task, status);
    if (!at) return;
  }
  if (!isTerminal(status.state())) return setLatest(report, *at, status);
  if (status.update_id().empty() || status.executor_id().empty()) return eraseTask(report, *at);
  wire::ExecutorState* ex = report.mutable_executors(at->executor);
  wire::TaskInfo* task = ex->mutable_tasks(at->task);
  std::string taskId = task->task_id();
  task->Clear();
  task->set_task_id(taskId);
  wire::TaskStatus running;
  running.set_task_id(taskId);
  running.set_framework_id(status.framework_id());
  running.set_executor_id(status.executor_id());
  running.set_state(wire::TASK_RUNNING);
  setLatest(report, *at, running);
  agent.endings.emplace(std::move(key), status.update_id());
}

// A new full report: the endings it still holds stay.
void AgentFold::keepEndings(Agent& agent) {
  if (agent.endings.empty()) return;
  std::unordered_set<std::string> held;
  for (const auto& ex : agent.report->executors()) {
    for (const auto& task : ex.tasks()) held.insert(taskKey(ex.info().framework_id(), task.task_id()));
  }
  std::erase_if(agent.endings, [&](const auto& ending) { return !held.contains(ending.first); });
}

void AgentFold::launched(Slot slot, const wire::RunTask& m) {
  auto it = agents_.find(slot);
  if (it == agents_.end() || !it->second.report) return;
  wire::RegisterAgent& report = *it->second.report;
  const std::string& frameworkId = m.framework().id();
  const std::string& taskId = m.task().task_id();
  // The agent ignores these too.
  if (frameworkId.empty() || taskId.empty() || findTask(report, frameworkId, taskId)) return;
  wire::TaskStatus staging;
  staging.set_task_id(taskId);
  staging.set_framework_id(frameworkId);
  staging.set_state(wire::TASK_STAGING);
  if (!addTask(report, launchExecutor(m), m.task(), staging)) return;
  for (const auto& framework : report.frameworks()) {
    if (framework.id() == frameworkId) return;
  }
  if (report.frameworks_size() < static_cast<int>(limits::kFrameworksPerAgentMax)) {
    *report.add_frameworks() = m.framework();
  }
}

void AgentFold::acknowledged(Slot slot, const wire::StatusAcknowledgement& m) {
  auto it = agents_.find(slot);
  if (it == agents_.end() || !it->second.report) return;
  Agent& agent = it->second;
  auto ending = agent.endings.find(taskKey(m.framework_id(), m.task_id()));
  if (ending == agent.endings.end() || ending->second != m.update_id()) return;
  agent.endings.erase(ending);
  if (auto at = findTask(*agent.report, m.framework_id(), m.task_id())) eraseTask(*agent.report, *at);
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
