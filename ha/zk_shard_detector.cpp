#include "ha/zk_shard_detector.h"

#include <algorithm>

#include "base/log.h"
#include "ha/group.h"
#include "ha/zk_detector.h"

namespace allot {

ZooKeeperShardDetector::ZooKeeperShardDetector(asio::io_context& io, ZkSessionFactory sessions, std::string path,
                                               std::string key, std::string description)
    : io_(io),
      path_(std::move(path)),
      key_(std::move(key)),
      description_(std::move(description)),
      zk_(std::move(sessions)) {}

void ZooKeeperShardDetector::start(Callback onLeader) {
  onLeader_ = std::move(onLeader);
  newSession();
}

void ZooKeeperShardDetector::newSession() {
  zk_.renew([this](const ZkEvent& event) { onEvent(event); });
}

// Without ZooKeeper the shards listed last stay the choice: the links to
// them do not need ZooKeeper.
void ZooKeeperShardDetector::onEvent(const ZkEvent& event) {
  if (event.kind != ZkEvent::Kind::kSession) {
    if (event.path == path_) list();
    return;
  }
  switch (event.state) {
    case ZkState::kConnected: return list();
    case ZkState::kConnecting: return;
    case ZkState::kExpired:
      LOG_WARNING("shard directory: ZooKeeper session expired; starting a new one");
      asio::post(io_, zk_.guard([this] { newSession(); }));
      return;
    case ZkState::kAuthFailed:
      LOG_ERROR("shard directory: ZooKeeper refused this client's authentication");
      return;
  }
}

void ZooKeeperShardDetector::list() {
  uint64_t listing = ++listing_;
  auto& session = zk_.session();
  session.children(path_, true, zk_.guard([this, listing](ZkRc rc, const std::vector<std::string>& children) {
    if (listing != listing_ || rc == ZkRc::kConnectionLoss) return;
    if (rc == ZkRc::kNoNode) {
      LOG_INFO("shard directory: nothing at " << path_ << " yet; waiting for a shard");
      // Made between the listing and this watch: no creation event will
      // come, so list again.
      zk_.session().exists(path_, true, zk_.guard([this](ZkRc found, const ZkStat&) {
        if (found == ZkRc::kOk) list();
      }));
      return update({});
    }
    if (rc != ZkRc::kOk) {
      LOG_WARNING("shard directory: listing " << path_ << ": " << zkRcName(rc));
      return;
    }
    std::vector<std::string> members;
    for (const auto& m : parseMembers(children)) members.push_back(m.name);
    if (members.size() > kShardListMax) members.resize(kShardListMax);
    read(members, listing);
  }));
}

// Reads every member; the last answer of this listing updates the choice.
void ZooKeeperShardDetector::read(const std::vector<std::string>& members, uint64_t listing) {
  if (members.empty()) return update({});
  auto found = std::make_shared<std::vector<Endpoint>>();
  auto pending = std::make_shared<size_t>(members.size());
  for (const auto& member : members) {
    zk_.session().get(path_ + "/" + member, zk_.guard([this, listing, member, found, pending](
                                                           ZkRc rc, const std::string& data, const ZkStat&) {
      if (listing != listing_) return;
      if (rc == ZkRc::kOk) {
        auto decoded = decodeMemberData(data);
        if (decoded && decoded->address.kind == Endpoint::Kind::kTcp) {
          found->push_back(decoded->address);
        } else {
          LOG_WARNING("shard directory: ignoring member " << member);
        }
      }
      if (--*pending == 0) update(*found);
    }));
  }
}

void ZooKeeperShardDetector::update(const std::vector<Endpoint>& shards) {
  ranked_ = rankShards(shards, key_);
  index_ = 0;
  if (reported_) {
    auto kept = std::find(ranked_.begin(), ranked_.end(), *reported_);
    if (kept != ranked_.end()) index_ = static_cast<size_t>(kept - ranked_.begin());
  }
  report();
}

void ZooKeeperShardDetector::advance() {
  if (ranked_.empty()) return;
  index_ = (index_ + 1) % ranked_.size();
  report();
}

void ZooKeeperShardDetector::report() {
  std::optional<Endpoint> choice;
  if (index_ < ranked_.size()) choice = ranked_[index_];
  if (choice == reported_) return;
  reported_ = choice;
  if (!choice) LOG_WARNING("shard directory: no shard listed in " << path_);
  if (choice) LOG_INFO("shard directory: choosing shard " << choice->describe() << " of " << ranked_.size());
  // Posted: advance() runs inside the link's own callbacks.
  asio::post(io_, zk_.guard([this, choice] {
    if (onLeader_) onLeader_(choice ? std::optional<Leader>(Leader{*choice, 0, "", std::nullopt}) : std::nullopt);
  }));
}

std::unique_ptr<ShardDetector> makeZooKeeperShardDetector(asio::io_context& io, const ZkUrl& url,
                                                          std::string key) {
  auto factory = zooKeeperSessionFactory(io, url.servers, kDetectorSessionTimeout);
  CHECK(factory);  // only a bad timeout fails, and ours is a constant
  return std::make_unique<ZooKeeperShardDetector>(io, std::move(*factory), url.path, std::move(key),
                                                  "zk://" + url.servers + url.path);
}

}  // namespace allot
