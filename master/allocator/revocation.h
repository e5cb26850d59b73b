// Revocation planning (paper section 3.3, issue 15): which running tasks to
// revoke so that starved frameworks reach their guarantee or their fair
// share. Pure: the master gathers the inputs, sends the kills and keeps
// the in-flight set; the planner only chooses.
//
// Rules (docs/decisions.md says why):
// - A framework is a beneficiary when it wants offers and is below its
//   guarantee or below fair * (1 - hysteresis), its outstanding offers
//   counted in its allocation.
// - A victim never goes below its guarantee (per scalar), and, when the
//   revocation serves a fair-share need rather than a guarantee, never below
//   its fair share. So a victim is never starved by a revocation, and
//   revocation cannot oscillate between two frameworks.
// - Least costly first: lower priority frameworks' tasks first, then the most
//   recently started (least work lost), then the smallest.
// - Resources already being revoked count toward the need, so nothing is
//   revoked twice for the same starvation.
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
};

struct RevocableTask {
  FrameworkHandle framework = 0;
  Resources resources;
  TimePoint launchedAt;
};

// Returns indices into `tasks` to revoke, in the order chosen.
// `inFlight`: resources of tasks already being revoked.
std::vector<size_t> planRevocations(const std::vector<RevocationFramework>& frameworks,
                                    const std::vector<RevocableTask>& tasks,
                                    const Resources& total, const Resources& inFlight,
                                    double hysteresis);

// Unweighted dominant share of `r` in a cluster of `total`.
double rawShare(const Resources& r, const Resources& total);

// Whether `framework` should receive revocations (the first rule above).
bool needsRevocation(const RevocationFramework& framework, const Resources& total,
                     double hysteresis);

}  // namespace allot
