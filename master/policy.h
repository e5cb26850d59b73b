// Policy: the operator's allocation policy for the master, from
// flags: role weights and quota, the guarantees each role's frameworks may
// hold, revocation and the per-agent long-task cap. It is configuration, so
// a master that takes over after a failover rebuilds the same policy from
// its flags and the frameworks' re-registration.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/result.h"
#include "master/allocator/allocator.h"
#include "proto/allot.pb.h"
#include "proto/input_limits.h"
#include "proto/resources.h"

namespace allot {

struct RevocationOptions {
  bool enabled = false;                              // --revocation
  Duration grace = std::chrono::seconds(30);         // --revocation-grace
  Duration graceMax = std::chrono::seconds(300);     // --revocation-grace-max
  // A framework must stay starved this long before anything is revoked for
  // it (the master sets it to the allocation interval).
  Duration starvation = std::chrono::seconds(1);
  // Hysteresis: a framework is starved below fair * (1 - h); a victim keeps
  // at least its fair share, so the victim is never starved next.
  double hysteresis = 0.1;
};

struct LongTaskCap {
  std::optional<double> fraction;  // of each agent's total
  Resources resources;             // or a fixed amount per agent
  bool set() const { return fraction.has_value() || !resources.empty(); }
  // What long tasks may hold on an agent with `total`.
  Resources on(const Resources& total) const;
};

struct PolicyOptions {
  std::map<std::string, RoleConfig> roles;       // --role-weight, --quota
  std::map<std::string, Resources> guarantees;   // --guarantee, by role
  RevocationOptions revocation;
  LongTaskCap longTaskMax;                       // --long-task-max
  // --reservation-timeout: how long an agent may be held for a framework of
  // large tasks (AllocatorOptions::reservationTimeout); zero: never held.
  Duration reservationTimeout = std::chrono::seconds(10);
};

// Flag parsers. Lists are whitespace-separated ROLE:VALUE entries (the role
// is everything before the first ':'; an empty role is the default role):
//   --role-weight "batch:2 web:1"
//   --quota "batch:cpus:10;mem:10240 web:cpus:4"
//   --guarantee "mpi:cpus:8;mem:8192"
//   --long-task-max 0.5  |  "cpus:8;mem:8192"
Status parseRoleWeights(std::string_view text, std::map<std::string, RoleConfig>* roles);
Status parseQuotas(std::string_view text, std::map<std::string, RoleConfig>* roles);
Result<std::map<std::string, Resources>> parseGuarantees(std::string_view text);
Result<LongTaskCap> parseLongTaskMax(std::string_view text);

// The guarantee a framework holds: what it asked for, each scalar clamped to
// what the operator allows it (per scalar, the larger of its role's
// --guarantee and its principal's ACL `guarantee=`); a framework that asks
// nothing gets that allowance; nothing when the operator allows none.
Resources effectiveGuarantee(const PolicyOptions& policy, const wire::FrameworkInfo& info,
                             const Resources& principalAllowance = Resources());

// The grace a revoked task of this framework gets: its own
// revocation_grace_s when set (at most graceMax), else the default.
Duration revocationGrace(const RevocationOptions& options, const wire::FrameworkInfo& info);

}  // namespace allot
