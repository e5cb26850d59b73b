#include "master/allocator/offer_allocator.h"

#include <algorithm>
#include <bit>

#include "base/check.h"

namespace allot {
namespace {

constexpr size_t kBitsPerWord = 64;

void setBit(std::vector<uint64_t>* bits, size_t i) {
  size_t w = i / kBitsPerWord;
  if (bits->size() <= w) bits->resize(w + 1, 0);
  (*bits)[w] |= uint64_t{1} << (i % kBitsPerWord);
}

void clearBit(std::vector<uint64_t>* bits, size_t i) {
  size_t w = i / kBitsPerWord;
  if (w < bits->size()) (*bits)[w] &= ~(uint64_t{1} << (i % kBitsPerWord));
}

uint64_t wordAt(const std::vector<uint64_t>& bits, size_t w) {
  return w < bits.size() ? bits[w] : 0;
}

}  // namespace

OfferAllocator::OfferAllocator(AllocatorOptions options,
                               std::unique_ptr<FrameworkOrdering> ordering)
    : options_(std::move(options)), ordering_(std::move(ordering)) {}

AgentHandle OfferAllocator::addAgent(const Resources& total) {
  AgentHandle handle;
  if (!freeAgentHandles_.empty()) {
    handle = freeAgentHandles_.back();
    freeAgentHandles_.pop_back();
  } else {
    CHECK(agents_.size() < kMaxAgents);
    handle = static_cast<AgentHandle>(agents_.size());
    agents_.emplace_back();
  }
  AgentSlot& slot = agents_[handle];
  slot = AgentSlot{};
  slot.live = true;
  slot.total = total;
  slot.free = total;
  total_ += total;
  addDense(&totalMillis_, total, 1);
  freeChanged(slot);
  markDirty(handle);
  return handle;
}

void OfferAllocator::removeAgent(AgentHandle handle) {
  CHECK(handle < agents_.size() && agents_[handle].live);
  AgentSlot& slot = agents_[handle];
  for (FrameworkHandle fw : slot.refusedBy) {
    if (frameworks_[fw].live) dropRefusal(fw, handle);
  }
  for (FrameworkSlot& fw : frameworks_) clearBit(&fw.allowedBits, handle);
  total_ -= slot.total;
  addDense(&totalMillis_, slot.total, -1);
  clearBit(&dirty_, handle);
  slot = AgentSlot{};
  freeAgentHandles_.push_back(handle);
}

void OfferAllocator::setAgentActive(AgentHandle handle, bool active) {
  CHECK(handle < agents_.size() && agents_[handle].live);
  agents_[handle].active = active;
  if (active) markDirty(handle);
}

FrameworkHandle OfferAllocator::addFramework(const FrameworkParams& params) {
  FrameworkHandle handle;
  if (!freeFrameworkHandles_.empty()) {
    handle = freeFrameworkHandles_.back();
    freeFrameworkHandles_.pop_back();
  } else {
    CHECK(frameworks_.size() < kMaxFrameworks);
    handle = static_cast<FrameworkHandle>(frameworks_.size());
    frameworks_.emplace_back();
  }
  FrameworkSlot& slot = frameworks_[handle];
  slot = FrameworkSlot{};
  slot.live = true;
  slot.params = params;
  return handle;
}

void OfferAllocator::removeFramework(FrameworkHandle handle) {
  CHECK(handle < frameworks_.size() && frameworks_[handle].live);
  FrameworkSlot& slot = frameworks_[handle];
  refusalCount_ -= slot.refusals.size();
  slot = FrameworkSlot{};
  freeFrameworkHandles_.push_back(handle);
}

void OfferAllocator::updateFramework(FrameworkHandle handle, const FrameworkParams& params) {
  CHECK(frameworks_[handle].live);
  frameworks_[handle].params = params;
}

void OfferAllocator::setActive(FrameworkHandle handle, bool active) {
  CHECK(frameworks_[handle].live);
  // A framework that starts wanting offers must see every agent, not just
  // the ones that changed since the last round.
  if (active && !frameworks_[handle].active) fullPending_ = true;
  frameworks_[handle].active = active;
}

void OfferAllocator::setStandingFilters(FrameworkHandle handle,
                                        const std::vector<AgentHandle>& agentList,
                                        const Resources& minFree) {
  FrameworkSlot& slot = frameworks_[handle];
  CHECK(slot.live);
  slot.agentListSet = !agentList.empty();
  slot.allowedBits.clear();
  for (AgentHandle a : agentList) setBit(&slot.allowedBits, a);
  slot.minFree = minFree;
  fullPending_ = true;
}

void OfferAllocator::allocateUsed(FrameworkHandle framework, AgentHandle agent,
                                  const Resources& resources) {
  CHECK(frameworks_[framework].live && agents_[agent].live);
  AgentSlot& a = agents_[agent];
  FrameworkSlot& fw = frameworks_[framework];
  a.free -= resources;
  freeChanged(a);
  addDense(&fw.allocatedMillis, resources, 1);
}

void OfferAllocator::recover(FrameworkHandle framework, AgentHandle agent,
                             const Resources& resources, std::optional<Duration> refuse,
                             TimePoint now) {
  CHECK(frameworks_[framework].live && agents_[agent].live);
  AgentSlot& a = agents_[agent];
  FrameworkSlot& fw = frameworks_[framework];
  addDense(&fw.allocatedMillis, resources, -1);
  a.free += resources;
  freeChanged(a);
  markDirty(agent);

  if (refuse && *refuse > Duration::zero()) {
    auto [it, inserted] = fw.refusals.try_emplace(agent);
    if (inserted) {
      ++refusalCount_;
      a.refusedBy.push_back(framework);
    }
    it->second = Refusal{a.free, now + *refuse};
    setBit(&fw.refusedBits, agent);
    expiries_.push(Expiry{now + *refuse, framework, agent});
  }
  dropRefusalsOutgrownBy(agent);
}

void OfferAllocator::dropRefusal(FrameworkHandle framework, AgentHandle agent) {
  FrameworkSlot& fw = frameworks_[framework];
  if (fw.refusals.erase(agent) == 0) return;
  --refusalCount_;
  clearBit(&fw.refusedBits, agent);
}

// A refusal covers the resources refused; once the agent has more free
// (a task ended there), the framework gets to see the larger offer.
void OfferAllocator::dropRefusalsOutgrownBy(AgentHandle agent) {
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
    if (!it->second.refused.contains(a.free)) {
      dropRefusal(list[i], agent);
      list[i] = list.back();
      list.pop_back();
      continue;
    }
    ++i;
  }
}

