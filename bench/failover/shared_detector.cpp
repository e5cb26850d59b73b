#include "bench/failover/shared_detector.h"

#include <algorithm>
#include <vector>

#include "base/log.h"

namespace allot {

class SharedDetector::View final : public LeaderDetector {
 public:
  View(SharedDetector& owner, std::string text) : owner_(owner), text_(std::move(text)) {}
  ~View() override {
    if (id_ != 0) owner_.subscribers_.erase(id_);
  }
  void start(Callback onLeader) override {
    CHECK(id_ == 0);
    id_ = owner_.nextId_++;
    owner_.subscribers_[id_] = onLeader;
    if (!owner_.known_) return;
    // The contract: the first report may come after start() returns.
    std::weak_ptr<bool> alive = owner_.alive_;
    uint64_t id = id_;
    SharedDetector* owner = &owner_;
    asio::post(owner_.io_, [alive, owner, id] {
      if (alive.expired()) return;
      auto it = owner->subscribers_.find(id);
      if (it != owner->subscribers_.end()) it->second(owner->current_);
    });
  }
  std::string describe() const override { return text_; }
  bool reportsSuccessors() const override { return owner_.inner_->reportsSuccessors(); }

 private:
  SharedDetector& owner_;
  std::string text_;
  uint64_t id_ = 0;
};

SharedDetector::SharedDetector(asio::io_context& io, std::unique_ptr<LeaderDetector> inner,
                               size_t chunk)
    : io_(io), inner_(std::move(inner)), chunk_(chunk) {}

SharedDetector::~SharedDetector() {
  CHECK(subscribers_.empty());
  alive_.reset();
}

void SharedDetector::start() {
  inner_->start([this](const std::optional<Leader>& leader) { onLeader(leader); });
}

std::unique_ptr<LeaderDetector> SharedDetector::view() {
  return std::make_unique<View>(*this, inner_->describe());
}

void SharedDetector::onLeader(const std::optional<Leader>& leader) {
  known_ = true;
  current_ = leader;
  // Delivered kChunk views per handler, each chunk posted: between chunks
  // the loop runs timers and I/O, so the first links' connects start
  // while the rest still hear the news, as on separate hosts (one handler
  // for all 2,500 views held every link's connect until the last view had
  // closed its old link). Chunks of successive reports run in order, so
  // every view hears the reports in order. A callback may destroy views
  // (links): each chunk looks its ids up.
  auto ids = std::make_shared<std::vector<uint64_t>>();
  ids->reserve(subscribers_.size());
  for (const auto& [id, callback] : subscribers_) ids->push_back(id);
  // In the order the views started (the worker's own watch, which stamps
  // its "detected" event, is the first).
  std::sort(ids->begin(), ids->end());
  std::weak_ptr<bool> alive = alive_;
  size_t chunk = chunk_ > 0 ? chunk_ : std::max<size_t>(ids->size(), 1);
  for (size_t from = 0; from < ids->size(); from += chunk) {
    asio::post(io_, [this, alive, ids, from, chunk, leader] {
      if (alive.expired()) return;
      size_t to = std::min(ids->size(), from + chunk);
      for (size_t i = from; i < to; ++i) {
        auto it = subscribers_.find((*ids)[i]);
        if (it != subscribers_.end()) it->second(leader);
      }
    });
  }
}

}  // namespace allot
