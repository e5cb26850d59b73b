// AgentFold: what a link shard keeps of its agents and what it forwards to
// the leader. Pure state, no I/O: the shard (shard/shard.h) feeds it every
// validated message an agent sends and acts on the decision.
//
//   kForward  registrations, status updates, a usage report that differs
//             from the last one forwarded, anything else the leader decides
//   kAnswer   a heartbeat: the shard acknowledges it itself (`answer`) and
//             counts the agent as heard from; the leader learns of it in the
//             next liveness summary (takeLiveness), one message per interval
//             for all agents instead of one per agent per heartbeat
//   kDrop     a usage report equal to the last one forwarded
//
// It keeps each agent's last full report: the RegisterAgent it forwarded,
// with every later status update applied to its tasks' latest status and
// the id and secret the leader gave it (registered()). A new leader gets
// these reports in bulk; each agent then sends its own full one (agent/
// master_link.h), which also carries tasks launched since.
//
// Bounds: at most `maxAgents` slots; what a slot keeps is bounded by the
// input limits its messages passed (proto/validate.h).
//
// Thread: the shard's loop.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "proto/allot.pb.h"

namespace allot {

using Slot = uint64_t;

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

  // The leader's AgentRegistered on its way to the agent in `slot`: the
  // kept report takes its id and secret, so a new leader knows the agent.
  void registered(Slot slot, const wire::AgentRegistered& m);

  // The slots heard from since the previous call, each once, in the order
  // first heard; empty when none was.
  std::vector<Slot> takeLiveness();

  // The agent's last full report, or null before its registration.
  const wire::RegisterAgent* report(Slot slot) const;
  size_t size() const { return agents_.size(); }

  struct Counts {
    uint64_t forwarded = 0;
    uint64_t answered = 0;
    uint64_t dropped = 0;
  };
  const Counts& counts() const { return counts_; }

 private:
  struct Agent {
    std::optional<wire::RegisterAgent> report;
    std::string lastUsage;  // the last forwarded UsageReport, serialized
    bool heard = false;
  };
  void heard(Slot slot, Agent& agent);
  static void applyStatus(wire::RegisterAgent& report, const wire::TaskStatus& status);

  size_t maxAgents_;
  std::unordered_map<Slot, Agent> agents_;
  std::vector<Slot> heardOrder_;
  Counts counts_;
};

}  // namespace allot
