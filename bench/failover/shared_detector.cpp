#include "bench/failover/shared_detector.h"

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

SharedDetector::SharedDetector(asio::io_context& io, std::unique_ptr<LeaderDetector> inner)
    : io_(io), inner_(std::move(inner)) {}

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
  // A callback may destroy views (links): iterate over a snapshot of ids.
  std::vector<uint64_t> ids;
  ids.reserve(subscribers_.size());
  for (const auto& [id, callback] : subscribers_) ids.push_back(id);
  for (uint64_t id : ids) {
    auto it = subscribers_.find(id);
    if (it != subscribers_.end()) it->second(leader);
  }
}

}  // namespace allot
