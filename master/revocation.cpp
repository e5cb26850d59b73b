// The policy half of the master (issue 15): revocation for starved
// frameworks and the per-agent long-task cap. The choices live in
// master/allocator/revocation.*; this file gathers inputs and sends kills.
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
  allocator_->fairShares(&fairScratch_);
  std::vector<RevocationFramework> inputs;
  inputs.reserve(frameworks_.size());
  // Roles with a quota minimum: floors for victims, and the deficit of a
  // role below its minimum goes to one framework of it that wants offers.
  std::vector<RevocationRole> roles;
  std::unordered_map<std::string, size_t> roleIndex;
  std::vector<bool> deficitAssigned;
  bool anyStarved = false;
  for (auto& [id, fw] : frameworks_) {
    RevocationFramework in;
    in.handle = fw.handle;
    const std::string& role = allocator_->params(fw.handle).role;
    auto [slot, added] = roleIndex.try_emplace(role, roles.size());
    if (added) {
      Resources minimum = allocator_->roleConfig(role).quota;
      if (minimum.empty()) {
        slot->second = RevocationFramework::kNoRole;
      } else {
        roles.push_back(RevocationRole{std::move(minimum), allocator_->roleAllocation(role)});
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
      const RevocationRole& r = roles[in.role];
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
    inputs.push_back(std::move(in));
  }
  if (!anyStarved) return;

  struct Ref {
    FrameworkRecord* fw;
    TaskRecord* task;
  };
  std::vector<RevocableTask> tasks;
  std::vector<Ref> refs;
  size_t index = 0;  // frameworks_ in the same order as `inputs`
  for (auto& [id, fw] : frameworks_) {
    RevocationFramework& in = inputs[index++];
    for (auto& [taskId, task] : fw.tasks) {
      if (task.revoking) {
        // Already on its way out: freed for the need, and no longer the
        // victim's when its guarantee and fair share are checked.
        in.allocation -= task.charged;
        continue;
      }
      auto agent = agents_.find(task.info.agent_id());
      if (agent == agents_.end() || !agent->second.peer) continue;  // cannot kill now
      tasks.push_back(RevocableTask{fw.handle, task.charged, task.launchedAt});
      refs.push_back(Ref{&fw, &task});
    }
  }
  // Resources nobody holds count as freed too: a starved framework that
  // does not take them (its filters, or its tasks do not fit the pieces)
  // would otherwise have more revoked every cycle while the freed pieces
  // pile up unused.
  // (The inputs' allocations no longer hold the tasks being revoked, so
  // total - allocated is what is idle plus what is in flight.)
  Resources allocated;
  for (const RevocationFramework& in : inputs) allocated += in.allocation;
  Resources freed = total - allocated;
  for (size_t i : planRevocations(inputs, tasks, total, freed, opt.hysteresis, std::move(roles))) {
    FrameworkRecord& fw = *refs[i].fw;
    TaskRecord& task = *refs[i].task;
    task.revoking = true;
    ++revocations_;
    wire::Envelope e;
    auto* k = e.mutable_kill_task();
    k->set_framework_id(fw.id);
    k->set_task_id(task.info.task_id());
    k->set_agent_id(task.info.agent_id());
    k->set_grace_s(std::chrono::duration<double>(revocationGrace(opt, fw.info)).count());
    k->set_reason(wire::REASON_REVOKED);
    LOG_INFO("revoking task " << task.info.task_id() << " of framework " << fw.id << " ("
                              << task.charged.toString() << ", grace " << k->grace_s() << " s)");
    outbox_.send(*agents_.at(task.info.agent_id()).peer, e);
  }
}

Status Master::checkLongTaskCap(const AgentRecord& agent, const wire::TaskInfo& task,
                                const Resources& charged) const {
  const LongTaskCap& cap = options_.policy.longTaskMax;
  if (!task.long_lived() || !cap.set()) return okStatus();
  Resources held;
  for (const auto& [frameworkId, ids] : agent.tasks) {
    auto fw = frameworks_.find(frameworkId);
    if (fw == frameworks_.end()) continue;
    for (const auto& id : ids) {
      auto t = fw->second.tasks.find(id);
      if (t != fw->second.tasks.end() && t->second.info.long_lived()) held += t->second.charged;
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
  for (const auto& s : (held + charged).scalars()) {
    if (!capped(s.name)) continue;
    if (s.millis > limit.scalarMillis(s.name)) {
      return Error{"long-lived task " + task.task_id() + " would put " + (held + charged).toString() +
                   " of long tasks on agent " + agent.id + " (cap " + limit.toString() + ")"};
    }
  }
  return okStatus();
}

}  // namespace allot
