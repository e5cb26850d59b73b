// Roles' weights and quota at run time (allotctl role, HTTP /roles; issue
// 15). The values live in the allocator (which orders roles by them) and in
// the policy options (what a later /roles read and the revocation pass
// see). Not persisted: a restarted or newly elected master starts from its
// flags (docs/decisions.md "Run-time role weights and quota").
#include <cctype>
#include <cmath>
#include <unordered_map>

#include "base/log.h"
#include "master/master.h"

namespace allot {

Status validateRoleName(const std::string& role) {
  if (role.size() > limits::kRoleBytesMax) {
    return Error{"role name of " + std::to_string(role.size()) + " bytes (at most " +
                 std::to_string(limits::kRoleBytesMax) + ")"};
  }
  for (unsigned char c : role) {
    // ':' separates the role in --role-weight/--quota; blanks separate entries.
    if (c <= 0x20 || c == 0x7f || c == ':') {
      return Error{"role name may not hold blanks, control characters or ':'"};
    }
  }
  return okStatus();
}

Status Master::setRole(const std::string& role, std::optional<double> weight,
                       std::optional<Resources> quota) {
  if (Status st = validateRoleName(role); !st) return st;
  if (weight && !(std::isfinite(*weight) && *weight > 0 && *weight <= kRoleWeightMax)) {
    return Error{"weight must be in (0, " + std::to_string(static_cast<int64_t>(kRoleWeightMax)) + "]"};
  }
  if (quota && !quota->rangeSets().empty()) return Error{"quota: scalars only"};
  RoleConfig config = allocator_->roleConfig(role);
  if (weight) config.weight = *weight;
  if (quota) config.quota = *quota;
  if (Status st = allocator_->setRoleConfig(role, config); !st) return st;
  options_.policy.roles[role] = config;
  allocationPending_ = true;
  LOG_WARNING("operator sets role '" << role << "': weight " << config.weight << ", quota "
                                     << (config.quota.empty() ? "none" : config.quota.toString()));
  return okStatus();
}

std::vector<Master::RoleRow> Master::roles() const {
  std::unordered_map<std::string, size_t> frameworksByRole;  // one pass: linear
  for (const auto& [id, fw] : frameworks_) ++frameworksByRole[fw.info.role()];
  std::vector<RoleRow> rows;
  for (const std::string& name : allocator_->roleNames()) {
    RoleConfig config = allocator_->roleConfig(name);
    auto n = frameworksByRole.find(name);
    rows.push_back(RoleRow{name, config.weight, config.quota, allocator_->roleAllocation(name),
                           n == frameworksByRole.end() ? 0 : n->second});
  }
  return rows;
}

}  // namespace allot
