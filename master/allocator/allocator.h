// Allocator: the master's allocation module. It owns the accounting of who
// holds what (offered or in use) on every agent and decides which framework
// receives each agent's free resources. The policy is pluggable where it
// differs: the FrameworkOrdering (ordering.h) that ranks frameworks, chosen
// by --allocator; the accounting, filters, roles and reservations are one
// implementation for every policy.
//
// The master drives it with events and asks for offers:
//   auto a = createAllocator("drf", options);        // table in allocator_table.cpp
//   AgentHandle ag = a->addAgent(total);
//   FrameworkHandle fw = a->addFramework(params);
//   a->setActive(fw, true);                           // connected and wants offers
//   a->allocate(now, /*fullCycle=*/true, &grants);    // grants count as allocated
//   a->recover(fw, ag, unused, refuse, now);          // declined / finished / rescinded
//
// Resources granted stay allocated to the framework (they count toward its
// share) until recover() returns them. Event-driven allocation: every change
// that frees resources marks the agent dirty, and allocate(now, false)
// considers dirty agents only; allocate(now, true) considers every agent and
// also expires refusal filters.
//
// Who holds what is the master's knowledge (its offers and tasks); the
// allocator keeps only each agent's free resources and each framework's
// total, so a grant costs no bookkeeping copy. The master recovers offers
// and tasks before removing an agent or a framework.
//
// Roles: every framework is in one role. A round serves roles
// in DRF order first (role share / role weight; roles below their quota
// minimum before all others), then frameworks within the chosen role in the
// order the --allocator policy gives (frameworks below their guarantee
// first). A role at its quota cap receives nothing more. With one role this
// costs one extra heap push per grant.
//
// Why bitsets: a cycle over 10,000 agents and 1,000 frameworks must not test
// filters pair by pair (Apache Mesos did, ~1 s per cycle). Each framework
// keeps a bitset of agents it refuses and (optionally) of agents it allows;
// "agents still free that this framework takes" is a word-wise AND, and a
// per-framework cursor makes each cycle scan every word at most once per
// framework.
//
// Filtered as declined (paper 3.2): resources a framework declined count
// toward its share in the ordering for as long as its refusal lasts.
//
// Handles are dense small integers, reused after removal; the master must
// not use a handle after removing it. Thread: single-threaded (the master's
// io_context thread). Limits: kMaxAgents agents, kMaxFrameworks frameworks;
// roles are at most the frameworks plus the configured ones (a role with
// no framework and no configuration is forgotten).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "master/allocator/handles.h"
#include "master/allocator/ordering.h"
#include "proto/resources.h"

namespace allot {

constexpr size_t kMaxAgents = 1u << 20;
constexpr size_t kMaxFrameworks = 1u << 16;
// Roles configured by flag or at run time (allotctl role, HTTP /roles).
constexpr size_t kConfiguredRolesMax = 1024;

struct FrameworkParams {
  double weight = 1.0;      // DRF weight and lottery tickets; > 0
  int32_t priority = 0;     // --allocator=priority: higher goes first
  // The effective guarantee (the master clamps the framework's own value to
  // what the operator allows): a floor revocation never goes below, and a
  // framework below it is served before the others of its role.
  Resources guaranteed;
  std::string role;         // empty: the default role ""
};

struct RoleConfig {
  double weight = 1.0;  // > 0
  // Quota: the role's minimum (served first while below it) and its cap
  // (no grants once any quota scalar is used up). Empty: none.
  Resources quota;
};

struct AllocatorOptions {
  // An agent's free resources are offered only when they reach at least one
  // of these scalars (OR, like Mesos): avoids offers too small to use.
  Resources minOffer;
  uint64_t seed = 1;  // for lottery draws
  // Operator configuration by role name (--role-weight, --quota).
  std::map<std::string, RoleConfig> roles;
  // Reservations for large tasks (docs/decisions.md): a framework that
  // states its task size (a standing minFree), is below (1 - hysteresis) x
  // its fair share and finds no agent its task fits in a round has agents
  // held for it: their freed resources accumulate for it instead of going
  // to frameworks of smaller tasks, for at most this long. Zero: off.
  Duration reservationTimeout = std::chrono::seconds(10);
  double reservationHysteresis = 0.1;
};

// Bounds on reservations: per framework, and a fraction of the live agents
// for the whole cluster (at least one agent).
constexpr size_t kReservationsPerFrameworkMax = 8;
constexpr double kReservedAgentsFractionMax = 0.25;
// Starved frameworks considered for new reservations per round (lowest
// share first): bounds the agent scans a round may do.
constexpr size_t kReservationScansPerRound = 16;

struct Grant {
  FrameworkHandle framework = 0;
  AgentHandle agent = 0;
  Resources resources;
};

class Allocator {
 public:
  // Makes the ordering of frameworks within each role (the --allocator
  // policy): one per role, called as roles appear.
  using OrderingFactory = std::function<std::unique_ptr<FrameworkOrdering>()>;
  Allocator(AllocatorOptions options, OrderingFactory makeOrdering);
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  AgentHandle addAgent(const Resources& total);
  // Forgets the agent. The caller first recover()s everything it allocated
  // there (offers and tasks), so frameworks' shares stay exact.
  void removeAgent(AgentHandle agent);
  // Inactive agents (disconnected, awaiting re-registration) are not offered.
  void setAgentActive(AgentHandle agent, bool active);

