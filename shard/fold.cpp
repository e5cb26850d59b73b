#include "shard/fold.h"

#include <algorithm>

#include <google/protobuf/util/message_differencer.h>

#include "proto/input_limits.h"
#include "proto/task_state.h"

namespace allot {
namespace {

// Length-prefixed: ids are arbitrary bytes. Built in one allocation (a few
// keys per message).
std::string taskKey(const std::string& frameworkId, const std::string& taskId) {
  std::string length = std::to_string(frameworkId.size());
  std::string key;
  key.reserve(length.size() + 1 + frameworkId.size() + taskId.size());
  key.append(length).append(1, ':').append(frameworkId).append(taskId);
  return key;
}

std::string executorKey(const std::string& frameworkId, const std::string& executorId) {
  return taskKey(frameworkId, executorId);
}

// An executor's tasks and latest statuses are paired by index (the master
// reads them so); a missing status reads as an empty one.
void setLatest(wire::ExecutorState* ex, int task, const wire::TaskStatus& status) {
  while (ex->latest_size() <= task) ex->add_latest();
  *ex->mutable_latest(task) = status;
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

// A new full report: indexed once, its executors' latest statuses padded to
// their tasks (so that a task can swap places with its executor's last).
// A duplicate id keeps its first place, as a scan would find it.
void AgentFold::indexReport(Agent& agent) {
  agent.tasks.clear();
  agent.executors.clear();
  agent.frameworks.clear();
  agent.taskCount = 0;
  wire::RegisterAgent& report = *agent.report;
  for (int e = 0; e < report.executors_size(); ++e) {
    wire::ExecutorState* ex = report.mutable_executors(e);
    const std::string& frameworkId = ex->info().framework_id();
    agent.executors.emplace(executorKey(frameworkId, ex->info().executor_id()), e);
    while (ex->latest_size() < ex->tasks_size()) ex->add_latest();
    for (int t = 0; t < ex->tasks_size(); ++t) agent.tasks.emplace(taskKey(frameworkId, ex->tasks(t).task_id()), TaskAt{e, t});
    agent.taskCount += ex->tasks_size();
  }
  for (const auto& framework : report.frameworks()) agent.frameworks.insert(framework.id());
}

auto AgentFold::findTask(const Agent& agent, const std::string& frameworkId, const std::string& taskId)
    -> std::optional<TaskAt> {
  auto it = agent.tasks.find(taskKey(frameworkId, taskId));
  if (it == agent.tasks.end()) return std::nullopt;
  return it->second;
}

// The executor's last task (and its status) takes the erased one's place.
void AgentFold::eraseTask(Agent& agent, TaskAt at) {
  wire::ExecutorState* ex = agent.report->mutable_executors(at.executor);
  const std::string& frameworkId = ex->info().framework_id();
  int last = ex->tasks_size() - 1;
  auto erased = agent.tasks.find(taskKey(frameworkId, ex->tasks(at.task).task_id()));
  if (erased != agent.tasks.end() && erased->second.executor == at.executor && erased->second.task == at.task) {
    agent.tasks.erase(erased);
  }
  while (ex->latest_size() <= last) ex->add_latest();
  if (at.task != last) {
    ex->mutable_tasks()->SwapElements(at.task, last);
    ex->mutable_latest()->SwapElements(at.task, last);
    auto moved = agent.tasks.find(taskKey(frameworkId, ex->tasks(at.task).task_id()));
    if (moved != agent.tasks.end() && moved->second.executor == at.executor && moved->second.task == last) {
      moved->second.task = at.task;
    }
  }
  ex->mutable_tasks()->RemoveLast();
  ex->mutable_latest()->RemoveLast();
  --agent.taskCount;
}

// Adds the task under the executor `info` names (added when missing);
// nothing past the limits of a registration.
auto AgentFold::addTask(Agent& agent, const wire::ExecutorInfo& info, const wire::TaskInfo& task,
                        const wire::TaskStatus& latest) -> std::optional<TaskAt> {
  if (agent.taskCount >= limits::kTasksPerAgentMax) return std::nullopt;
  wire::RegisterAgent& report = *agent.report;
  auto [executor, added] = agent.executors.try_emplace(executorKey(info.framework_id(), info.executor_id()),
                                                       report.executors_size());
  if (added) {
    if (report.executors_size() >= static_cast<int>(limits::kExecutorsPerAgentMax)) {
      agent.executors.erase(executor);
      return std::nullopt;
    }
    *report.add_executors()->mutable_info() = info;
  }
  wire::ExecutorState* ex = report.mutable_executors(executor->second);
  TaskAt at{executor->second, ex->tasks_size()};
  *ex->add_tasks() = task;
  setLatest(ex, at.task, latest);
  agent.tasks.emplace(taskKey(info.framework_id(), task.task_id()), at);
  ++agent.taskCount;
  return at;
}

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

// A forwarded message shows the leader itself that the agent lives; the
// liveness summary names only the agents whose frames end at the shard
// (heartbeats, unchanged usage, confirmed registrations).
FoldAction AgentFold::fold(Slot slot, const wire::Envelope& message, wire::Envelope* answer) {
  auto it = agents_.find(slot);
  if (it == agents_.end()) return FoldAction::kDrop;
  FoldAction action = decide(it->second, message, answer);
  if (action == FoldAction::kForward) {
    ++counts_.forwarded;
  } else {
    heard(slot, it->second);
  }
  return action;
}

FoldAction AgentFold::decide(Agent& agent, const wire::Envelope& message, wire::Envelope* answer) {
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
      if (confirm(agent, message.register_agent(), answer)) return FoldAction::kAnswer;
      agent.report = message.register_agent();
      agent.registeredBy.reset();
      agent.asked = true;
      indexReport(agent);
      keepEndings(agent);
      agent.lastUsage.clear();
      break;
    case wire::Envelope::kStatusUpdate:
      trackUpdate(agent, message.status_update().status());
      if (agent.report) applyStatus(agent, message.status_update().status());
      break;
    default:
      break;
  }
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
  std::optional<TaskAt> at = findTask(agent, status.framework_id(), status.task_id());
  if (!at) return;
  const wire::ExecutorInfo& held = report.executors(at->executor).info();
  if (!status.executor_id().empty() && held.executor_id() != status.executor_id()) {
    wire::TaskInfo task = report.executors(at->executor).tasks(at->task);
    eraseTask(agent, *at);
    wire::ExecutorInfo named;
    named.set_framework_id(status.framework_id());
    named.set_executor_id(status.executor_id());
    at = addTask(agent, named, task, status);
    if (!at) return;
  }
  wire::ExecutorState* ex = report.mutable_executors(at->executor);
  if (!isTerminal(status.state())) return setLatest(ex, at->task, status);
  if (status.update_id().empty() || status.executor_id().empty()) return eraseTask(agent, *at);
  wire::TaskInfo* task = ex->mutable_tasks(at->task);
  std::string taskId = task->task_id();
  task->Clear();
  task->set_task_id(taskId);
  wire::TaskStatus running;
  running.set_task_id(taskId);
  running.set_framework_id(status.framework_id());
  running.set_executor_id(status.executor_id());
  running.set_state(wire::TASK_RUNNING);
  setLatest(ex, at->task, running);
  agent.endings.emplace(std::move(key), status.update_id());
}

// A new full report: the endings it still holds stay.
void AgentFold::keepEndings(Agent& agent) {
  std::erase_if(agent.endings, [&](const auto& ending) { return !agent.tasks.contains(ending.first); });
}

void AgentFold::launched(Slot slot, const wire::RunTask& m) {
  auto it = agents_.find(slot);
  if (it == agents_.end() || !it->second.report) return;
  Agent& agent = it->second;
  const std::string& frameworkId = m.framework().id();
  const std::string& taskId = m.task().task_id();
  // The agent ignores these too.
  if (frameworkId.empty() || taskId.empty() || findTask(agent, frameworkId, taskId)) return;
  wire::TaskStatus staging;
  staging.set_task_id(taskId);
  staging.set_framework_id(frameworkId);
  staging.set_state(wire::TASK_STAGING);
  if (!addTask(agent, launchExecutor(m), m.task(), staging)) return;
  if (agent.frameworks.contains(frameworkId)) return;
  if (agent.report->frameworks_size() < static_cast<int>(limits::kFrameworksPerAgentMax)) {
    *agent.report->add_frameworks() = m.framework();
    agent.frameworks.insert(frameworkId);
  }
}

// An update without an id is never acknowledged, nor sent again.
void AgentFold::trackUpdate(Agent& agent, const wire::TaskStatus& status) {
  if (status.update_id().empty()) return;
  if (agent.unacknowledged.size() >= kUnacknowledgedPerAgentMax) {
    agent.unsure = true;
    return;
  }
  agent.unacknowledged.insert(taskKey(status.framework_id(), status.update_id()));
}

void AgentFold::acknowledged(Slot slot, const wire::StatusAcknowledgement& m) {
  auto it = agents_.find(slot);
  if (it == agents_.end()) return;
  it->second.unacknowledged.erase(taskKey(m.framework_id(), m.update_id()));
  if (!it->second.report) return;
  Agent& agent = it->second;
  auto ending = agent.endings.find(taskKey(m.framework_id(), m.task_id()));
  if (ending == agent.endings.end() || ending->second != m.update_id()) return;
  agent.endings.erase(ending);
  if (auto at = findTask(agent, m.framework_id(), m.task_id())) eraseTask(agent, *at);
}

bool AgentFold::registered(Slot slot, const wire::AgentRegistered& m) {
  auto it = agents_.find(slot);
  if (it == agents_.end()) return true;
  Agent& agent = it->second;
  if (agent.report) {
    agent.report->mutable_info()->set_id(m.agent_id());
    agent.report->set_agent_secret(m.agent_secret());
    agent.registeredBy = m;
  }
  if (!needsTelling(agent, m)) {
    ++counts_.unchanged;
    return false;
  }
  agent.told = m;
  agent.asked = false;
  agent.unsure = false;  // it sends every unacknowledged update again
  return true;
}

// Which master answered, and in which epoch, is all that may differ.
bool AgentFold::needsTelling(const Agent& agent, const wire::AgentRegistered& m) {
  if (agent.asked || !agent.told || agent.unsure || !agent.unacknowledged.empty()) return true;
  const wire::AgentRegistered& told = *agent.told;
  return told.agent_id() != m.agent_id() || told.agent_secret() != m.agent_secret() ||
         told.heartbeat_interval_s() != m.heartbeat_interval_s() || told.acls_from_file() != m.acls_from_file() ||
         !std::equal(told.operate_principals().begin(), told.operate_principals().end(),
                     m.operate_principals().begin(), m.operate_principals().end());
}

// The next leader has seen no usage: each agent's next report goes on.
void AgentFold::leaderLost() {
  for (auto& [slot, agent] : agents_) {
    agent.registeredBy.reset();
    agent.lastUsage.clear();
  }
}

// Linear in the report's size, like indexing it would be.
bool AgentFold::confirm(Agent& agent, const wire::RegisterAgent& report, wire::Envelope* answer) {
  if (!agent.report || !agent.registeredBy) return false;
  if (!google::protobuf::util::MessageDifferencer::Equals(report, *agent.report)) return false;
  *answer->mutable_agent_registered() = *agent.registeredBy;
  agent.told = *agent.registeredBy;
  ++counts_.confirmed;
  return true;
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
