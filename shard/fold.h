// AgentFold: what a link shard keeps of its agents and what it forwards to
// the leader. Pure state, no I/O: the shard (shard/shard.h) feeds it every
// validated message an agent sends and acts on the decision.
//
//   kForward  registrations, status updates, a usage report that differs
//             from the last one forwarded, anything else the leader decides
//   kAnswer   a heartbeat: the shard acknowledges it itself (`answer`) and
//             counts the agent as heard from; the leader learns of it in the
//             next liveness summary (takeLiveness), one message per interval
//             for all agents instead of one per agent per heartbeat.
//             Also a full registration equal to the kept report once the
//             leader of the link has registered the agent (registered()):
//             that leader holds this very report already (the shard handed
//             it over, or forwarded it, and every change since went the
//             same way, in order), so its AgentRegistered is the answer
//   kDrop     a usage report equal to the last one forwarded
//
// It keeps each agent's last full report, current as the agent itself
// would send it (agent/agent.h buildRegistration): the RegisterAgent it
// forwarded, with the id and secret the leader gave it (registered()),
// every task the leader launched there since (launched(): STAGING, under
// the executor the agent runs it in), every later status update applied
// to its task's latest status, and a task that ended reported as running
// with no resources until the leader acknowledges its terminal update
// (acknowledged()), then gone. A new leader gets these reports in bulk and
// so knows every task at once. Its AgentRegistered for each goes on to the
// agent only when the agent needs it (passOn()): when it waits for an
// answer, when it would learn something new (another id, secret, heartbeat
// interval or ACL), or when it has status updates no leader acknowledged
// (hearing of a registration, it sends them again: the new leader may have
// missed them). Otherwise nothing the agent knows changed, and it hears
// nothing: its link never broke. An agent does not send its report again
// after a handover (agent/master_link.h); one that does gets the new
// leader's AgentRegistered as the answer when the report equals the kept
// one (kAnswer); only a report that differs goes on. leaderLost() forgets
// every leader's answer: a report is confirmed only by the leader now
// linked.
//
// Bounds: at most `maxAgents` slots; a report holds at most the limits a
// registration may (limits::kTasksPerAgentMax tasks, kExecutorsPerAgentMax
// executors, kFrameworksPerAgentMax frameworks): a launch past them is
// left to the agent's own report. A registration costs time linear in its
// size (it is indexed); every other message costs time linear in itself,
// whatever the report holds: each agent's tasks, executors and frameworks
// are indexed by id, and a task leaves its executor by swapping with the
// last one (the order of an executor's tasks means nothing).
//
// Thread: the shard's loop.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/result.h"
#include "proto/allot.pb.h"

namespace allot {

using Slot = uint64_t;

// Status updates of one agent the shard tracks until a leader acknowledges
// them (a few are in flight at a time); past it the agent is told of every
// registration. Bounds a full shard's tracking to some tens of MiB.
constexpr size_t kUnacknowledgedPerAgentMax = 32;

enum class FoldAction { kForward, kAnswer, kDrop };

class AgentFold {
 public:
  explicit AgentFold(size_t maxAgents) : maxAgents_(maxAgents) {}

  // A new agent link; an Error when `slot` is taken or maxAgents are held.
  [[nodiscard]] Status attach(Slot slot);
  void detach(Slot slot);

  // One message from the agent in `slot` (attached, validated). On kAnswer
  // `answer` holds what goes back to the agent.
  FoldAction fold(Slot slot, const wire::Envelope& message, wire::Envelope* answer);

  // The leader's AgentRegistered for the agent in `slot`: the kept report
  // takes its id and secret, so a new leader knows the agent. It is also
  // kept as the answer to an equal report (kAnswer above). Returns whether
  // it goes on to the agent (see above); what goes on is what the agent
  // knows from then on.
  [[nodiscard]] bool registered(Slot slot, const wire::AgentRegistered& m);
  // The leader link is gone: no AgentRegistered kept answers any more,
  // and every agent's next usage report goes on (the next leader has none).
  // O(agents held).
  void leaderLost();
  // The leader's RunTask on its way to the agent in `slot`.
  void launched(Slot slot, const wire::RunTask& m);
  // The leader's StatusAcknowledgement on its way to the agent in `slot`:
  // an ended task whose terminal update it acknowledges leaves the report.
  void acknowledged(Slot slot, const wire::StatusAcknowledgement& m);

  // The slots heard from since the previous call through a message the
  // shard answered or dropped (kAnswer, kDrop), each once, in the order
  // first heard; empty when none was. A forwarded message is not counted:
  // the leader hears it, and an agent's every frame is liveness to it.
  std::vector<Slot> takeLiveness();

  // The agent's last full report, or null before its registration.
  const wire::RegisterAgent* report(Slot slot) const;
  size_t size() const { return agents_.size(); }

  struct Counts {
    uint64_t forwarded = 0;
    uint64_t answered = 0;
    uint64_t dropped = 0;
    uint64_t confirmed = 0;  // registrations answered with the leader's AgentRegistered
    uint64_t unchanged = 0;  // AgentRegistered not passed on: nothing the agent knows changed
  };
  const Counts& counts() const { return counts_; }

 private:
  // Where the report holds a task: its executor's index in the report and
  // its own in that executor's tasks (and latest statuses).
  struct TaskAt {
    int executor = 0;
    int task = 0;
  };
  struct Agent {
    std::optional<wire::RegisterAgent> report;
    // The report's index: tasks by framework id and task id (taskKey),
    // executors by framework id and executor id, frameworks by id.
    std::unordered_map<std::string, TaskAt> tasks;
    std::unordered_map<std::string, int> executors;
    std::unordered_set<std::string> frameworks;
    size_t taskCount = 0;  // summed over the report's executors
    // Ended tasks still in the report: their terminal update's id, by
    // framework id and task id (taskKey); one per task of the report.
    std::unordered_map<std::string, std::string> endings;
    std::string lastUsage;  // the last forwarded UsageReport, serialized
    // The linked leader's AgentRegistered for the kept report, if any.
    std::optional<wire::AgentRegistered> registeredBy;
    // The last AgentRegistered passed on to the agent, and whether the
    // agent sent a registration since (it waits for the answer).
    std::optional<wire::AgentRegistered> told;
    bool asked = false;
    // Its status updates no leader acknowledged, by framework id and
    // update id; `unsure` once more were than kUnacknowledgedPerAgentMax.
    std::unordered_set<std::string> unacknowledged;
    bool unsure = false;
    bool heard = false;
  };
  void heard(Slot slot, Agent& agent);
  FoldAction decide(Agent& agent, const wire::Envelope& message, wire::Envelope* answer);
  bool confirm(Agent& agent, const wire::RegisterAgent& report, wire::Envelope* answer);
  static void applyStatus(Agent& agent, const wire::TaskStatus& status);
  static void trackUpdate(Agent& agent, const wire::TaskStatus& status);
  static bool needsTelling(const Agent& agent, const wire::AgentRegistered& m);
  static void keepEndings(Agent& agent);
  static void indexReport(Agent& agent);
  static std::optional<TaskAt> findTask(const Agent& agent, const std::string& frameworkId,
                                        const std::string& taskId);
  static void eraseTask(Agent& agent, TaskAt at);
  static std::optional<TaskAt> addTask(Agent& agent, const wire::ExecutorInfo& info, const wire::TaskInfo& task,
                                       const wire::TaskStatus& latest);

  size_t maxAgents_;
  std::unordered_map<Slot, Agent> agents_;
  std::vector<Slot> heardOrder_;
  Counts counts_;
};

}  // namespace allot