  FrameworkHandle addFramework(const FrameworkParams& params);
  // Forgets the framework. The caller first recover()s everything allocated
  // to it (offers and tasks), so agents' free pools stay exact.
  void removeFramework(FrameworkHandle framework);
  // A role change moves the framework's allocation to the new role.
  void updateFramework(FrameworkHandle framework, const FrameworkParams& params);
  // Inactive frameworks (disconnected, or suppressed with
  // setNeedsOffers(false)) receive no grants but keep their allocations.
  void setActive(FrameworkHandle framework, bool active);
  // Standing filters: `agents` non-empty means only those agents; minFree
  // non-empty means only agents whose free resources contain it.
  void setStandingFilters(FrameworkHandle framework, const std::vector<AgentHandle>& agents,
                                  const Resources& minFree);

  // Records resources already in use (tasks reported by a re-registering
  // agent). Allocation may exceed free resources; the excess is clamped.
  void allocateUsed(FrameworkHandle framework, AgentHandle agent,
                            const Resources& resources);
  // Returns resources to the agent's free pool. With `refuse`, the framework
  // is not offered this agent again for that long unless its free resources
  // grow beyond what was refused.
  void recover(FrameworkHandle framework, AgentHandle agent, const Resources& resources,
                       std::optional<Duration> refuse, TimePoint now);
  // Returns resources revoked from the framework to the agent's free pool
  // and holds the agent from it for `hold` even if its free resources grow
  // meanwhile (another framework returning part of an offer must not hand
  // the victim back what was revoked for the starved one). Holds made while
  // one runs add up.
  void recoverRevoked(FrameworkHandle framework, AgentHandle agent,
                              const Resources& resources, Duration hold, TimePoint now);

  // The agents held for the framework (reservations), oldest first.
  std::vector<AgentHandle> reservations(FrameworkHandle framework) const;
  // Keeps the framework's reservation of the agent until at least `until`
  // (a revocation there is under way); no-op when the agent is not held for it.
  void extendReservation(FrameworkHandle framework, AgentHandle agent, TimePoint until);
  size_t reservedAgentCount() const { return reserved_.size(); }

  // Sets a role's weight and quota at run time (allotctl role, HTTP /roles).
  // The caller validates the values (weight > 0, name length). The role is
  // kept like a configured one from then on; an error once
  // kConfiguredRolesMax roles are configured and this is a new one.
  Status setRoleConfig(const std::string& role, const RoleConfig& config);
  // Every role the allocator knows (configured or with frameworks), by name.
  std::vector<std::string> roleNames() const;

  // Appends this round's grants to *grants.
  void allocate(TimePoint now, bool fullCycle, std::vector<Grant>* grants);

  // Weighted dominant share over all scalar resources (0 when none).
  double dominantShare(FrameworkHandle framework) const;
  // The share the ordering uses: allocation plus declined resources still
  // under refusal, divided by the weight.
  double orderingShare(FrameworkHandle framework) const;
  // The framework's allocated scalars (offered + in use).
  Resources allocation(FrameworkHandle framework) const;
  const FrameworkParams& params(FrameworkHandle framework) const;
  // Weighted fair dominant share of every live framework, by handle (0 for
  // dead handles): role weight / weights of the roles present, split by
  // framework weight among the role's present frameworks. Present: wants
  // offers or holds resources.
  void fairShares(std::vector<double>* byHandle) const;
  // The role's allocated scalars and its configuration (weight 1, no quota
  // for a role the operator did not configure).
  Resources roleAllocation(std::string_view role) const;
  RoleConfig roleConfig(std::string_view role) const;
  Resources freeResources(AgentHandle agent) const;
  Resources totalResources() const { return total_; }
  size_t activeFilterCount() const { return refusalCount_; }

 private:
  using Bits = std::vector<uint64_t>;

  struct AgentSlot {
    bool live = false;
    bool active = true;
    bool offerable = false;  // free reaches the minimum offer
    Resources total;
    Resources free;
    std::vector<FrameworkHandle> refusedBy;  // may hold stale entries
    // Frameworks whose agent list names it (may hold stale entries and
    // repeats: compacted when it doubles past allowedByKept).
    std::vector<FrameworkHandle> allowedBy;
    size_t allowedByKept = 0;
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

