// The policy half of the master: revocation for starved
// frameworks and the per-agent long-task cap. The choices live in
// master/allocator/revocation.*; this file gathers inputs and sends kills.
#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

#include "base/log.h"
#include "master/allocator/revocation.h"
#include "master/master.h"

namespace allot {

void Master::revokeForStarved(TimePoint now) {
  const RevocationOptions& opt = options_.policy.revocation;
  if (!opt.enabled) return;
  Resources total = allocator_->totalResources();
  std::vector<RevocationFramework> inputs;
  // Roles with a quota minimum: floors for victims, and the deficit of a
  // role below its minimum goes to one framework of it that wants offers.
  std::vector<RevocationRole> roles;
  if (!gatherRevocationInputs(now, &inputs, &roles)) return;
  RevocationScratch s;
  gatherRevocableTasks(&inputs, &s);
  revokePlaced(now, &inputs, &s, &roles);
  // Resources nobody holds count as freed too: a starved framework that
  // does not take them (its filters, or its tasks do not fit the pieces)
  // would otherwise have more revoked every cycle while the freed pieces
  // pile up unused.
  // (The inputs' allocations no longer hold the tasks being revoked, so
  // total - allocated is what is idle plus what is in flight.)
  Resources allocated;
  for (const RevocationFramework& in : inputs) allocated += in.allocation;
  Resources freed = total - allocated;
  for (size_t i : planRevocations(inputs, s.tasks, total, freed, opt.hysteresis, std::move(roles))) {
    if (!s.refs[i].task->revoking) sendRevocation(*s.refs[i].fw, *s.refs[i].task);
  }
}

// One input per framework, in the order of frameworks_; true when one of
// them has starved long enough.
bool Master::gatherRevocationInputs(TimePoint now, std::vector<RevocationFramework>* inputs,
                                    std::vector<RevocationRole>* roles) {
  const RevocationOptions& opt = options_.policy.revocation;
  Resources total = allocator_->totalResources();
  allocator_->fairShares(&fairScratch_);
  inputs->reserve(frameworks_.size());
  std::unordered_map<std::string, size_t> roleIndex;
  std::vector<bool> deficitAssigned;
  bool anyStarved = false;
  for (auto& [id, fw] : frameworks_) {
    RevocationFramework in;
    in.handle = fw.handle;
    const std::string& role = allocator_->params(fw.handle).role;
    auto [slot, added] = roleIndex.try_emplace(role, roles->size());
    if (added) {
      Resources minimum = allocator_->roleConfig(role).quota;
      if (minimum.empty()) {
        slot->second = RevocationFramework::kNoRole;
      } else {
        roles->push_back(RevocationRole{std::move(minimum), allocator_->roleAllocation(role)});
        deficitAssigned.push_back(false);
      }
    }
    in.role = slot->second;
    in.allocation = allocator_->allocation(fw.handle);
    in.guarantee = allocator_->params(fw.handle).guaranteed;
    in.fairShare = fw.handle < fairScratch_.size() ? fairScratch_[fw.handle] : 0;
    double weight = fw.info.weight() > 0 ? fw.info.weight() : 1.0;
    in.orderingShare = allocator_->orderingShare(fw.handle) * weight;
    in.priority = fw.info.priority();
    // Outstanding offers count in its allocation already; an offer it cannot
    // use (memory without cpus) must not hide its starvation.
    bool wants = fw.peer && fw.needsOffers;
    if (wants && in.role != RevocationFramework::kNoRole && !deficitAssigned[in.role]) {
      const RevocationRole& r = (*roles)[in.role];
      in.roleDeficit = r.minimum - r.allocation;
      deficitAssigned[in.role] = anyScalar(in.roleDeficit);
    }
    if (wants && needsRevocation(in, total, opt.hysteresis)) {
      if (!fw.starvedSince) fw.starvedSince = now;
      in.starved = now - *fw.starvedSince >= opt.starvation;
    } else {
      fw.starvedSince.reset();
    }
    anyStarved = anyStarved || in.starved;
    inputs->push_back(std::move(in));
  }
  return anyStarved;
}

// The tasks that may be revoked now (their agent is connected), indexed by
// agent; tasks already being revoked leave their framework's allocation.
void Master::gatherRevocableTasks(std::vector<RevocationFramework>* inputs, RevocationScratch* s) {
  size_t index = 0;  // frameworks_ in the same order as `inputs`
  for (auto& [id, fw] : frameworks_) {
    RevocationFramework& in = (*inputs)[index++];
    for (const auto& [taskId, task] : tasks_.ofFramework(id)) {
      AgentRecord* agent = agents_.find(task.info.agent_id());
      if (task.revoking) {
        // Already on its way out: freed for the need, and no longer the
        // victim's when its guarantee and fair share are checked.
        in.allocation -= task.charged;
        if (agent != nullptr) s->revokingOn.insert(agent->handle());
        continue;
      }
      if (agent == nullptr || !agent->peer) continue;  // cannot kill now
      s->tasks.push_back(RevocableTask{fw.handle, task.charged, task.launchedAt, agent->handle()});
      s->refs.push_back(RevocationScratch::Ref{&fw, &task, agent});
      s->byAgent[agent->handle()].push_back(s->tasks.size() - 1);
    }
  }
}

// Placement-aware revocation (docs/decisions.md): a starved framework of
// stated task size (min_free) with agents held for it has tasks revoked on
// each held agent where nothing is being revoked yet, enough for as many of
// its tasks as its deficit needs (at least one, at most what the agent
// holds), or nothing there. Its hold lasts until the revoked tasks are gone.
void Master::revokePlaced(TimePoint now, std::vector<RevocationFramework>* inputs,
                          RevocationScratch* s, std::vector<RevocationRole>* roles) {
  const RevocationOptions& opt = options_.policy.revocation;
  Resources total = allocator_->totalResources();
  size_t index = 0;
  for (auto& [id, fw] : frameworks_) {
    RevocationFramework& in = (*inputs)[index++];
    if (!in.starved || fw.minFree.empty() || taskFits(total, fw.minFree) == 0) continue;
    std::vector<AgentHandle> held = allocator_->reservations(fw.handle);
    if (held.empty()) continue;
    in.placed = true;
    // Victims lose more than down to their fair share only for what the
    // guarantee itself owes (see below: need within the guarantee deficit).
    Resources owed = in.guarantee - in.allocation;
    double perTask = rawShare(fw.minFree, total);
    double deficit = std::max(0.0, in.fairShare - in.orderingShare);
    int64_t wanted = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(deficit / std::max(perTask, 1e-9))));
    for (AgentHandle agent : held) {
      if (wanted <= 0) break;
      if (s->revokingOn.count(agent)) continue;  // earlier revocations still ending there
      auto onAgent = s->byAgent.find(agent);
      if (onAgent == s->byAgent.end()) continue;
      Resources agentTotal = allocator_->freeResources(agent);
      for (size_t i : onAgent->second) agentTotal += s->tasks[i].resources;
      int64_t k = std::min(wanted, taskFits(agentTotal, fw.minFree));
      if (k <= 0) continue;
      Resources need;
      for (int64_t j = 0; j < k; ++j) need += fw.minFree;
      auto chosen = planPlacedRevocation(inputs, s->tasks, onAgent->second, fw.handle,
                                         allocator_->freeResources(agent), need, total,
                                         owed.contains(need), roles);
      if (chosen.empty()) continue;
      for (size_t i : chosen) sendRevocation(*s->refs[i].fw, *s->refs[i].task);
      s->revokingOn.insert(agent);
      wanted -= k;
      Duration grace = std::chrono::seconds(0);
      for (size_t i : chosen) grace = std::max(grace, revocationGrace(opt, s->refs[i].fw->info));
      allocator_->extendReservation(fw.handle, agent, now + grace + 2 * opt.starvation);
    }
  }
}

