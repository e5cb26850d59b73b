#include "master/policy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace allot {
namespace {

struct Entry {
  std::string role;
  std::string value;
};

Result<std::vector<Entry>> splitEntries(std::string_view text, std::string_view flag) {
  std::vector<Entry> entries;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t end = i;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
    if (end == i) break;
    std::string_view item = text.substr(i, end - i);
    size_t colon = item.find(':');
    if (colon == std::string_view::npos || colon + 1 == item.size()) {
      return Error{std::string(flag) + ": '" + std::string(item) + "' is not ROLE:VALUE"};
    }
    if (colon > limits::kRoleBytesMax) {
      // The same limit as a role arriving in FrameworkInfo (proto/validate.cpp).
      return Error{std::string(flag) + ": role names are at most " +
                   std::to_string(limits::kRoleBytesMax) + " bytes"};
    }
    entries.push_back(Entry{std::string(item.substr(0, colon)), std::string(item.substr(colon + 1))});
    i = end;
  }
  return entries;
}

}  // namespace

Resources LongTaskCap::on(const Resources& total) const {
  if (!fraction) return resources;
  Resources cap;
  for (const auto& s : total.scalars()) {
    cap.setScalarMillis(s.name, static_cast<int64_t>(static_cast<double>(s.millis) * *fraction));
  }
  return cap;
}

Status parseRoleWeights(std::string_view text, std::map<std::string, RoleConfig>* roles) {
  auto entries = splitEntries(text, "--role-weight");
  if (!entries) return entries.error();
  for (const Entry& e : *entries) {
    char* end = nullptr;
    double w = std::strtod(e.value.c_str(), &end);
    if (end == e.value.c_str() || *end != '\0' || !(w > 0) || w > 1e6) {
      return Error{"--role-weight: weight of role '" + e.role + "' must be in (0, 1e6], not '" +
                   e.value + "'"};
    }
    (*roles)[e.role].weight = w;
  }
  return okStatus();
}

Status parseQuotas(std::string_view text, std::map<std::string, RoleConfig>* roles) {
  auto entries = splitEntries(text, "--quota");
  if (!entries) return entries.error();
  for (const Entry& e : *entries) {
    auto r = Resources::parse(e.value);
    if (!r) return Error{"--quota: role '" + e.role + "': " + r.error().describe()};
    if (!r->rangeSets().empty()) return Error{"--quota: role '" + e.role + "': scalars only"};
    (*roles)[e.role].quota = *r;
  }
  return okStatus();
}

Result<std::map<std::string, Resources>> parseGuarantees(std::string_view text) {
  auto entries = splitEntries(text, "--guarantee");
  if (!entries) return entries.error();
  std::map<std::string, Resources> out;
  for (const Entry& e : *entries) {
    auto r = Resources::parse(e.value);
    if (!r) return Error{"--guarantee: role '" + e.role + "': " + r.error().describe()};
    if (!r->rangeSets().empty()) return Error{"--guarantee: role '" + e.role + "': scalars only"};
    out[e.role] = *r;
  }
  return out;
}

Result<LongTaskCap> parseLongTaskMax(std::string_view text) {
  LongTaskCap cap;
  if (text.empty()) return cap;
  std::string s(text);
  char* end = nullptr;
  double f = std::strtod(s.c_str(), &end);
  if (end != s.c_str() && *end == '\0') {
    if (!(f >= 0 && f <= 1)) return Error{"--long-task-max: a fraction must be in [0, 1]"};
    cap.fraction = f;
    return cap;
  }
  auto r = Resources::parse(text);
  if (!r) return Error{"--long-task-max: neither a fraction nor resources: " + r.error().describe()};
  cap.resources = *r;
  return cap;
}

Resources effectiveGuarantee(const PolicyOptions& policy, const wire::FrameworkInfo& info,
                             const Resources& principalAllowance) {
  Resources allowed;
  if (auto role = policy.guarantees.find(info.role()); role != policy.guarantees.end()) {
    allowed = role->second;
  }
  for (const auto& s : principalAllowance.scalars()) {
    if (s.millis > allowed.scalarMillis(s.name)) allowed.setScalarMillis(s.name, s.millis);
  }
  bool any = false;
  for (const auto& s : allowed.scalars()) any = any || s.millis > 0;
  if (!any) return Resources();
  auto asked = Resources::fromWire(info.guaranteed());
  if (!asked || asked->empty()) return allowed;
  Resources out;
  for (const auto& s : asked->scalars()) {
    int64_t cap = allowed.scalarMillis(s.name);
    if (std::min(s.millis, cap) > 0) out.setScalarMillis(s.name, std::min(s.millis, cap));
  }
  return out;
}

Duration revocationGrace(const RevocationOptions& options, const wire::FrameworkInfo& info) {
  double asked = info.revocation_grace_s();
  if (!(asked > 0) || !std::isfinite(asked)) return options.grace;
  return std::min(secondsToDuration(std::min(asked, 1e7)), options.graceMax);
}

}  // namespace allot
