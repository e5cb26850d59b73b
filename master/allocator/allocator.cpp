#include "master/allocator/allocator.h"

#include <algorithm>
#include <bit>

#include "base/check.h"
#include "master/allocator/bits.h"

namespace allot {

namespace {

// A handle into `slots` (a freed one first, else a new slot; at most `max`)
// whose slot is reset to a default one.
template <typename Handle, typename Slot>
Handle takeSlot(std::vector<Handle>* freeHandles, std::vector<Slot>* slots, size_t max) {
  Handle handle;
  if (!freeHandles->empty()) {
    handle = freeHandles->back();
    freeHandles->pop_back();
  } else {
    CHECK(slots->size() < max);
    handle = static_cast<Handle>(slots->size());
    slots->emplace_back();
  }
  (*slots)[handle] = Slot{};
  return handle;
}

}  // namespace

Allocator::Allocator(AllocatorOptions options, OrderingFactory makeOrdering)
    : options_(std::move(options)),
      makeOrdering_(std::move(makeOrdering)),
      roleQueue_(makeDrfOrdering()) {
  roles_[roleFor("")].configured = true;  // the default role
  for (const auto& [name, config] : options_.roles) (void)setRoleConfig(name, config);
}

Status Allocator::setRoleConfig(const std::string& name, const RoleConfig& config) {
  auto it = roleIndex_.find(name);
  bool known = it != roleIndex_.end() && roles_[it->second].configured;
  if (!known && configuredRoles_ >= kConfiguredRolesMax) {
    return Error{"too many configured roles (at most " + std::to_string(kConfiguredRolesMax) + ")"};
  }
  RoleSlot& role = roles_[roleFor(name)];
  if (!role.configured) ++configuredRoles_;
  role.configured = true;
  role.config = config;
  if (!(role.config.weight > 0)) role.config.weight = 1;
  role.quotaMillis = sparse(config.quota);
  fullPending_ = true;  // a larger quota or weight may change who gets what
  return okStatus();
}

std::vector<std::string> Allocator::roleNames() const {
  std::vector<std::string> names;
  for (const RoleSlot& r : roles_) {
    if (r.live) names.push_back(r.name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

AgentHandle Allocator::addAgent(const Resources& total) {
  AgentHandle handle = takeSlot(&freeAgentHandles_, &agents_, kMaxAgents);
  AgentSlot& slot = agents_[handle];
  slot.live = true;
  slot.total = total;
  slot.free = total;
  total_ += total;
  ++liveAgents_;
  addDense(&totalMillis_, total, 1);
  ++sharesEpoch_;
  freeChanged(slot);
  markDirty(handle);
  return handle;
}

void Allocator::removeAgent(AgentHandle handle) {
  CHECK(handle < agents_.size() && agents_[handle].live);
  release(handle);
  --liveAgents_;
  AgentSlot& slot = agents_[handle];
  for (FrameworkHandle fw : slot.refusedBy) {
    if (frameworks_[fw].live) dropRefusal(fw, handle);
  }
  for (FrameworkHandle fw : slot.allowedBy) clearBit(&frameworks_[fw].allowedBits, handle);
  total_ -= slot.total;
  addDense(&totalMillis_, slot.total, -1);
  ++sharesEpoch_;
  clearBit(&dirty_, handle);
  slot = AgentSlot{};
  freeAgentHandles_.push_back(handle);
}

void Allocator::setAgentActive(AgentHandle handle, bool active) {
  CHECK(handle < agents_.size() && agents_[handle].live);
  agents_[handle].active = active;
  if (active) markDirty(handle);
  if (!active) release(handle);
}

FrameworkHandle Allocator::addFramework(const FrameworkParams& params) {
  FrameworkHandle handle = takeSlot(&freeFrameworkHandles_, &frameworks_, kMaxFrameworks);
  FrameworkSlot& slot = frameworks_[handle];
  slot.live = true;
  slot.params = params;
  slot.guaranteedMillis = sparse(params.guaranteed);
  slot.role = roleFor(params.role);
  ++roles_[slot.role].frameworks;
  briefs_.resize(frameworks_.size());
  briefs_[handle] = RoundBrief{.role = slot.role};
  return handle;
}

void Allocator::removeFramework(FrameworkHandle handle) {
  CHECK(handle < frameworks_.size() && frameworks_[handle].live);
  releaseAll(handle);
  FrameworkSlot& slot = frameworks_[handle];
  refusalCount_ -= slot.refusals.size();
  // The caller recovered everything; whatever is left (refusals) leaves the
  // role's books with the framework.
  RoleSlot& role = roles_[slot.role];
  addDense(&role.allocatedMillis, allocation(handle), -1);
  for (const auto& [agent, refusal] : slot.refusals) addDense(&role.refusedMillis, refusal.counted, -1);
  --role.frameworks;
  releaseRole(slot.role);
  slot = FrameworkSlot{};
  briefs_[handle] = RoundBrief{};
  freeFrameworkHandles_.push_back(handle);
}

void Allocator::updateFramework(FrameworkHandle handle, const FrameworkParams& params) {
  FrameworkSlot& fw = frameworks_[handle];
  CHECK(fw.live);
  if (params.role != fw.params.role) {
    Resources held = allocation(handle);
    Resources refused;
    for (const auto& [agent, refusal] : fw.refusals) refused += refusal.counted;
    RoleSlot& from = roles_[fw.role];
    addDense(&from.allocatedMillis, held, -1);
    addDense(&from.refusedMillis, refused, -1);
    --from.frameworks;
    releaseRole(fw.role);
    fw.role = roleFor(params.role);
    RoleSlot& to = roles_[fw.role];
    ++to.frameworks;
    addDense(&to.allocatedMillis, held, 1);
    addDense(&to.refusedMillis, refused, 1);
  }
  fw.params = params;
  fw.guaranteedMillis = sparse(params.guaranteed);
  briefs_[handle].role = fw.role;
  shareChanged(fw);
}

void Allocator::setActive(FrameworkHandle handle, bool active) {
  CHECK(frameworks_[handle].live);
  // A framework that starts wanting offers must see every agent, not just
  // the ones that changed since the last round.
  if (active && !frameworks_[handle].active) fullPending_ = true;
  if (!active) releaseAll(handle);
  frameworks_[handle].active = active;
  briefs_[handle].active = active;
}

void Allocator::setStandingFilters(FrameworkHandle handle,
                                        const std::vector<AgentHandle>& agentList,
                                        const Resources& minFree) {
  FrameworkSlot& slot = frameworks_[handle];
  CHECK(slot.live);
  releaseAll(handle);  // held for the old task size or agent list
  slot.agentListSet = !agentList.empty();
  slot.allowedBits.clear();
  for (AgentHandle a : agentList) {
    setBit(&slot.allowedBits, a);
    if (a < agents_.size()) noteAllowedBy(a, handle);
  }
  slot.minFree = minFree;
  briefs_[handle].wantsMinimum = !minFree.empty();
  fullPending_ = true;
}

void Allocator::allocateUsed(FrameworkHandle framework, AgentHandle agent,
                                  const Resources& resources) {
  CHECK(frameworks_[framework].live && agents_[agent].live);
  AgentSlot& a = agents_[agent];
  FrameworkSlot& fw = frameworks_[framework];
  a.free -= resources;
  freeChanged(a);
  charge(fw, resources, 1);
}

void Allocator::recover(FrameworkHandle framework, AgentHandle agent,
                             const Resources& resources, std::optional<Duration> refuse,
                             TimePoint now) {
  giveBack(framework, agent, resources);
  if (refuse && *refuse > Duration::zero()) this->refuse(framework, agent, resources, *refuse, false, now);
  dropRefusalsOutgrownBy(agent);
}

void Allocator::giveBack(FrameworkHandle framework, AgentHandle agent, const Resources& resources) {
  CHECK(frameworks_[framework].live && agents_[agent].live);
  AgentSlot& a = agents_[agent];
  charge(frameworks_[framework], resources, -1);
  a.free += resources;
  freeChanged(a);
  markDirty(agent);
}

void Allocator::recoverRevoked(FrameworkHandle framework, AgentHandle agent,
                                    const Resources& resources, Duration hold, TimePoint now) {
  giveBack(framework, agent, resources);
  if (hold > Duration::zero()) refuse(framework, agent, resources, hold, true, now);
  dropRefusalsOutgrownBy(agent);
}

// Records (or renews) the framework's refusal of the agent. A refusal made
// while a hold runs keeps the hold: the later expiry wins and the counted
// resources add up, so neither a short decline nor the next revoked task's
// return shortens what the victim is kept from.
void Allocator::refuse(FrameworkHandle framework, AgentHandle agent,
                            const Resources& resources, Duration duration, bool held,
                            TimePoint now) {
  AgentSlot& a = agents_[agent];
  FrameworkSlot& fw = frameworks_[framework];
  auto [it, inserted] = fw.refusals.try_emplace(agent);
  Refusal next{a.free, resources, now + duration, held};
  if (inserted) {
    ++refusalCount_;
    a.refusedBy.push_back(framework);
  } else {
    Refusal& old = it->second;
    chargeRefused(fw, old.counted, -1);
    if (old.held && old.expiry > now) {
      next.held = true;
      next.expiry = std::max(next.expiry, old.expiry);
      next.counted = old.counted + resources;
    }
  }
  it->second = std::move(next);
  chargeRefused(fw, it->second.counted, 1);
  setBit(&fw.refusedBits, agent);
  expiries_.push(Expiry{now + duration, framework, agent});
}

// Removing an agent clears its bit in the lists that name it, not in
// every framework's. Stale entries (the framework gone, its list changed)
// and repeats are dropped each time the list doubles: amortised O(1).
void Allocator::noteAllowedBy(AgentHandle agent, FrameworkHandle framework) {
  AgentSlot& a = agents_[agent];
  a.allowedBy.push_back(framework);
  if (a.allowedBy.size() < std::max<size_t>(16, 2 * a.allowedByKept)) return;
  std::erase_if(a.allowedBy, [&](FrameworkHandle fw) {
    return !frameworks_[fw].live || !testBit(frameworks_[fw].allowedBits, agent);
  });
  std::sort(a.allowedBy.begin(), a.allowedBy.end());
  a.allowedBy.erase(std::unique(a.allowedBy.begin(), a.allowedBy.end()), a.allowedBy.end());
  a.allowedByKept = a.allowedBy.size();
}

void Allocator::dropRefusal(FrameworkHandle framework, AgentHandle agent) {
  FrameworkSlot& fw = frameworks_[framework];
  auto it = fw.refusals.find(agent);
  if (it == fw.refusals.end()) return;
  chargeRefused(fw, it->second.counted, -1);
  fw.refusals.erase(it);
  --refusalCount_;
  clearBit(&fw.refusedBits, agent);
}

// A refusal covers the resources refused; once the agent has more free
// (a task ended there), the framework gets to see the larger offer.
void Allocator::dropRefusalsOutgrownBy(AgentHandle agent) {
  AgentSlot& a = agents_[agent];
  auto& list = a.refusedBy;
  for (size_t i = 0; i < list.size();) {
    FrameworkSlot& fw = frameworks_[list[i]];
    auto it = fw.live ? fw.refusals.find(agent) : fw.refusals.end();
    if (it == fw.refusals.end()) {
      list[i] = list.back();
      list.pop_back();
      continue;
    }
    if (!it->second.held && !it->second.refused.contains(a.free)) {
      dropRefusal(list[i], agent);
      list[i] = list.back();
      list.pop_back();
      continue;
    }
    ++i;
  }
}

void Allocator::expireRefusals(TimePoint now) {
  while (!expiries_.empty() && expiries_.top().when <= now) {
    Expiry e = expiries_.top();
    expiries_.pop();
    if (e.framework >= frameworks_.size() || !frameworks_[e.framework].live) continue;
    auto& refusals = frameworks_[e.framework].refusals;
    auto it = refusals.find(e.agent);
    if (it == refusals.end() || it->second.expiry > now) continue;
    dropRefusal(e.framework, e.agent);
    markDirty(e.agent);
  }
}

bool Allocator::offerable(const Resources& free) const {
  if (free.empty()) return false;
  if (options_.minOffer.empty()) {
    if (!free.rangeSets().empty()) return true;
    for (const auto& s : free.scalars()) {
      if (s.millis > 0) return true;
    }
    return false;
  }
  for (const auto& s : options_.minOffer.scalars()) {
    if (free.scalarMillis(s.name) >= s.millis) return true;
  }
  return false;
}

void Allocator::freeChanged(AgentSlot& agent) { agent.offerable = offerable(agent.free); }

void Allocator::markDirty(AgentHandle agent) {
  size_t w = agent / kBitsPerWord;
  if (wordAt(dirty_, w) == 0) dirtyWords_.push_back(w);
  setBit(&dirty_, agent);
  // Repeats (a word cleared by removeAgent, then marked again) while no
  // round runs (offers held): at most twice the words, amortised O(1).
  if (dirtyWords_.size() > 2 * dirty_.size()) {
    std::sort(dirtyWords_.begin(), dirtyWords_.end());
    dirtyWords_.erase(std::unique(dirtyWords_.begin(), dirtyWords_.end()), dirtyWords_.end());
  }
}

size_t Allocator::nameIndex(const std::string& name) {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return i;
  }
  names_.push_back(name);
  totalMillis_.push_back(0);
  return names_.size() - 1;
}

void Allocator::addDense(std::vector<int64_t>* dense, const Resources& r, int sign) {
  for (const auto& s : r.scalars()) {
    size_t i = nameIndex(s.name);
    if (dense->size() <= i) dense->resize(names_.size(), 0);
    (*dense)[i] += sign * s.millis;
  }
}

// A full round scans every agent; an event-driven one only the words of
// the agents marked dirty since the last round, so its cost follows what
// changed, not the cluster's size. `out` keeps its size and is zero
// outside the previous round's candidate words, which are cleared first.
void Allocator::candidates(bool fullCycle, Bits* out) {
  Bits& avail = *out;
  for (size_t w : availWords_) avail[w] = 0;
  avail.resize((agents_.size() + kBitsPerWord - 1) / kBitsPerWord, 0);
  if (fullCycle) {
    dirtyWords_.resize(avail.size());
    for (size_t w = 0; w < avail.size(); ++w) dirtyWords_[w] = w;
  } else {  // a word cleared and marked again is listed twice
    std::sort(dirtyWords_.begin(), dirtyWords_.end());
    dirtyWords_.erase(std::unique(dirtyWords_.begin(), dirtyWords_.end()), dirtyWords_.end());
  }
  availWords_.clear();
  availCount_ = 0;
  for (size_t w : dirtyWords_) {
    if (w >= avail.size()) break;
    uint64_t bits = fullCycle ? ~uint64_t{0} : dirty_[w];
    while (bits) {
      size_t i = w * kBitsPerWord + std::countr_zero(bits);
      bits &= bits - 1;
      if (i >= agents_.size()) break;
      const AgentSlot& a = agents_[i];
      if (a.live && a.active && a.offerable) avail[w] |= uint64_t{1} << (i % kBitsPerWord);
    }
    if (avail[w] == 0) continue;
    availWords_.push_back(w);
    availCount_ += static_cast<size_t>(std::popcount(avail[w]));
  }
  if (fullCycle) {
    std::fill(dirty_.begin(), dirty_.end(), 0);
  } else {
    for (size_t w : dirtyWords_) dirty_[w] = 0;
  }
  dirtyWords_.clear();
}

bool Allocator::minimumWaiting() const {
  for (const RoundBrief& b : briefs_) {
    if (b.active && b.wantsMinimum) return true;
  }
  return false;
}

// O(dirty words + frameworks): far less than queueing every framework.
bool Allocator::roundHasWork(bool fullCycle) const {
  if (fullCycle || fullPending_) return true;
  for (size_t w : dirtyWords_) {
    if (dirty_[w] != 0) return true;
  }
  return minimumWaiting();
}

std::optional<AgentHandle> Allocator::findAgent(const FrameworkSlot& fw, const Bits& avail,
                                                     Cursor* cursor) {
  // Event-driven rounds often have a handful of dirty agents: scan only the
  // words holding candidates.
  for (; cursor->next < availWords_.size(); ++cursor->next, cursor->rejected = 0) {
    size_t w = availWords_[cursor->next];
    uint64_t bits = avail[w] & ~wordAt(fw.refusedBits, w) & ~cursor->rejected;
    bits &= ~(wordAt(reservedBits_, w) & ~wordAt(fw.reservedBits, w));  // held for others
    if (fw.agentListSet) bits &= wordAt(fw.allowedBits, w);
    while (bits) {
      unsigned bit = std::countr_zero(bits);
      uint64_t mask = uint64_t{1} << bit;
      bits &= ~mask;
      AgentHandle agent = static_cast<AgentHandle>(w * kBitsPerWord + bit);
      if (!fw.minFree.empty() && !agents_[agent].free.contains(fw.minFree)) {
        cursor->rejected |= mask;
        continue;
      }
      return agent;
    }
  }
  return std::nullopt;
}

FrameworkOrdering::Entry Allocator::entryFor(FrameworkHandle framework) {
  RoundBrief& brief = briefs_[framework];
  if (brief.entryEpoch == sharesEpoch_) return brief.entry;
  const FrameworkSlot& fw = frameworks_[framework];
  bool below = false;
  for (const auto& [i, millis] : fw.guaranteedMillis) {
    if (i >= fw.allocatedMillis.size() || fw.allocatedMillis[i] < millis) below = true;
  }
  brief.entry = FrameworkOrdering::Entry{framework, orderingShare(framework), fw.params.weight,
                                         fw.params.priority, below};
  brief.entryEpoch = sharesEpoch_;
  return brief.entry;
}

FrameworkOrdering::Entry Allocator::roleEntry(uint32_t role) const {
  const RoleSlot& r = roles_[role];
  // A role holding a framework below its guarantee goes first, like one
  // below its quota: guarantees are floors across roles too.
  return FrameworkOrdering::Entry{role, shareOf(r.allocatedMillis, &r.refusedMillis) / r.config.weight,
                                  r.config.weight, 0, belowQuota(r) || r.belowGuarantee > 0};
}

bool Allocator::queueRoles() {
  for (RoleSlot& r : roles_) {
    r.entries.clear();
    r.belowGuarantee = 0;
  }
  minimumWaiting_ = false;
  for (FrameworkHandle f = 0; f < briefs_.size(); ++f) {
    const RoundBrief& brief = briefs_[f];
    if (!brief.active) continue;
    minimumWaiting_ = minimumWaiting_ || brief.wantsMinimum;
    RoleSlot& role = roles_[brief.role];
    role.entries.push_back(entryFor(f));
    role.belowGuarantee += role.entries.back().belowGuarantee;
  }
  roleQueue_->reset({});
  bool any = false;
  for (uint32_t r = 0; r < roles_.size(); ++r) {
    RoleSlot& role = roles_[r];
    if (!role.live || role.entries.empty() || capped(role)) continue;
    role.ordering->reset(role.entries);
    roleQueue_->push(roleEntry(r));
    any = true;
  }
  return any;
}

void Allocator::allocate(TimePoint now, bool fullCycle, std::vector<Grant>* grants) {
  expireRefusals(now);
  expireReservations(now);
  unplacedScratch_.clear();
  if (!roundHasWork(fullCycle)) return;
  if (!queueRoles()) return;  // keep the dirty marks for when someone asks
  Bits& avail = availScratch_;
  candidates(fullCycle || fullPending_, &avail);
  fullPending_ = false;
  // Once every candidate is granted, the frameworks still queued can only
  // come up empty: that matters only to one waiting for a minimum.
  bool waiting = minimumWaiting_;  // minimumWaiting(), found by queueRoles()
  std::vector<Cursor>& cursors = cursorsScratch_;
  cursors.assign(frameworks_.size(), Cursor{});
  while (availCount_ > 0 || waiting) {
    auto roleTurn = roleQueue_->pop();
    if (!roleTurn) break;
    uint32_t r = roleTurn->framework;
    RoleSlot& role = roles_[r];
    auto entry = role.ordering->pop();
    if (!entry) continue;  // nothing left this role takes
    FrameworkHandle f = entry->framework;
    FrameworkSlot& fw = frameworks_[f];
    auto agent = findAgent(fw, avail, &cursors[f]);
    if (!agent) {  // the framework is done for this round; its role is not
      if (!fw.minFree.empty()) unplacedScratch_.push_back(f);
      role.belowGuarantee -= entry->belowGuarantee;
      roleQueue_->push(roleEntry(r));
      continue;
    }
    AgentSlot& a = agents_[*agent];
    if (a.reservedFor == f) release(*agent);  // what it was held for
    Resources granted;
    if (role.quotaMillis.empty()) {
      granted = std::move(a.free);  // the whole agent: no copy
      a.free = Resources();
    } else {
      granted = chopToQuota(role, a.free);
      if (!offerable(granted)) continue;  // the role reached its quota cap
      a.free -= granted;
    }
    freeChanged(a);
    if (!a.offerable) {
      clearBit(&avail, *agent);
      --availCount_;
    }
    charge(fw, granted, 1);
    grants->push_back(Grant{f, *agent, std::move(granted)});
    FrameworkOrdering::Entry next = entryFor(f);
    role.belowGuarantee -= entry->belowGuarantee && !next.belowGuarantee;
    role.ordering->push(next);
    if (!capped(role)) roleQueue_->push(roleEntry(r));
  }
  if (!unplacedScratch_.empty()) reserveForStarved(now);
}

double Allocator::shareOf(const Dense& allocated, const Dense* refused) const {
  double share = 0;
  for (size_t i = 0; i < allocated.size() || (refused && i < refused->size()); ++i) {
    int64_t total = i < totalMillis_.size() ? totalMillis_[i] : 0;
    if (total <= 0) continue;
    int64_t held = i < allocated.size() ? allocated[i] : 0;
    if (refused && i < refused->size()) held += (*refused)[i];
    share = std::max(share, static_cast<double>(held) / total);
  }
  return share;
}

double Allocator::dominantShare(FrameworkHandle framework) const {
  const FrameworkSlot& fw = frameworks_[framework];
  double weight = fw.params.weight > 0 ? fw.params.weight : 1.0;
  return shareOf(fw.allocatedMillis, nullptr) / weight;
}

double Allocator::orderingShare(FrameworkHandle framework) const {
  const FrameworkSlot& fw = frameworks_[framework];
  double weight = fw.params.weight > 0 ? fw.params.weight : 1.0;
  return shareOf(fw.allocatedMillis, &fw.refusedMillis) / weight;
}

Resources Allocator::allocation(FrameworkHandle framework) const {
  Resources r;
  const auto& dense = frameworks_[framework].allocatedMillis;
  for (size_t i = 0; i < dense.size(); ++i) {
    if (dense[i] > 0) r.setScalarMillis(names_[i], dense[i]);
  }
  return r;
}

const FrameworkParams& Allocator::params(FrameworkHandle framework) const {
  return frameworks_[framework].params;
}

Resources Allocator::freeResources(AgentHandle agent) const { return agents_[agent].free; }

// ---------------------------------------------------------------- roles

uint32_t Allocator::roleFor(const std::string& name) {
  if (auto it = roleIndex_.find(name); it != roleIndex_.end()) return it->second;
  uint32_t handle;
  if (!freeRoleHandles_.empty()) {
    handle = freeRoleHandles_.back();
    freeRoleHandles_.pop_back();
  } else {
    // Roles are at most the live frameworks plus the configured ones.
    CHECK(roles_.size() < kMaxFrameworks + kConfiguredRolesMax + 1);
    handle = static_cast<uint32_t>(roles_.size());
    roles_.emplace_back();
  }
  RoleSlot& role = roles_[handle];
  role = RoleSlot{};
  role.live = true;
  role.name = name;
  role.ordering = makeOrdering_();
  roleIndex_.emplace(name, handle);
  return handle;
}

void Allocator::releaseRole(uint32_t handle) {
  RoleSlot& role = roles_[handle];
  if (role.configured || role.frameworks > 0) return;
  roleIndex_.erase(role.name);
  role = RoleSlot{};
  freeRoleHandles_.push_back(handle);
}

const Allocator::RoleSlot* Allocator::findRole(std::string_view name) const {
  auto it = roleIndex_.find(std::string(name));
  return it == roleIndex_.end() ? nullptr : &roles_[it->second];
}

void Allocator::shareChanged(const FrameworkSlot& fw) {
  briefs_[static_cast<size_t>(&fw - frameworks_.data())].entryEpoch = 0;
}

void Allocator::charge(FrameworkSlot& fw, const Resources& r, int sign) {
  shareChanged(fw);
  addDense(&fw.allocatedMillis, r, sign);
  addDense(&roles_[fw.role].allocatedMillis, r, sign);
}

void Allocator::chargeRefused(FrameworkSlot& fw, const Resources& r, int sign) {
  shareChanged(fw);
  addDense(&fw.refusedMillis, r, sign);
  addDense(&roles_[fw.role].refusedMillis, r, sign);
}

Allocator::SparseMillis Allocator::sparse(const Resources& r) {
  SparseMillis out;
  for (const auto& s : r.scalars()) out.emplace_back(nameIndex(s.name), s.millis);
  return out;
}

bool Allocator::belowQuota(const RoleSlot& role) const {
  for (const auto& [i, millis] : role.quotaMillis) {
    if (i >= role.allocatedMillis.size() || role.allocatedMillis[i] < millis) return true;
  }
  return false;
}

bool Allocator::capped(const RoleSlot& role) const {
  for (const auto& [i, millis] : role.quotaMillis) {
    if (i < role.allocatedMillis.size() && role.allocatedMillis[i] >= millis) return true;
    if (millis <= 0) return true;
  }
  return false;
}

// A role with quota receives at most its headroom of each quota scalar.
Resources Allocator::chopToQuota(const RoleSlot& role, const Resources& free) const {
  if (role.quotaMillis.empty()) return free;
  Resources granted = free;
  for (const auto& [i, millis] : role.quotaMillis) {
    int64_t used = i < role.allocatedMillis.size() ? role.allocatedMillis[i] : 0;
    int64_t headroom = std::max<int64_t>(0, millis - used);
    // Capped roles are not served, so headroom > 0 here.
    if (granted.scalarMillis(names_[i]) > headroom) granted.setScalarMillis(names_[i], headroom);
  }
  return granted;
}

void Allocator::fairShares(std::vector<double>* byHandle) const {
  byHandle->assign(frameworks_.size(), 0.0);
  std::vector<double> roleWeights(roles_.size(), 0.0);  // sum of present framework weights
  auto present = [&](const FrameworkSlot& fw) {
    if (!fw.live) return false;
    if (fw.active) return true;
    for (int64_t m : fw.allocatedMillis) {
      if (m > 0) return true;
    }
    return false;
  };
  auto weightOf = [](const FrameworkSlot& fw) { return fw.params.weight > 0 ? fw.params.weight : 1.0; };
  for (const FrameworkSlot& fw : frameworks_) {
    if (present(fw)) roleWeights[fw.role] += weightOf(fw);
  }
  double roleSum = 0;
  for (size_t r = 0; r < roles_.size(); ++r) {
    if (roleWeights[r] > 0) roleSum += roles_[r].config.weight;
  }
  for (FrameworkHandle f = 0; f < frameworks_.size(); ++f) {
    const FrameworkSlot& fw = frameworks_[f];
    if (!present(fw)) continue;
    double roleFair = roles_[fw.role].config.weight / roleSum;
    (*byHandle)[f] = roleFair * weightOf(fw) / roleWeights[fw.role];
  }
}

Resources Allocator::roleAllocation(std::string_view name) const {
  Resources r;
  const RoleSlot* role = findRole(name);
  if (!role) return r;
  for (size_t i = 0; i < role->allocatedMillis.size(); ++i) {
    if (role->allocatedMillis[i] > 0) r.setScalarMillis(names_[i], role->allocatedMillis[i]);
  }
  return r;
}

RoleConfig Allocator::roleConfig(std::string_view name) const {
  const RoleSlot* role = findRole(name);
  return role ? role->config : RoleConfig{};
}

}  // namespace allot
