#include "ha/zk_detector.h"

#include "base/log.h"
#include "ha/group.h"

namespace allot {

ZooKeeperDetector::ZooKeeperDetector(asio::io_context& io, ZkSessionFactory sessions,
                                     std::string groupPath, std::string description)
    : io_(io),
      groupPath_(std::move(groupPath)),
      description_(std::move(description)),
      zk_(std::move(sessions)) {}

void ZooKeeperDetector::start(Callback onLeader) {
  onLeader_ = std::move(onLeader);
  newSession();
}

void ZooKeeperDetector::newSession() {
  currentMember_.clear();
  successor_.reset();
  readingAhead_.clear();  // its answer, if any, is dropped with the old session
  zk_.renew([this](const ZkEvent& event) { onEvent(event); });
}

void ZooKeeperDetector::onEvent(const ZkEvent& event) {
  if (event.kind != ZkEvent::Kind::kSession) {
    // A children watch on the group, or an exists watch while it is missing.
    if (event.path == groupPath_) list();
    return;
  }
  switch (event.state) {
    case ZkState::kConnected:
      LOG_INFO("detector: connected to ZooKeeper " << zk_.session().describe());
      return list();
    case ZkState::kConnecting:
      LOG_WARNING("detector: lost the link to ZooKeeper; keeping leader "
                  << (current_ ? current_->endpoint.describe() : std::string("(none)"))
                  << " until it is back");
      return;
    case ZkState::kExpired:
      LOG_WARNING("detector: ZooKeeper session expired; starting a new one");
      report(std::nullopt);
      asio::post(io_, zk_.guard([this] { newSession(); }));
      return;
    case ZkState::kAuthFailed:  // a reader sends no credentials: not expected
      LOG_ERROR("detector: ZooKeeper refused this client's authentication; no leader");
      report(std::nullopt);
      return;
  }
}

void ZooKeeperDetector::list() {
  uint64_t listing = ++listing_;
  auto& session = zk_.session();
  session.children(groupPath_, true, zk_.guard([this, listing](ZkRc rc,
                                                               const std::vector<std::string>& children) {
    if (listing != listing_) return;  // a newer listing is under way
    if (rc == ZkRc::kConnectionLoss) return;  // listed again on kConnected
    if (rc == ZkRc::kNoNode) {
      LOG_INFO("detector: no group at " << groupPath_ << " yet; waiting for a master");
      currentMember_.clear();
      successor_.reset();  // a group made again may reuse member names
      report(std::nullopt);
      // Made between the listing and this watch: no creation event will
      // come, so list again.
      zk_.session().exists(groupPath_, true, zk_.guard([this](ZkRc found, const ZkStat&) {
        if (found == ZkRc::kOk) list();
      }));
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
    const std::string& lowest = members.front().name;
    std::string next = members.size() > 1 ? members[1].name : std::string();
    if (lowest == currentMember_) return readAhead(next);
    if (successor_ && successor_->first == lowest) {
      // Read ahead while this member stood by: its address and epoch
      // cannot have changed (a member's data is written once, at its
      // create), so it leads from this listing, without another round trip.
      Leader leader = successor_->second;
      successor_.reset();
      if (accept(lowest, leader)) readAhead(next);
      return;
    }
    read(lowest, listing, next);
  }));
}

void ZooKeeperDetector::read(const std::string& member, uint64_t listing, const std::string& next) {
  zk_.session().get(groupPath_ + "/" + member,
                    zk_.guard([this, member, listing, next](ZkRc rc, const std::string& data, const ZkStat& stat) {
    if (listing != listing_) return;
    if (rc == ZkRc::kNoNode) return list();  // gone already: list again
    if (rc != ZkRc::kOk) return;             // connection loss: listed again on kConnected
    auto leader = decode(member, data, stat);
    if (leader && accept(member, *leader)) readAhead(next);
  }));
}

std::optional<Leader> ZooKeeperDetector::decode(const std::string& member, const std::string& data,
                                                const ZkStat& stat) const {
  auto decoded = decodeMemberData(data);
  if (!decoded) {
    LOG_WARNING("detector: ignoring member " << member << ": " << decoded.error().describe());
    return std::nullopt;
  }
  return Leader{decoded->address, epochOf(stat.czxid), decoded->masterId, decoded->shards};
}

bool ZooKeeperDetector::accept(const std::string& member, const Leader& leader) {
  if (leader.epoch < highestEpoch_) {
    LOG_WARNING("detector: ignoring member " << member << " with epoch " << leader.epoch
                                             << " below " << highestEpoch_);
    return false;
  }
  currentMember_ = member;
  report(leader);
  return true;
}

// Reads the member next in line (the one a leader change would elect) while
// nothing is happening, so that on the change the listing alone names the
// new leader: one round trip less for every client at the moment a failover
// loads ZooKeeper and the clients' own loops most. One member is kept.
void ZooKeeperDetector::readAhead(const std::string& next) {
  if (next.empty() || (successor_ && successor_->first == next) || readingAhead_ == next) return;
  readingAhead_ = next;
  zk_.session().get(groupPath_ + "/" + next,
                    zk_.guard([this, next](ZkRc rc, const std::string& data, const ZkStat& stat) {
    if (readingAhead_ == next) readingAhead_.clear();
    if (rc != ZkRc::kOk) return;  // gone, or connection loss: the next listing reads it
    if (auto leader = decode(next, data, stat)) successor_.emplace(next, *leader);
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
