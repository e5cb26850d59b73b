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
//
// Roles: a round first picks the role (a DRF queue over roles, keyed by the
// role's share including its frameworks' refused resources, divided by the
// role weight; roles below their quota minimum first), then the framework
// within it (the role's own FrameworkOrdering, built by the --allocator
// factory). With one role this costs one extra heap push per grant.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "master/allocator/allocator.h"
#include "master/allocator/ordering.h"

namespace allot {

class OfferAllocator final : public Allocator {
 public:
  using OrderingFactory = std::function<std::unique_ptr<FrameworkOrdering>()>;
  OfferAllocator(AllocatorOptions options, OrderingFactory makeOrdering);

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
  void recoverRevoked(FrameworkHandle framework, AgentHandle agent, const Resources& resources,
                      Duration hold, TimePoint now) override;
  std::vector<AgentHandle> reservations(FrameworkHandle framework) const override;
  void extendReservation(FrameworkHandle framework, AgentHandle agent, TimePoint until) override;
  size_t reservedAgentCount() const override { return reserved_.size(); }
  Status setRoleConfig(const std::string& role, const RoleConfig& config) override;
  std::vector<std::string> roleNames() const override;
  void allocate(TimePoint now, bool fullCycle, std::vector<Grant>* grants) override;
  double dominantShare(FrameworkHandle framework) const override;
  double orderingShare(FrameworkHandle framework) const override;
  Resources allocation(FrameworkHandle framework) const override;
  const FrameworkParams& params(FrameworkHandle framework) const override;
  void fairShares(std::vector<double>* byHandle) const override;
  Resources roleAllocation(std::string_view role) const override;
  RoleConfig roleConfig(std::string_view role) const override;
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
    // Held for one framework (reservations.cpp): others are not offered it.
    std::optional<FrameworkHandle> reservedFor;
    TimePoint reservedUntil;
  };

  struct Refusal {
    Resources refused;   // the agent's free resources when refused
    Resources counted;   // the declined resources, counted in the ordering
    TimePoint expiry;
    bool held = false;   // from a revocation: kept while the agent's free grows
  };

  using Dense = std::vector<int64_t>;                       // by name index
  using SparseMillis = std::vector<std::pair<size_t, int64_t>>;  // (name index, millis)

  struct RoleSlot {
    bool live = false;
    bool configured = false;  // from AllocatorOptions::roles: never forgotten
    std::string name;
    RoleConfig config;
    SparseMillis quotaMillis;
    Dense allocatedMillis;
    Dense refusedMillis;
    size_t frameworks = 0;
    size_t belowGuarantee = 0;  // this round: active frameworks still below theirs
    std::unique_ptr<FrameworkOrdering> ordering;
    std::vector<FrameworkOrdering::Entry> entries;  // this round's
  };

  struct FrameworkSlot {
    bool live = false;
    bool active = false;
    FrameworkParams params;
    uint32_t role = 0;
    SparseMillis guaranteedMillis;
    Dense allocatedMillis;  // scalars by interned name index
    Dense refusedMillis;    // declined resources under refusal
    std::unordered_map<AgentHandle, Refusal> refusals;
    Bits refusedBits;
    bool agentListSet = false;
    Bits allowedBits;
    Resources minFree;
    std::vector<AgentHandle> reserved;  // at most kReservationsPerFrameworkMax
    Bits reservedBits;                  // the same agents
    TimePoint reserveAgainAt;           // after a reservation expired unused
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
  // roles
  uint32_t roleFor(const std::string& name);
  void releaseRole(uint32_t role);
  const RoleSlot* findRole(std::string_view name) const;
  void charge(FrameworkSlot& fw, const Resources& r, int sign);
  void chargeRefused(FrameworkSlot& fw, const Resources& r, int sign);
  SparseMillis sparse(const Resources& r);
  double shareOf(const Dense& allocated, const Dense* refused) const;
  bool belowQuota(const RoleSlot& role) const;
  bool capped(const RoleSlot& role) const;
  FrameworkOrdering::Entry roleEntry(uint32_t role) const;
  Resources chopToQuota(const RoleSlot& role, const Resources& free) const;
  // reservations (reservations.cpp)
  void reserve(FrameworkHandle framework, AgentHandle agent, TimePoint now);
  void release(AgentHandle agent);
  void releaseAll(FrameworkHandle framework);
  void expireReservations(TimePoint now);
  void reserveForStarved(TimePoint now);
  std::optional<AgentHandle> closestAgent(FrameworkHandle framework) const;
  double reservedCover(const FrameworkSlot& fw) const;

  AllocatorOptions options_;
  OrderingFactory makeOrdering_;
  std::unique_ptr<FrameworkOrdering> roleQueue_;  // drf over role handles
  std::vector<RoleSlot> roles_;
  std::vector<uint32_t> freeRoleHandles_;
  std::unordered_map<std::string, uint32_t> roleIndex_;
  std::vector<AgentSlot> agents_;
  std::vector<AgentHandle> freeAgentHandles_;
  std::vector<FrameworkSlot> frameworks_;
  std::vector<FrameworkHandle> freeFrameworkHandles_;
  Bits dirty_;
  Resources total_;
  std::vector<std::string> names_;        // interned scalar names
  std::vector<int64_t> totalMillis_;      // by name index
  size_t refusalCount_ = 0;

  void refuse(FrameworkHandle framework, AgentHandle agent, const Resources& resources,
              Duration duration, bool held, TimePoint now);
  bool fullPending_ = false;  // the next round considers every agent
  // Reused by every round (allocation rounds run many times a second).
  Bits availScratch_;
  size_t availBegin_ = 0, availEnd_ = 0;  // words of availScratch_ with candidates
  std::vector<Cursor> cursorsScratch_;
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<Expiry>> expiries_;
  std::vector<AgentHandle> reserved_;  // every held agent
  Bits reservedBits_;                  // the same agents
  size_t liveAgents_ = 0;
  size_t configuredRoles_ = 0;
  std::vector<FrameworkHandle> unplacedScratch_;  // this round: minFree fit nowhere
  std::vector<double> fairScratch_;
};

}  // namespace allot
