// OfferAllocator: the allocator core shared by every policy. It keeps each
// agent's free resources and each framework's allocation, refusal filters
// and standing filters, and hands whole agents to frameworks in the order a
// FrameworkOrdering gives.
//
// Why bitsets: a cycle over 10,000 agents and 1,000 frameworks must not test
// filters pair by pair (Apache Mesos did, ~1 s per cycle). Each framework
// keeps a bitset of agents it refuses and (optionally) of agents it allows;
// "agents still free that this framework takes" is a word-wise AND, and a
// per-framework cursor makes each cycle scan every word at most once per
// framework.
#pragma once

#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "master/allocator/allocator.h"
#include "master/allocator/ordering.h"

namespace allot {

class OfferAllocator final : public Allocator {
 public:
  OfferAllocator(AllocatorOptions options, std::unique_ptr<FrameworkOrdering> ordering);

  AgentHandle addAgent(const Resources& total) override;
  void removeAgent(AgentHandle agent) override;
  void setAgentActive(AgentHandle agent, bool active) override;
  FrameworkHandle addFramework(const FrameworkParams& params) override;
  void removeFramework(FrameworkHandle framework) override;
  void updateFramework(FrameworkHandle framework, const FrameworkParams& params) override;
  void setActive(FrameworkHandle framework, bool active) override;
  void setStandingFilters(FrameworkHandle framework, const std::vector<AgentHandle>& agents,
                          const Resources& minFree) override;
  void allocateUsed(FrameworkHandle framework, AgentHandle agent,
                    const Resources& resources) override;
  void recover(FrameworkHandle framework, AgentHandle agent, const Resources& resources,
               std::optional<Duration> refuse, TimePoint now) override;
  void allocate(TimePoint now, bool fullCycle, std::vector<Grant>* grants) override;
  double dominantShare(FrameworkHandle framework) const override;
  Resources allocation(FrameworkHandle framework) const override;
  Resources freeResources(AgentHandle agent) const override;
  Resources totalResources() const override { return total_; }
  size_t activeFilterCount() const override { return refusalCount_; }

 private:
  using Bits = std::vector<uint64_t>;

  struct AgentSlot {
    bool live = false;
    bool active = true;
    bool offerable = false;  // free reaches the minimum offer
    Resources total;
    Resources free;
    std::vector<FrameworkHandle> refusedBy;  // may hold stale entries
  };

  struct Refusal {
    Resources refused;
    TimePoint expiry;
  };

  struct FrameworkSlot {
    bool live = false;
    bool active = false;
    FrameworkParams params;
    std::vector<int64_t> allocatedMillis;  // scalars by interned name index
    std::unordered_map<AgentHandle, Refusal> refusals;
    Bits refusedBits;
    bool agentListSet = false;
    Bits allowedBits;
    Resources minFree;
  };

  struct Expiry {
    TimePoint when;
    FrameworkHandle framework;
    AgentHandle agent;
    bool operator>(const Expiry& o) const { return when > o.when; }
  };

  struct Cursor {
    size_t word = 0;
    uint64_t rejected = 0;  // agents of `word` this framework cannot take
  };

  bool offerable(const Resources& free) const;
  void freeChanged(AgentSlot& agent);
  size_t nameIndex(const std::string& name);
  void addDense(std::vector<int64_t>* dense, const Resources& r, int sign);
  void markDirty(AgentHandle agent);
  void dropRefusal(FrameworkHandle framework, AgentHandle agent);
  void dropRefusalsOutgrownBy(AgentHandle agent);
  void expireRefusals(TimePoint now);
  void candidates(bool fullCycle, Bits* out);
  std::optional<AgentHandle> findAgent(const FrameworkSlot& fw, const Bits& avail, Cursor* cursor);
  FrameworkOrdering::Entry entryFor(FrameworkHandle framework) const;

  AllocatorOptions options_;
  std::unique_ptr<FrameworkOrdering> ordering_;
  std::vector<AgentSlot> agents_;
  std::vector<AgentHandle> freeAgentHandles_;
  std::vector<FrameworkSlot> frameworks_;
  std::vector<FrameworkHandle> freeFrameworkHandles_;
  Bits dirty_;
  Resources total_;
  std::vector<std::string> names_;        // interned scalar names
  std::vector<int64_t> totalMillis_;      // by name index
  size_t refusalCount_ = 0;
  bool fullPending_ = false;  // the next round considers every agent
  // Reused by every round (allocation rounds run many times a second).
  std::vector<FrameworkOrdering::Entry> entriesScratch_;
  Bits availScratch_;
  size_t availBegin_ = 0, availEnd_ = 0;  // words of availScratch_ with candidates
  std::vector<Cursor> cursorsScratch_;
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<Expiry>> expiries_;
};

}  // namespace allot
