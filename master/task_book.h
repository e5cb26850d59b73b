// TaskBook: the tasks the master knows, by framework and by agent, their
// latest status, counts by state, and the tasks that ended lately.
//
// A task is live from launch() or adopt() until its terminal status
// (update()), its loss (drop(), dropAgent()) or its framework's removal
// (dropFramework()). The book holds what a task was charged but no
// resources: the master returns them to the allocator when a task leaves.
//
// Invariants, kept here (this is the only writer of task state):
//   - every live task is listed under its framework and under the agent it
//     is placed on (its info's agent_id), and nothing else is listed;
//   - countOf(state) is the number of live tasks whose latest status is in
//     that state, whatever the order of launches, updates and drops;
//   - a live task's latest state is never terminal: the update that brings
//     a terminal state ends the task in the same call (it leaves the live
//     tasks, joins the ended tasks shown, and its agent remembers it), and
//     nothing follows a terminal state, since the task is no longer live;
//   - the ended tasks shown are the latest kEndedTasksShown, and each agent
//     remembers at most kMaxEndedTasksPerAgent ended tasks.
//
// Thread: the master's thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "proto/allot.pb.h"
#include "proto/resources.h"

namespace allot {

// Terminal tasks an agent may still send (resent) updates for and a
// framework may still acknowledge, per agent.
constexpr size_t kMaxEndedTasksPerAgent = 10000;
// Tasks that ended lately, kept with their last status for /state (and so
// allotctl tasks): a task killed by a drain's deadline shows
// REASON_AGENT_DRAINED after the master has forgotten it.
constexpr size_t kEndedTasksShown = 1000;

struct TaskRecord {
  wire::TaskInfo info;        // agent_id(): the agent it is placed on
  Resources charged;          // task + executor overhead it brought
  wire::TaskStatus latest;
  TimePoint launchedAt;       // for the revocation order
  bool revoking = false;      // KillTask REVOKED sent; counted as freed
};

struct EndedTask {
  std::string frameworkId;
  TaskRecord record;
};

class TaskBook {
 public:
  using Tasks = std::unordered_map<std::string, TaskRecord>;  // task id -> record
  // framework id -> ids of its tasks (on one agent)
  using TaskIds = std::unordered_map<std::string, std::unordered_set<std::string>>;

  // ---- writers
  // A task the master places now: `info` (its agent_id set) with
  // `charged`, latest TASK_STAGING, launched at `now`. The task id must not
  // be live in the framework (the master's validation refuses that first).
  const TaskRecord& launch(const std::string& frameworkId, const wire::TaskInfo& info,
                           Resources charged, TimePoint now);
  // A task an agent re-registers with, placed on `info.agent_id()`: a new
  // record, or the live one refreshed (info, charged, and the latest status
  // when `latest` names the task). Refused (false) when the task is live on
  // another agent; `latest` must not be terminal (the master skips those).
  [[nodiscard]] bool adopt(const std::string& frameworkId, const wire::TaskInfo& info,
                           Resources charged, const wire::TaskStatus& latest);
  // A live task's new status. A terminal one ends the task: it leaves the
  // live tasks, its agent remembers it (rememberEnded) and its record,
  // returned, is the newest of the ended tasks shown (valid
  // until the book changes), so the caller frees what it was charged.
  // Otherwise, and for a task that is not live (nothing changes), null.
  const TaskRecord* update(const std::string& frameworkId, const std::string& taskId,
                           const wire::TaskStatus& status);
  // The task is being revoked (KillTask REVOKED sent); null: not live.
  const TaskRecord* markRevoking(const std::string& frameworkId, const std::string& taskId);
  // A live task is gone without a terminal status (its agent lost it):
  // forgotten, not shown among the ended tasks. Returns its info.
  std::optional<wire::TaskInfo> drop(const std::string& frameworkId, const std::string& taskId);
  // Every task of the framework is forgotten; returns the agents that had
  // some.
  std::unordered_set<std::string> dropFramework(const std::string& frameworkId);
  // The agent is gone: its live tasks are forgotten and returned
  // (framework id, info) in the order onAgent() lists them; what it
  // remembered as ended goes too.
  std::vector<std::pair<std::string, wire::TaskInfo>> dropAgent(const std::string& agentId);
  // Remember that a task ended on the agent (its resent updates and
  // acknowledgements are still accepted); the oldest is forgotten past
  // kMaxEndedTasksPerAgent.
  void rememberEnded(const std::string& agentId, const std::string& frameworkId,
                     const std::string& taskId);

  // ---- readers
  const TaskRecord* find(const std::string& frameworkId, const std::string& taskId) const;
  // A framework's live tasks (empty when it has none).
  const Tasks& ofFramework(const std::string& frameworkId) const;
  size_t countOfFramework(const std::string& frameworkId) const { return ofFramework(frameworkId).size(); }
  // The ids of the live tasks on an agent, by framework (empty when none).
  const TaskIds& onAgent(const std::string& agentId) const;
  size_t countOnAgent(const std::string& agentId) const;
  bool endedOn(const std::string& agentId, const std::string& frameworkId,
               const std::string& taskId) const;
  size_t size() const { return live_; }
  // Live tasks whose latest state has this value (a value outside the enum
  // counts apart, never shown).
  int64_t countOf(wire::TaskState state) const;
  // The latest kEndedTasksShown tasks that ended with a terminal status,
  // oldest first, and how many were pushed out before them (the sequence
  // number of the first, so a /state rendering can resume).
  const std::deque<EndedTask>& endedShown() const { return ended_; }
  uint64_t endedDropped() const { return endedDropped_; }

 private:
  struct AgentTasks {
    TaskIds live;
    // Recently ended tasks here ("framework/task"), oldest first.
    std::unordered_set<std::string> ended;
    std::deque<std::string> endedOrder;
  };

  Tasks::iterator findLive(const std::string& frameworkId, const std::string& taskId, Tasks** tasks);
  void index(const std::string& agentId, const std::string& frameworkId, const std::string& taskId);
  void unindex(const std::string& agentId, const std::string& frameworkId, const std::string& taskId);
  void erase(Tasks& tasks, Tasks::iterator task);
  void count(const wire::TaskStatus& status, int64_t delta);

  // framework id -> its live tasks; an entry lasts until dropFramework().
  std::unordered_map<std::string, Tasks> byFramework_;
  std::unordered_map<std::string, AgentTasks> byAgent_;
  size_t live_ = 0;
  // By the value of the latest state; the last slot: a value outside the
  // enum, which input validation refuses before any handler.
  std::array<int64_t, wire::TaskState_ARRAYSIZE + 1> byState_{};
  std::deque<EndedTask> ended_;
  uint64_t endedDropped_ = 0;
};

}  // namespace allot
