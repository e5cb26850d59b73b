// Allocator: the master's pluggable allocation module. It owns the
// accounting of who holds what (offered or in use) on every agent and decides
// which framework receives each agent's free resources.
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
// first). A role at its quota cap receives nothing more.
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
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "proto/resources.h"

namespace allot {

using AgentHandle = uint32_t;
using FrameworkHandle = uint32_t;

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
  virtual ~Allocator() = default;

  virtual AgentHandle addAgent(const Resources& total) = 0;
  // Forgets the agent. The caller first recover()s everything it allocated
  // there (offers and tasks), so frameworks' shares stay exact.
  virtual void removeAgent(AgentHandle agent) = 0;
  // Inactive agents (disconnected, awaiting re-registration) are not offered.
  virtual void setAgentActive(AgentHandle agent, bool active) = 0;

  virtual FrameworkHandle addFramework(const FrameworkParams& params) = 0;
  // Forgets the framework. The caller first recover()s everything allocated
  // to it (offers and tasks), so agents' free pools stay exact.
  virtual void removeFramework(FrameworkHandle framework) = 0;
  // A role change moves the framework's allocation to the new role.
  virtual void updateFramework(FrameworkHandle framework, const FrameworkParams& params) = 0;
  // Inactive frameworks (disconnected, or suppressed with
  // setNeedsOffers(false)) receive no grants but keep their allocations.
  virtual void setActive(FrameworkHandle framework, bool active) = 0;
  // Standing filters: `agents` non-empty means only those agents; minFree
  // non-empty means only agents whose free resources contain it.
  virtual void setStandingFilters(FrameworkHandle framework, const std::vector<AgentHandle>& agents,
                                  const Resources& minFree) = 0;

  // Records resources already in use (tasks reported by a re-registering
  // agent). Allocation may exceed free resources; the excess is clamped.
  virtual void allocateUsed(FrameworkHandle framework, AgentHandle agent,
                            const Resources& resources) = 0;
  // Returns resources to the agent's free pool. With `refuse`, the framework
  // is not offered this agent again for that long unless its free resources
  // grow beyond what was refused.
  virtual void recover(FrameworkHandle framework, AgentHandle agent, const Resources& resources,
                       std::optional<Duration> refuse, TimePoint now) = 0;
  // Returns resources revoked from the framework to the agent's free pool
  // and holds the agent from it for `hold` even if its free resources grow
  // meanwhile (another framework returning part of an offer must not hand
  // the victim back what was revoked for the starved one). Holds made while
  // one runs add up.
  virtual void recoverRevoked(FrameworkHandle framework, AgentHandle agent,
                              const Resources& resources, Duration hold, TimePoint now) = 0;

  // The agents held for the framework (reservations), oldest first.
  virtual std::vector<AgentHandle> reservations(FrameworkHandle framework) const = 0;
  // Keeps the framework's reservation of the agent until at least `until`
  // (a revocation there is under way); no-op when the agent is not held for it.
  virtual void extendReservation(FrameworkHandle framework, AgentHandle agent, TimePoint until) = 0;
  virtual size_t reservedAgentCount() const = 0;

  // Sets a role's weight and quota at run time (allotctl role, HTTP /roles).
  // The caller validates the values (weight > 0, name length). The role is
  // kept like a configured one from then on; an error once
  // kConfiguredRolesMax roles are configured and this is a new one.
  virtual Status setRoleConfig(const std::string& role, const RoleConfig& config) = 0;
  // Every role the allocator knows (configured or with frameworks), by name.
  virtual std::vector<std::string> roleNames() const = 0;

  // Appends this round's grants to *grants.
  virtual void allocate(TimePoint now, bool fullCycle, std::vector<Grant>* grants) = 0;

  // Weighted dominant share over all scalar resources (0 when none).
  virtual double dominantShare(FrameworkHandle framework) const = 0;
  // The share the ordering uses: allocation plus declined resources still
  // under refusal, divided by the weight.
  virtual double orderingShare(FrameworkHandle framework) const = 0;
  // The framework's allocated scalars (offered + in use).
  virtual Resources allocation(FrameworkHandle framework) const = 0;
  virtual const FrameworkParams& params(FrameworkHandle framework) const = 0;
  // Weighted fair dominant share of every live framework, by handle (0 for
  // dead handles): role weight / weights of the roles present, split by
  // framework weight among the role's present frameworks. Present: wants
  // offers or holds resources.
  virtual void fairShares(std::vector<double>* byHandle) const = 0;
  // The role's allocated scalars and its configuration (weight 1, no quota
  // for a role the operator did not configure).
  virtual Resources roleAllocation(std::string_view role) const = 0;
  virtual RoleConfig roleConfig(std::string_view role) const = 0;
  virtual Resources freeResources(AgentHandle agent) const = 0;
  virtual Resources totalResources() const = 0;
  virtual size_t activeFilterCount() const = 0;
};

// The table of allocators selectable by --allocator.
std::vector<std::string> knownAllocators();
Result<std::unique_ptr<Allocator>> createAllocator(std::string_view name,
                                                   const AllocatorOptions& options);

}  // namespace allot