void OfferAllocator::expireRefusals(TimePoint now) {
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

bool OfferAllocator::offerable(const Resources& free) const {
  if (free.empty()) return false;
  if (options_.minOffer.empty()) return true;
  for (const auto& s : options_.minOffer.scalars()) {
    if (free.scalarMillis(s.name) >= s.millis) return true;
  }
  return false;
}

void OfferAllocator::freeChanged(AgentSlot& agent) { agent.offerable = offerable(agent.free); }

void OfferAllocator::markDirty(AgentHandle agent) { setBit(&dirty_, agent); }

size_t OfferAllocator::nameIndex(const std::string& name) {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return i;
  }
  names_.push_back(name);
  totalMillis_.push_back(0);
  return names_.size() - 1;
}

void OfferAllocator::addDense(std::vector<int64_t>* dense, const Resources& r, int sign) {
  for (const auto& s : r.scalars()) {
    size_t i = nameIndex(s.name);
    if (dense->size() <= i) dense->resize(names_.size(), 0);
    (*dense)[i] += sign * s.millis;
  }
}

void OfferAllocator::candidates(bool fullCycle, Bits* out) {
  Bits& avail = *out;
  avail.assign((agents_.size() + kBitsPerWord - 1) / kBitsPerWord, 0);
  for (size_t w = 0; w < avail.size(); ++w) {
    uint64_t bits = fullCycle ? ~uint64_t{0} : wordAt(dirty_, w);
    while (bits) {
      size_t i = w * kBitsPerWord + std::countr_zero(bits);
      bits &= bits - 1;
      if (i >= agents_.size()) break;
      const AgentSlot& a = agents_[i];
      if (a.live && a.active && a.offerable) avail[w] |= uint64_t{1} << (i % kBitsPerWord);
    }
  }
  std::fill(dirty_.begin(), dirty_.end(), 0);
  availBegin_ = 0;
  while (availBegin_ < avail.size() && avail[availBegin_] == 0) ++availBegin_;
  availEnd_ = avail.size();
  while (availEnd_ > availBegin_ && avail[availEnd_ - 1] == 0) --availEnd_;
}

