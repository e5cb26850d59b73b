#include <algorithm>
#include <random>

#include "base/check.h"
#include "master/allocator/ordering.h"

namespace allot {
namespace {

// A min-heap on (key, sequence): the sequence makes equal keys FIFO, so
// frameworks with equal shares take turns instead of the lowest handle
// winning every tie.
template <typename Less>
class HeapOrdering final : public FrameworkOrdering {
 public:
  // The same heap as pushing each entry in turn (sequences in entry order;
  // (key, sequence) orders all items, so the pops are the same), built in
  // linear time: rounds run often and rank every active framework.
  void reset(const std::vector<Entry>& entries) override {
    heap_.clear();  // keeps its capacity
    for (const Entry& e : entries) heap_.push_back(Item{e, sequence_++});
    std::make_heap(heap_.begin(), heap_.end(), After());
  }

  std::optional<Entry> pop() override {
    if (heap_.empty()) return std::nullopt;
    std::pop_heap(heap_.begin(), heap_.end(), After());
    Entry e = heap_.back().entry;
    heap_.pop_back();
    return e;
  }

  void push(const Entry& entry) override {
    heap_.push_back(Item{entry, sequence_++});
    std::push_heap(heap_.begin(), heap_.end(), After());
  }

 private:
  struct Item {
    Entry entry;
    uint64_t sequence;
  };
  // Heap order: the "largest" item is the one served next.
  struct After {
    bool operator()(const Item& a, const Item& b) const {
      Less less;
      if (less(a.entry, b.entry)) return false;
      if (less(b.entry, a.entry)) return true;
      return a.sequence > b.sequence;
    }
  };

  std::vector<Item> heap_;
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
