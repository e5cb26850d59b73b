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

 private:
  SharedDetector& owner_;
  std::string text_;
  uint64_t id_ = 0;
};

SharedDetector::SharedDetector(asio::io_context& io, std::unique_ptr<LeaderDetector> inner,
                               size_t chunk, size_t equalPasses)
    : io_(io), inner_(std::move(inner)), chunk_(chunk), equalPasses_(equalPasses) {}

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
  // Told one chunk per pass of the loop: each chunk is posted when the one
  // before has run, so the loop polls (timers and I/O: the first told
  // links' connects and handshakes) between chunks, as on separate hosts.
  // Posting every chunk at once queued them all ahead of the loop's next
  // poll, so no link's timer could fire before the last view had heard.
  // The first equalPasses_ chunks are chunk_ views each, so the passes that
  // take the first told links from their timer to a registration (timer,
  // connect, Hello, answer) stay short; then each chunk is twice the one
  // before, so the last views hear within a few more passes (equal chunks
  // throughout took 60-75 passes, 0.4-2 s at 10,000-19,000 links in the
  // reconnect storm, longer than the links' own 1 s spread). Views are told in the order they started (the
  // worker's own watch, which stamps its "detected" event, first); the
  // reports queue, so every view hears them in order. A callback may
  // destroy views (links): each chunk looks its ids up.
  Delivery d;
  d.leader = leader;
  d.ids.reserve(subscribers_.size());
  for (const auto& [id, callback] : subscribers_) d.ids.push_back(id);
  std::sort(d.ids.begin(), d.ids.end());
  deliveries_.push_back(std::move(d));
  if (deliveries_.size() == 1) postChunk();
}

void SharedDetector::postChunk() {
  std::weak_ptr<bool> alive = alive_;
  asio::post(io_, [this, alive] {
    if (alive.expired() || deliveries_.empty()) return;
    Delivery& d = deliveries_.front();
    if (d.chunk == 0) d.chunk = chunk_ > 0 ? chunk_ : d.ids.size();
    size_t to = std::min(d.ids.size(), d.next + d.chunk);
    if (++d.passes >= equalPasses_) d.chunk *= 2;
    for (; d.next < to; ++d.next) {
      auto it = subscribers_.find(d.ids[d.next]);
      if (it != subscribers_.end()) it->second(d.leader);
    }
    if (d.next >= d.ids.size()) {
      std::optional<Leader> told = d.leader;
      deliveries_.pop_front();
      if (toldAll_) toldAll_(told);
    }
    if (!deliveries_.empty()) postChunk();
  });
}

}  // namespace allot