void Master::sendRevocation(FrameworkRecord& fw, const TaskRecord& task) {
  tasks_.markRevoking(fw.id, task.info.task_id());
  ++revocations_;
  wire::Envelope e;
  auto* k = e.mutable_kill_task();
  k->set_framework_id(fw.id);
  k->set_task_id(task.info.task_id());
  k->set_agent_id(task.info.agent_id());
  k->set_grace_s(std::chrono::duration<double>(revocationGrace(options_.policy.revocation, fw.info)).count());
  k->set_reason(wire::REASON_REVOKED);
  LOG_INFO("revoking task " << task.info.task_id() << " of framework " << fw.id << " ("
                            << task.charged.toString() << ", grace " << k->grace_s() << " s)");
  outbox_.send(*agents_.find(task.info.agent_id())->peer, e);
}

Status Master::checkLongTaskCap(const AgentRecord& agent, const wire::TaskInfo& task,
                                const Resources& charged) const {
  const LongTaskCap& cap = options_.policy.longTaskMax;
  if (!task.long_lived() || !cap.set()) return okStatus();
  Resources held;
  for (const auto& [frameworkId, ids] : tasks_.onAgent(agent.id)) {
    if (!frameworks_.count(frameworkId)) continue;
    for (const auto& id : ids) {
      const TaskRecord* task = tasks_.find(frameworkId, id);
      if (task != nullptr && task->info.long_lived()) held += task->charged;
    }
  }
  auto total = Resources::fromWire(agent.info.resources());
  Resources limit = cap.on(total ? *total : Resources());
  auto capped = [&](const std::string& name) {
    if (cap.fraction) return true;  // a fraction caps every scalar
    for (const auto& l : limit.scalars()) {
      if (l.name == name) return true;
    }
    return false;
  };
  const Resources after = held + charged;  // a range-for over a temporary's member would dangle
  for (const auto& s : after.scalars()) {
    if (!capped(s.name)) continue;
    if (s.millis > limit.scalarMillis(s.name)) {
      return Error{"long-lived task " + task.task_id() + " would put " + after.toString() +
                   " of long tasks on agent " + agent.id + " (cap " + limit.toString() + ")"};
    }
  }
  return okStatus();
}

}  // namespace allot
