// Revocation planning (paper section 3.3): which running tasks to
// revoke so that starved frameworks reach their guarantee or their fair
// share. Pure: the master gathers the inputs, sends the kills and keeps
// the in-flight set; the planner only chooses.
//
// Rules (docs/decisions.md says why):
// - A framework is a beneficiary when it wants offers and is below its
//   guarantee or below fair * (1 - hysteresis), its outstanding offers
//   counted in its allocation, or when its role is below its quota minimum
//   (the master hands a role's deficit to one starved framework of it).
// - A victim never goes below its guarantee (per scalar), its role never
//   below its quota minimum, and, when the
//   revocation serves a fair-share need rather than a guarantee, never below
//   its fair share. So a victim is never starved by a revocation, and
//   revocation cannot oscillate between two frameworks.
// - Least costly first: lower priority frameworks' tasks first, then the most
//   recently started (least work lost), then the smallest.
// - Resources already being revoked count toward the need, so nothing is
//   revoked twice for the same starvation.
// - Placement-aware (planPlacedRevocation): a starved framework that states
//   its task size and has agents held for it (reservations) has tasks
//   revoked on one held agent at a time, all or nothing: enough that its
//   task fits there, or none. Its need is then left out of the spread-out
//   plan (`placed`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/clock.h"
#include "master/allocator/allocator.h"
#include "proto/resources.h"

namespace allot {

struct RevocationFramework {
  FrameworkHandle handle = 0;
  Resources allocation;     // what it holds (offers + tasks)
  Resources guarantee;      // effective guarantee
  double fairShare = 0;     // unweighted dominant share it is entitled to
  double orderingShare = 0; // unweighted dominant share incl. refused resources
  int32_t priority = 0;
  bool starved = false;     // wants offers, none outstanding, long enough
  size_t role = kNoRole;    // index into the roles given to planRevocations
  Resources roleDeficit;    // its role's quota minimum not yet held (one
                            // framework per role carries it)
  bool placed = false;      // starved, served by planPlacedRevocation only
  static constexpr size_t kNoRole = static_cast<size_t>(-1);
};

// A role with a quota minimum: a victim's task is not revoked if that would
// put the victim's role below the minimum.
struct RevocationRole {
  Resources minimum;
  Resources allocation;
};

struct RevocableTask {
  FrameworkHandle framework = 0;
  Resources resources;
  TimePoint launchedAt;
  AgentHandle agent = 0;  // where it runs (planPlacedRevocation)
};

// Returns indices into `tasks` to revoke, in the order chosen.
// `inFlight`: resources of tasks already being revoked.
std::vector<size_t> planRevocations(const std::vector<RevocationFramework>& frameworks,
                                    const std::vector<RevocableTask>& tasks,
                                    const Resources& total, const Resources& inFlight,
                                    double hysteresis, std::vector<RevocationRole> roles = {});

// Tasks to revoke among `onAgent` (indices into `tasks`, all on one agent
// whose free resources are `free`) so that `need` fits there; empty when
// the allowed victims' tasks there cannot make it fit. Least costly first,
// with the victim rules above (fair share kept unless `forGuarantee`).
// The chosen tasks' resources leave their frameworks' allocations (and
// their roles') in *frameworks and *roles, for the plans that follow.
std::vector<size_t> planPlacedRevocation(std::vector<RevocationFramework>* frameworks,
                                         const std::vector<RevocableTask>& tasks,
                                         const std::vector<size_t>& onAgent,
                                         FrameworkHandle beneficiary, const Resources& free,
                                         const Resources& need, const Resources& total,
                                         bool forGuarantee, std::vector<RevocationRole>* roles);

// How many `task`s fit in `r` (0 when `task` has no positive scalar).
int64_t taskFits(const Resources& r, const Resources& task);

// Whether `r` holds a positive amount of any scalar.
bool anyScalar(const Resources& r);

// Unweighted dominant share of `r` in a cluster of `total`.
double rawShare(const Resources& r, const Resources& total);

// Whether `framework` should receive revocations (the first rule above).
bool needsRevocation(const RevocationFramework& framework, const Resources& total,
                     double hysteresis);

}  // namespace allot
