// Roles' weights and quota at run time (allotctl role, HTTP /roles; issue
// 15). The values live in the allocator (which orders roles by them) and in
// the policy options (what a later /roles read and the revocation pass
// see). RoleSettingsKeeper (role_settings.cpp) stores each change before it
// calls applyRoleSetting, and applies the stored ones when this master
// starts leading (docs/decisions.md "Run-time role settings are stored").
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

Status Master::checkRoleSetting(const std::string& role, const RoleSetting& setting) const {
  if (Status st = validateRoleName(role); !st) return st;
  if (const auto& w = setting.weight; w && !(std::isfinite(*w) && *w > 0 && *w <= kRoleWeightMax)) {
    return Error{"weight must be in (0, " + std::to_string(static_cast<int64_t>(kRoleWeightMax)) + "]"};
  }
  if (setting.quota && !setting.quota->rangeSets().empty()) return Error{"quota: scalars only"};
  // The allocator's limit, counted over what can be configured: the flags'
  // roles and the run-time ones (a role in both counts once).
  if (!flagRoles_.count(role) && !roleSettings_.count(role)) {
    size_t configured = flagRoles_.size();
    for (const auto& [name, s] : roleSettings_) configured += flagRoles_.count(name) ? 0 : 1;
    if (configured >= kConfiguredRolesMax) {
      return Error{"too many configured roles (at most " + std::to_string(kConfiguredRolesMax) + ")"};
    }
  }
  return okStatus();
}

Status Master::applyRoleSetting(const std::string& role, const RoleSetting& setting) {
  if (Status st = checkRoleSetting(role, setting); !st) return st;
  RoleConfig config;
  if (auto flag = flagRoles_.find(role); flag != flagRoles_.end()) config = flag->second;
  if (setting.weight) config.weight = *setting.weight;
  if (setting.quota) config.quota = *setting.quota;
  if (Status st = allocator_->setRoleConfig(role, config); !st) return st;
  options_.policy.roles[role] = config;
  roleSettings_[role] = setting;
  allocationPending_ = true;
  LOG_WARNING("role '" << role << "': weight " << config.weight << ", quota "
                       << (config.quota.empty() ? "none" : config.quota.toString())
                       << " (run-time setting over the flags)");
  return okStatus();
}

Status Master::applyRoleSettings(const RoleSettings& settings) {
  Status first = okStatus();
  for (const auto& [role, setting] : settings) {
    Status st = applyRoleSetting(role, setting);
    if (!st && first) first = Error{"role '" + role + "': " + st.error().message};
  }
  return first;
}

std::vector<Master::RoleRow> Master::roles() const {
  std::unordered_map<std::string, size_t> frameworksByRole;  // one pass: linear
  for (const auto& [id, fw] : frameworks_) ++frameworksByRole[fw.info.role()];
  std::vector<RoleRow> rows;
  for (const std::string& name : allocator_->roleNames()) {
    RoleConfig config = allocator_->roleConfig(name);
    auto n = frameworksByRole.find(name);
    rows.push_back(RoleRow{name, config.weight, config.quota, allocator_->roleAllocation(name),
                           n == frameworksByRole.end() ? 0 : n->second,
                           roleSettings_.count(name) > 0});
  }
  return rows;
}

}  // namespace allot