std::optional<AgentHandle> OfferAllocator::findAgent(const FrameworkSlot& fw, const Bits& avail,
                                                     Cursor* cursor) {
  // Event-driven rounds often have a handful of dirty agents: scan only the
  // words between the first and last candidate.
  if (cursor->word < availBegin_) cursor->word = availBegin_;
  for (; cursor->word < availEnd_; ++cursor->word, cursor->rejected = 0) {
    size_t w = cursor->word;
    uint64_t bits = avail[w] & ~wordAt(fw.refusedBits, w) & ~cursor->rejected;
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

FrameworkOrdering::Entry OfferAllocator::entryFor(FrameworkHandle framework) const {
  const FrameworkSlot& fw = frameworks_[framework];
  return FrameworkOrdering::Entry{framework, dominantShare(framework), fw.params.weight,
                                  fw.params.priority};
}

void OfferAllocator::allocate(TimePoint now, bool fullCycle, std::vector<Grant>* grants) {
  expireRefusals(now);
  std::vector<FrameworkOrdering::Entry>& entries = entriesScratch_;
  entries.clear();
  for (FrameworkHandle f = 0; f < frameworks_.size(); ++f) {
    if (frameworks_[f].live && frameworks_[f].active) entries.push_back(entryFor(f));
  }
  if (entries.empty()) return;  // keep the dirty marks for when someone asks
  Bits& avail = availScratch_;
  candidates(fullCycle || fullPending_, &avail);
  fullPending_ = false;
  ordering_->reset(entries);
  std::vector<Cursor>& cursors = cursorsScratch_;
  cursors.assign(frameworks_.size(), Cursor{});
  while (auto entry = ordering_->pop()) {
    FrameworkHandle f = entry->framework;
    FrameworkSlot& fw = frameworks_[f];
    auto agent = findAgent(fw, avail, &cursors[f]);
    if (!agent) continue;  // nothing left this framework takes
    AgentSlot& a = agents_[*agent];
    clearBit(&avail, *agent);
    Grant grant{f, *agent, std::move(a.free)};
    a.free = Resources();
    a.offerable = false;
    addDense(&fw.allocatedMillis, grant.resources, 1);
    grants->push_back(std::move(grant));
    ordering_->push(entryFor(f));
  }
}

double OfferAllocator::dominantShare(FrameworkHandle framework) const {
  const FrameworkSlot& fw = frameworks_[framework];
  double share = 0;
  for (size_t i = 0; i < fw.allocatedMillis.size(); ++i) {
    int64_t total = totalMillis_[i];
    if (total > 0) share = std::max(share, static_cast<double>(fw.allocatedMillis[i]) / total);
  }
  double weight = fw.params.weight > 0 ? fw.params.weight : 1.0;
  return share / weight;
}

Resources OfferAllocator::allocation(FrameworkHandle framework) const {
  Resources r;
  const auto& dense = frameworks_[framework].allocatedMillis;
  for (size_t i = 0; i < dense.size(); ++i) {
    if (dense[i] > 0) r.setScalarMillis(names_[i], dense[i]);
  }
  return r;
}

Resources OfferAllocator::freeResources(AgentHandle agent) const { return agents_[agent].free; }

}  // namespace allot
