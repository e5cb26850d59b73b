// Reservations for frameworks of large tasks (docs/decisions.md
// "Large tasks: reservations and placement-aware revocation").
//
// DRF over offers hands every freed piece of an agent to whoever is next and
// can use it; a framework whose tasks need 4 cpus on one agent is offered
// nothing while greedy 1-cpu frameworks take each cpu as it frees. A
// framework that states its task size (minFree), is below its fair share
// and fits nowhere in a round gets agents held for it: nobody else is
// offered their free resources until they fit its task (then it is granted
// them and the hold ends) or the hold times out (then it may not reserve
// again for one timeout: a framework whose tasks never fit cannot keep
// agents idle). Everything is bounded: kReservationsPerFrameworkMax per
// framework, kReservedAgentsFractionMax of the agents in all, only agents
// whose total fits the task, kReservationScansPerRound frameworks
// considered per round, lowest share first.
#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "master/allocator/allocator.h"
#include "master/allocator/bits.h"
#include "master/allocator/revocation.h"

namespace allot {
namespace {

// How close `free` is to fitting `task`: the mean over the task's scalars of
// the fraction already free (1 = fits).
double closeness(const Resources& free, const Resources& task) {
  double sum = 0;
  size_t n = 0;
  for (const auto& s : task.scalars()) {
    if (s.millis <= 0) continue;
    sum += std::min(1.0, static_cast<double>(free.scalarMillis(s.name)) / s.millis);
    ++n;
  }
  return n ? sum / n : 1;
}

}  // namespace

std::vector<AgentHandle> Allocator::reservations(FrameworkHandle framework) const {
  return frameworks_[framework].reserved;
}

void Allocator::extendReservation(FrameworkHandle framework, AgentHandle agent,
                                       TimePoint until) {
  if (agent >= agents_.size()) return;
  AgentSlot& a = agents_[agent];
  if (a.reservedFor != framework) return;
  a.reservedUntil = std::max(a.reservedUntil, until);
}

void Allocator::reserve(FrameworkHandle framework, AgentHandle agent, TimePoint now) {
  AgentSlot& a = agents_[agent];
  CHECK(!a.reservedFor);
  FrameworkSlot& fw = frameworks_[framework];
  a.reservedFor = framework;
  a.reservedUntil = now + options_.reservationTimeout;
  fw.reserved.push_back(agent);
  setBit(&fw.reservedBits, agent);
  reserved_.push_back(agent);
  setBit(&reservedBits_, agent);
}

void Allocator::release(AgentHandle agent) {
  AgentSlot& a = agents_[agent];
  if (!a.reservedFor) return;
  FrameworkSlot& fw = frameworks_[*a.reservedFor];
  std::erase(fw.reserved, agent);
  clearBit(&fw.reservedBits, agent);
  std::erase(reserved_, agent);
  clearBit(&reservedBits_, agent);
  a.reservedFor.reset();
  markDirty(agent);  // its free resources are everyone's again
}

void Allocator::releaseAll(FrameworkHandle framework) {
  while (!frameworks_[framework].reserved.empty()) release(frameworks_[framework].reserved.back());
}

void Allocator::expireReservations(TimePoint now) {
  for (size_t i = 0; i < reserved_.size();) {
    AgentHandle agent = reserved_[i];
    const AgentSlot& a = agents_[agent];
    if (a.reservedUntil > now) {
      ++i;
      continue;
    }
    // Unused for a whole timeout: no new hold for one more, so a framework
    // whose task never fits cannot keep agents idle back to back.
    frameworks_[*a.reservedFor].reserveAgainAt = now + options_.reservationTimeout;
    release(agent);  // removes reserved_[i]
  }
}

// The share of the cluster the framework's held agents would give it once
// full of its tasks.
double Allocator::reservedCover(const FrameworkSlot& fw) const {
  Resources task = fw.minFree;
  int64_t tasks = 0;
  for (AgentHandle agent : fw.reserved) tasks += taskFits(agents_[agent].total, task);
  double share = 0;
  for (const auto& s : task.scalars()) {
    int64_t total = total_.scalarMillis(s.name);
    if (total > 0) share = std::max(share, static_cast<double>(s.millis) * tasks / total);
  }
  return share;
}

// The agent closest to fitting the framework's task among those it may be
// offered: live, active, not held, its total fits the task. O(agents).
std::optional<AgentHandle> Allocator::closestAgent(FrameworkHandle framework) const {
  const FrameworkSlot& fw = frameworks_[framework];
  std::optional<AgentHandle> best;
  double bestCloseness = -1;
  for (AgentHandle i = 0; i < agents_.size(); ++i) {
    const AgentSlot& a = agents_[i];
    if (!a.live || !a.active || a.reservedFor || testBit(fw.refusedBits, i)) continue;
    if (fw.agentListSet && !testBit(fw.allowedBits, i)) continue;
    if (!a.total.contains(fw.minFree)) continue;
    double c = closeness(a.free, fw.minFree);
    if (c > bestCloseness) {
      best = i;
      bestCloseness = c;
    }
  }
  return best;
}

void Allocator::reserveForStarved(TimePoint now) {
  if (options_.reservationTimeout <= Duration::zero()) return;
  size_t cap = std::max<size_t>(
      1, static_cast<size_t>(std::floor(static_cast<double>(liveAgents_) * kReservedAgentsFractionMax)));
  if (reserved_.size() >= cap) return;
  fairShares(&fairScratch_);
  auto shareOfFw = [&](FrameworkHandle f) {
    return orderingShare(f) * (frameworks_[f].params.weight > 0 ? frameworks_[f].params.weight : 1.0);
  };
  std::vector<FrameworkHandle>& order = unplacedScratch_;
  std::sort(order.begin(), order.end(), [&](FrameworkHandle a, FrameworkHandle b) {
    double sa = shareOfFw(a), sb = shareOfFw(b);
    return sa != sb ? sa < sb : a < b;
  });
  if (order.size() > kReservationScansPerRound) order.resize(kReservationScansPerRound);
  for (FrameworkHandle f : order) {
    FrameworkSlot& fw = frameworks_[f];
    if (!fw.active || now < fw.reserveAgainAt || capped(roles_[fw.role])) continue;
    double fair = fairScratch_[f];
    double share = shareOfFw(f);
    if (!(share < fair * (1 - options_.reservationHysteresis))) continue;
    // Hold agents until, once full of its tasks, they would cover its
    // deficit: more would keep resources idle that others could use.
    while (reservedCover(fw) < fair - share && fw.reserved.size() < kReservationsPerFrameworkMax &&
           reserved_.size() < cap) {
      auto agent = closestAgent(f);
      if (!agent) break;
      reserve(f, *agent, now);
    }
    if (reserved_.size() >= cap) return;
  }
}

}  // namespace allot
