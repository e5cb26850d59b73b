#include <algorithm>
#include <random>

#include "base/check.h"
#include "master/allocator/ordering.h"

namespace allot {
namespace {

// The least item on (key, sequence) first: the sequence makes equal keys
// FIFO, so frameworks with equal shares take turns instead of the lowest
// handle winning every tie. (key, sequence) orders all items strictly, so
// how the next one is found does not change which it is.
//
// An event round ranks every active framework but usually pops a few (its
// candidates are the agents that changed): its first pops scan the items,
// and only a round that pops more builds a heap.
template <typename Less>
class HeapOrdering final : public FrameworkOrdering {
 public:
  void reset(const std::vector<Entry>& entries) override {
    items_.clear();  // keeps its capacity: rounds run often
    for (const Entry& e : entries) items_.push_back(Item{e, sequence_++});
    heap_ = false;
    scans_ = 0;
  }

  std::optional<Entry> pop() override {
    if (items_.empty()) return std::nullopt;
    if (!heap_ && scans_ < kScansMax) {
      ++scans_;
      size_t next = 0;
      for (size_t i = 1; i < items_.size(); ++i) {
        if (After()(items_[next], items_[i])) next = i;
      }
      Entry e = items_[next].entry;
      items_[next] = items_.back();
      items_.pop_back();
      return e;
    }
    if (!heap_) {
      std::make_heap(items_.begin(), items_.end(), After());
      heap_ = true;
    }
    std::pop_heap(items_.begin(), items_.end(), After());
    Entry e = items_.back().entry;
    items_.pop_back();
    return e;
  }

  void push(const Entry& entry) override {
    items_.push_back(Item{entry, sequence_++});
    if (heap_) std::push_heap(items_.begin(), items_.end(), After());
  }

 private:
  // Scans a round makes before it builds a heap (about two scans' worth).
  static constexpr int kScansMax = 2;

  struct Item {
    Entry entry;
    uint64_t sequence;
  };
  // Heap order: the "largest" item is the one served next; After(a, b):
  // a is served after b.
  struct After {
    bool operator()(const Item& a, const Item& b) const {
      Less less;
      if (less(a.entry, b.entry)) return false;
      if (less(b.entry, a.entry)) return true;
      return a.sequence > b.sequence;
    }
  };

  std::vector<Item> items_;  // a heap once heap_
  bool heap_ = false;
  int scans_ = 0;
  uint64_t sequence_ = 0;
};

struct ShareLess {
  bool operator()(const FrameworkOrdering::Entry& a, const FrameworkOrdering::Entry& b) const {
    if (a.belowGuarantee != b.belowGuarantee) return a.belowGuarantee;
    return a.share < b.share;
  }
};

struct PriorityLess {
  bool operator()(const FrameworkOrdering::Entry& a, const FrameworkOrdering::Entry& b) const {
    if (a.belowGuarantee != b.belowGuarantee) return a.belowGuarantee;
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.share < b.share;
  }
};

// Draws among the frameworks still in the round, each with probability
// weight / sum(weights). Linear draw: rounds hold at most a few thousand
// frameworks.
class LotteryOrdering final : public FrameworkOrdering {
 public:
  explicit LotteryOrdering(uint64_t seed) : random_(seed) {}

  void reset(const std::vector<Entry>& entries) override { entries_ = entries; }

  std::optional<Entry> pop() override {
    if (entries_.empty()) return std::nullopt;
    double sum = 0;
    for (const Entry& e : entries_) sum += e.weight;
    double ticket = std::uniform_real_distribution<double>(0, sum)(random_);
    size_t chosen = entries_.size() - 1;
    for (size_t i = 0; i < entries_.size(); ++i) {
      ticket -= entries_[i].weight;
      if (ticket < 0) {
        chosen = i;
        break;
      }
    }
    Entry e = entries_[chosen];
    entries_[chosen] = entries_.back();
    entries_.pop_back();
    return e;
  }

  void push(const Entry& entry) override {
    CHECK(entry.weight > 0);
    entries_.push_back(entry);
  }

 private:
  std::mt19937_64 random_;
  std::vector<Entry> entries_;
};

}  // namespace

std::unique_ptr<FrameworkOrdering> makeDrfOrdering() {
  return std::make_unique<HeapOrdering<ShareLess>>();
}

std::unique_ptr<FrameworkOrdering> makePriorityOrdering() {
  return std::make_unique<HeapOrdering<PriorityLess>>();
}

std::unique_ptr<FrameworkOrdering> makeLotteryOrdering(uint64_t seed) {
  return std::make_unique<LotteryOrdering>(seed);
}

}  // namespace allot