  // What every round reads of each framework, by handle, apart from the
  // large FrameworkSlot: a round ranks every active framework, so this
  // keeps it to a few cache lines. Kept by the writers of a slot's live,
  // active, role and minFree; `entry` is entryFor()'s last answer, valid
  // while entryEpoch == sharesEpoch_ (between two rounds only the few
  // frameworks granted, recovered or refused change).
  struct RoundBrief {
    bool active = false;        // live and active
    bool wantsMinimum = false;  // minFree set
    uint32_t role = 0;
    uint64_t entryEpoch = 0;
    FrameworkOrdering::Entry entry;
  };

  struct Expiry {
    TimePoint when;
    FrameworkHandle framework;
    AgentHandle agent;
    bool operator>(const Expiry& o) const { return when > o.when; }
  };

  struct Cursor {
    size_t next = 0;        // index into availWords_
    uint64_t rejected = 0;  // agents of that word this framework cannot take
  };

  bool offerable(const Resources& free) const;
  void freeChanged(AgentSlot& agent);
  size_t nameIndex(const std::string& name);
  void addDense(std::vector<int64_t>* dense, const Resources& r, int sign);
  void markDirty(AgentHandle agent);
  // The framework's `resources` back to the agent's free pool.
  void giveBack(FrameworkHandle framework, AgentHandle agent, const Resources& resources);
  void noteAllowedBy(AgentHandle agent, FrameworkHandle framework);
  void dropRefusal(FrameworkHandle framework, AgentHandle agent);
  void dropRefusalsOutgrownBy(AgentHandle agent);
  void expireRefusals(TimePoint now);
  void candidates(bool fullCycle, Bits* out);
  // Whether a round can grant or reserve anything: some agent is a
  // candidate (a full round, or a changed agent) or a framework waits for a
  // minimum (it may get an agent reserved).
  bool roundHasWork(bool fullCycle) const;
  bool minimumWaiting() const;
  std::optional<AgentHandle> findAgent(const FrameworkSlot& fw, const Bits& avail, Cursor* cursor);
  FrameworkOrdering::Entry entryFor(FrameworkHandle framework);
  // roles
  uint32_t roleFor(const std::string& name);
  void releaseRole(uint32_t role);
  const RoleSlot* findRole(std::string_view name) const;
  void charge(FrameworkSlot& fw, const Resources& r, int sign);
  void chargeRefused(FrameworkSlot& fw, const Resources& r, int sign);
  // The framework's cached entry is stale.
  void shareChanged(const FrameworkSlot& fw);
  SparseMillis sparse(const Resources& r);
  double shareOf(const Dense& allocated, const Dense* refused) const;
  bool belowQuota(const RoleSlot& role) const;
  bool capped(const RoleSlot& role) const;
  FrameworkOrdering::Entry roleEntry(uint32_t role) const;
  // Each live role's active frameworks into its ordering, and the roles
  // with any that are not capped into roleQueue_; false when none is.
  // Sets minimumWaiting_ on the way.
  bool queueRoles();
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
  std::vector<RoundBrief> briefs_;  // by framework handle, as frameworks_
  std::vector<FrameworkHandle> freeFrameworkHandles_;
  Bits dirty_;
  // The words of dirty_ that may be non-zero (unsorted; a word may repeat).
  std::vector<size_t> dirtyWords_;
  Resources total_;
  std::vector<std::string> names_;        // interned scalar names
  std::vector<int64_t> totalMillis_;      // by name index
  // Changes with totalMillis_ (every share changes with it): a framework's
  // cached entry is valid only from the same epoch (0: never).
  uint64_t sharesEpoch_ = 1;
  size_t refusalCount_ = 0;

  void refuse(FrameworkHandle framework, AgentHandle agent, const Resources& resources,
              Duration duration, bool held, TimePoint now);
  bool fullPending_ = false;  // the next round considers every agent
  // Reused by every round (allocation rounds run many times a second).
  Bits availScratch_;
  // This round: the words of availScratch_ with candidates, ascending (a
  // handful when few agents changed: frameworks skip the empty ones), and
  // how many candidates remain.
  std::vector<size_t> availWords_;
  size_t availCount_ = 0;
  bool minimumWaiting_ = false;  // this round: as minimumWaiting()
  std::vector<Cursor> cursorsScratch_;
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<Expiry>> expiries_;
  std::vector<AgentHandle> reserved_;  // every held agent
  Bits reservedBits_;                  // the same agents
  size_t liveAgents_ = 0;
  size_t configuredRoles_ = 0;
  std::vector<FrameworkHandle> unplacedScratch_;  // this round: minFree fit nowhere
  std::vector<double> fairScratch_;
};

// The table of allocators selectable by --allocator.
std::vector<std::string> knownAllocators();
Result<std::unique_ptr<Allocator>> createAllocator(std::string_view name,
                                                   const AllocatorOptions& options);

}  // namespace allot
