// AgentRegistry: the agents the master knows (connected or awaiting
// re-registration), by id and by allocator handle, and which of them are
// draining (allotctl drain).
//
// An agent is registered from add() until remove(); the master removes it
// when it stays silent past --agent-timeout. The registry holds no
// resources: the allocator does, under the agent's handle.
//
// Silence watch: each registered agent has exactly one entry in a queue
// ordered by time, when the master looks at it next (recheckAt, dueFirst),
// so a check visits only the agents due, never all of them. The entry is
// made by add(), moved in place by recheckAt() and erased by remove(): the
// queue never holds more entries than there are agents, whatever the
// re-registrations and reconnections, and no entry outlives its agent.
// An agent's lastSeen is not the queue's business: the master updates it
// on every message without touching the queue.
//
// Invariants, kept here (the only writer of an agent's handle and drain):
//   - byHandle(h) is the agent whose handle is h, for every registered
//     agent with a handle, and nothing else;
//   - drainingCount() is the number of registered agents that are draining,
//     whatever the order of drains, undrains and removals;
//   - an agent that is not draining has no drain deadline;
//   - rechecksQueued() == size(): one silence-watch entry per agent.
//
// Thread: the master's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "base/clock.h"
#include "master/allocator/handles.h"
#include "master/peer_table.h"
#include "proto/allot.pb.h"

namespace allot {

class AgentRecord;
// The silence watch: recheck time -> agent (records never move: they live
// in an unordered_map's nodes).
using AgentRecheckQueue = std::multimap<TimePoint, AgentRecord*>;

class AgentRecord {
 public:
  std::string id;
  wire::AgentInfo info;
  std::optional<PeerId> peer;
  TimePoint lastSeen;  // its last message of any kind: each one shows it lives
  // framework id -> executor ids here
  std::unordered_map<std::string, std::unordered_set<std::string>> executors;
  // The latest UsageReport: "framework/executor" -> usage.
  std::unordered_map<std::string, wire::ResourceUsage> usage;

  // Its resources in the allocator (AgentRegistry::setHandle).
  AgentHandle handle() const { return handle_; }
  bool hasHandle() const { return hasHandle_; }
  // allotctl drain: never offered until undrained; the deadline its tasks
  // were given (wall clock, seconds; 0 when not draining).
  bool draining() const { return draining_; }
  double drainDeadlineS() const { return drainDeadlineS_; }

 private:
  friend class AgentRegistry;
  AgentHandle handle_ = 0;
  bool hasHandle_ = false;
  bool draining_ = false;
  double drainDeadlineS_ = 0;
  AgentRecheckQueue::iterator recheck_;  // its one entry in the silence watch
};

class AgentRegistry {
 public:
  using Agents = std::unordered_map<std::string, AgentRecord>;

  AgentRegistry() = default;
  // The silence watch points into the records: not copyable.
  AgentRegistry(const AgentRegistry&) = delete;
  AgentRegistry& operator=(const AgentRegistry&) = delete;

  // The agent's record: a new one (its id set, no handle, not draining,
  // due for a look at once) when `inserted` comes back true.
  AgentRecord& add(const std::string& id, bool* inserted);
  // Forgets the agent (and its handle and drain).
  void remove(const std::string& id);
  // The agent's resources are now under `handle` in the allocator (its
  // previous handle, if any, no longer names it).
  void setHandle(AgentRecord& agent, AgentHandle handle);
  // Drains the agent with tasks given until `deadlineS` (wall clock), or
  // again with a new deadline.
  void drain(AgentRecord& agent, double deadlineS);
  // Ends the drain; false when the agent was not draining.
  bool undrain(AgentRecord& agent);
  // Moves the agent's silence-watch entry to `at`: O(log agents), no
  // allocation.
  void recheckAt(AgentRecord& agent, TimePoint at);
  // The agent with the earliest recheck time, when that time is before
  // `now` (null: none is due). It stays first until the caller moves it
  // (recheckAt) or removes it.
  AgentRecord* dueFirst(TimePoint now);
  size_t rechecksQueued() const { return recheck_.size(); }

  AgentRecord* find(const std::string& id);
  const AgentRecord* find(const std::string& id) const;
  // The agent under an allocator handle (null: none).
  AgentRecord* byHandle(AgentHandle handle);
  bool contains(const std::string& id) const { return agents_.count(id) > 0; }
  size_t size() const { return agents_.size(); }
  size_t drainingCount() const { return draining_; }
  // Every agent by id (/state, the master's passes over all agents).
  const Agents& all() const { return agents_; }
  // Each agent's record, to change what the registry does not own (peer,
  // executors, usage); `f` must not add or remove agents.
  template <typename F>
  void forEach(F&& f) {
    for (auto& [id, agent] : agents_) f(agent);
  }

 private:
  void unsetHandle(AgentRecord& agent);

  Agents agents_;
  std::unordered_map<AgentHandle, std::string> byHandle_;
  size_t draining_ = 0;
  AgentRecheckQueue recheck_;
};

}  // namespace allot
