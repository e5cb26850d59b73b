#include "master/allocator/revocation.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

namespace allot {
namespace {

bool belowGuarantee(const Resources& allocation, const Resources& guarantee) {
  for (const auto& s : guarantee.scalars()) {
    if (allocation.scalarMillis(s.name) < s.millis) return true;
  }
  return false;
}

struct Victim {
  Resources allocation;
  Resources guarantee;
  double fairShare = 0;
  int32_t priority = 0;
  size_t role = RevocationFramework::kNoRole;
};

// Least costly first: lower priority, then most recently started, then
// smallest; index last for a total order.
void sortByCost(std::vector<size_t>* order, const std::vector<RevocableTask>& tasks,
                const std::function<int32_t(FrameworkHandle)>& priorityOf, const Resources& total) {
  std::vector<double> size(tasks.size(), 0);
  for (size_t i : *order) size[i] = rawShare(tasks[i].resources, total);
  std::sort(order->begin(), order->end(), [&](size_t a, size_t b) {
    int32_t pa = priorityOf(tasks[a].framework), pb = priorityOf(tasks[b].framework);
    if (pa != pb) return pa < pb;
    if (tasks[a].launchedAt != tasks[b].launchedAt) return tasks[a].launchedAt > tasks[b].launchedAt;
    if (size[a] != size[b]) return size[a] < size[b];
    return a < b;
  });
}

}  // namespace

int64_t taskFits(const Resources& r, const Resources& task) {
  int64_t n = -1;
  for (const auto& s : task.scalars()) {
    if (s.millis <= 0) continue;
    int64_t k = r.scalarMillis(s.name) / s.millis;
    n = n < 0 ? k : std::min(n, k);
  }
  return std::max<int64_t>(n, 0);
}

std::vector<size_t> planPlacedRevocation(std::vector<RevocationFramework>* frameworks,
                                         const std::vector<RevocableTask>& tasks,
                                         const std::vector<size_t>& onAgent,
                                         FrameworkHandle beneficiary, const Resources& free,
                                         const Resources& need, const Resources& total,
                                         bool forGuarantee, std::vector<RevocationRole>* roles) {
  if (free.contains(need)) return {};
  std::unordered_map<FrameworkHandle, size_t> victimIndex;
  for (size_t i = 0; i < frameworks->size(); ++i) {
    const RevocationFramework& fw = (*frameworks)[i];
    if (!fw.starved && fw.handle != beneficiary) victimIndex[fw.handle] = i;
  }
  std::vector<size_t> order;
  for (size_t i : onAgent) {
    if (victimIndex.count(tasks[i].framework)) order.push_back(i);
  }
  sortByCost(&order, tasks,
             [&](FrameworkHandle f) { return (*frameworks)[victimIndex[f]].priority; }, total);
  // Trial on copies: nothing changes unless the task fits in the end.
  std::unordered_map<size_t, Resources> allocations;
  std::vector<Resources> roleAllocations;
  for (const RevocationRole& r : *roles) roleAllocations.push_back(r.allocation);
  Resources have = free;
  std::vector<size_t> chosen;
  for (size_t i : order) {
    if (have.contains(need)) break;
    size_t v = victimIndex[tasks[i].framework];
    const RevocationFramework& victim = (*frameworks)[v];
    auto [slot, fresh] = allocations.try_emplace(v, victim.allocation);
    Resources after = slot->second - tasks[i].resources;
    if (belowGuarantee(after, victim.guarantee)) continue;
    bool inRole = victim.role < roles->size();
    if (inRole && belowGuarantee(roleAllocations[victim.role] - tasks[i].resources,
                                 (*roles)[victim.role].minimum)) {
      continue;
    }
    if (!forGuarantee && rawShare(after, total) < victim.fairShare) continue;
    slot->second = std::move(after);
    if (inRole) roleAllocations[victim.role] -= tasks[i].resources;
    have += tasks[i].resources;
    chosen.push_back(i);
  }
  if (!have.contains(need)) return {};
  for (auto& [v, allocation] : allocations) (*frameworks)[v].allocation = std::move(allocation);
  for (size_t r = 0; r < roles->size(); ++r) (*roles)[r].allocation = std::move(roleAllocations[r]);
  return chosen;
}

double rawShare(const Resources& r, const Resources& total) {
  double share = 0;
  for (const auto& s : r.scalars()) {
    int64_t t = total.scalarMillis(s.name);
    if (t > 0 && s.millis > 0) share = std::max(share, static_cast<double>(s.millis) / t);
  }
  return share;
}

bool anyScalar(const Resources& r) {
  for (const auto& s : r.scalars()) {
    if (s.millis > 0) return true;
  }
  return false;
}

bool needsRevocation(const RevocationFramework& fw, const Resources& total, double hysteresis) {
  (void)total;
  return belowGuarantee(fw.allocation, fw.guarantee) || anyScalar(fw.roleDeficit) ||
         fw.orderingShare < fw.fairShare * (1 - hysteresis);
}

std::vector<size_t> planRevocations(const std::vector<RevocationFramework>& frameworks,
                                    const std::vector<RevocableTask>& tasks,
                                    const Resources& total, const Resources& inFlight,
                                    double hysteresis, std::vector<RevocationRole> roles) {
  Resources guaranteeNeed;
  double shareNeed = 0;
  std::unordered_map<FrameworkHandle, Victim> victims;
  for (const RevocationFramework& fw : frameworks) {
    if (fw.starved && fw.placed) continue;  // served on its held agents
    if (fw.starved && needsRevocation(fw, total, hysteresis)) {
      guaranteeNeed += fw.guarantee - fw.allocation;
      guaranteeNeed += fw.roleDeficit;
      if (fw.orderingShare < fw.fairShare * (1 - hysteresis)) shareNeed += fw.fairShare - fw.orderingShare;
    } else if (!fw.starved) {
      victims[fw.handle] = Victim{fw.allocation, fw.guarantee, fw.fairShare, fw.priority, fw.role};
    }
  }
  Resources freed = inFlight;
  auto guaranteeMet = [&] { return freed.contains(guaranteeNeed); };
  auto satisfied = [&] { return guaranteeMet() && rawShare(freed, total) >= shareNeed; };
  if (satisfied()) return {};

  std::vector<size_t> order;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (victims.count(tasks[i].framework)) order.push_back(i);
  }
  sortByCost(&order, tasks, [&](FrameworkHandle f) { return victims[f].priority; }, total);

  std::vector<size_t> chosen;
  for (size_t i : order) {
    if (satisfied()) break;
    Victim& v = victims[tasks[i].framework];
    Resources after = v.allocation - tasks[i].resources;
    if (belowGuarantee(after, v.guarantee)) continue;
    RevocationRole* role = v.role < roles.size() ? &roles[v.role] : nullptr;
    if (role && belowGuarantee(role->allocation - tasks[i].resources, role->minimum)) continue;
    // Once every guarantee is served, fairness alone never pushes a victim
    // below its own fair share.
    if (guaranteeMet() && rawShare(after, total) < v.fairShare) continue;
    v.allocation = std::move(after);
    if (role) role->allocation -= tasks[i].resources;
    freed += tasks[i].resources;
    chosen.push_back(i);
  }
  return chosen;
}

}  // namespace allot
