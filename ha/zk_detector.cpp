#include "ha/zk_detector.h"

#include "base/log.h"
#include "ha/group.h"

namespace allot {

ZooKeeperDetector::ZooKeeperDetector(asio::io_context& io, ZkSessionFactory sessions,
                                     std::string groupPath, std::string description)
    : io_(io),
      sessions_(std::move(sessions)),
      groupPath_(std::move(groupPath)),
      description_(std::move(description)) {}

ZooKeeperDetector::~ZooKeeperDetector() {
  stopped_ = true;
  session_.reset();
}

template <typename Fn>
auto ZooKeeperDetector::guard(Fn fn) {
  return [this, generation = generation_, fn = std::move(fn)](auto&&... args) {
    if (generation != generation_ || stopped_) return;
    fn(std::forward<decltype(args)>(args)...);
  };
}

void ZooKeeperDetector::start(Callback onLeader) {
  onLeader_ = std::move(onLeader);
  newSession();
}

void ZooKeeperDetector::newSession() {
  ++generation_;
  currentMember_.clear();
  session_ = sessions_();
  session_->start(guard([this](const ZkEvent& event) { onEvent(event); }));
}

void ZooKeeperDetector::onEvent(const ZkEvent& event) {
  if (event.kind != ZkEvent::Kind::kSession) {
    // A children watch on the group, or an exists watch while it is missing.
    if (event.path == groupPath_) list();
    return;
  }
  switch (event.state) {
    case ZkState::kConnected:
      LOG_INFO("detector: connected to ZooKeeper " << session_->describe());
      return list();
    case ZkState::kConnecting:
      LOG_WARNING("detector: lost the link to ZooKeeper; keeping leader "
                  << (current_ ? current_->endpoint.describe() : std::string("(none)"))
                  << " until it is back");
      return;
    case ZkState::kExpired:
      LOG_WARNING("detector: ZooKeeper session expired; starting a new one");
      report(std::nullopt);
      asio::post(io_, guard([this] { newSession(); }));
      return;
  }
}

void ZooKeeperDetector::list() {
  uint64_t listing = ++listing_;
  session_->children(groupPath_, true, guard([this, listing](ZkRc rc,
                                                           const std::vector<std::string>& children) {
    if (listing != listing_) return;  // a newer listing is under way
    if (rc == ZkRc::kConnectionLoss) return;  // listed again on kConnected
    if (rc == ZkRc::kNoNode) {
      LOG_INFO("detector: no group at " << groupPath_ << " yet; waiting for a master");
      currentMember_.clear();
      report(std::nullopt);
      session_->exists(groupPath_, true, [](ZkRc, const ZkStat&) {});
      return;
    }
    if (rc != ZkRc::kOk) {
      LOG_WARNING("detector: cannot list " << groupPath_ << ": " << zkRcName(rc));
      return;
    }
    auto members = parseMembers(children);
    if (members.empty()) {
      currentMember_.clear();
      return report(std::nullopt);
    }
    if (members.front().name == currentMember_) return;
    read(members.front().name, listing);
  }));
}

void ZooKeeperDetector::read(const std::string& member, uint64_t listing) {
  session_->get(groupPath_ + "/" + member,
                guard([this, member, listing](ZkRc rc, const std::string& data, const ZkStat& stat) {
    if (listing != listing_) return;
    if (rc == ZkRc::kNoNode) return list();  // gone already: list again
    if (rc != ZkRc::kOk) return;             // connection loss: listed again on kConnected
    auto decoded = decodeMemberData(data);
    if (!decoded) {
      LOG_WARNING("detector: ignoring member " << member << ": " << decoded.error().describe());
      return;
    }
    uint64_t epoch = epochOf(stat.czxid);
    if (epoch < highestEpoch_) {
      LOG_WARNING("detector: ignoring member " << member << " with epoch " << epoch
                                               << " below " << highestEpoch_);
      return;
    }
    currentMember_ = member;
    report(Leader{decoded->address, epoch, decoded->masterId});
  }));
}

void ZooKeeperDetector::report(const std::optional<Leader>& leader) {
  if (reported_ && leader == current_) return;
  reported_ = true;
  current_ = leader;
  if (leader) {
    highestEpoch_ = std::max(highestEpoch_, leader->epoch);
    LOG_INFO("detector: leader is " << leader->endpoint.describe() << " (master " << leader->id
                                    << ", epoch " << leader->epoch << ")");
  } else {
    LOG_INFO("detector: no leading master known");
  }
  if (onLeader_) onLeader_(leader);
}

std::unique_ptr<LeaderDetector> makeZooKeeperDetector(asio::io_context& io, const ZkUrl& url,
                                                      const std::string& description) {
  auto factory = zooKeeperSessionFactory(io, url.servers, kDetectorSessionTimeout);
  CHECK(factory);  // only a bad timeout fails, and ours is a constant
  return std::make_unique<ZooKeeperDetector>(io, std::move(*factory), url.path, description);
}

}  // namespace allot
