#include "ha/contender.h"

#include "base/log.h"
#include "ha/group.h"

namespace allot {

namespace {
constexpr auto kRetryDelay = std::chrono::seconds(1);

long long toMs(Duration d) { return std::chrono::duration_cast<Millis>(d).count(); }
}  // namespace

LeaderContender::LeaderContender(asio::io_context& io, ZkSessionFactory sessions,
                                 std::string groupPath, MemberData member, Callbacks callbacks)
    : io_(io),
      sessions_(std::move(sessions)),
      groupPath_(std::move(groupPath)),
      member_(std::move(member)),
      callbacks_(std::move(callbacks)),
      guid_(newMemberGuid()),
      fenceTimer_(io),
      retryTimer_(io) {}

LeaderContender::~LeaderContender() {
  state_ = State::kLost;
  session_.reset();
}

// Wraps a completion so it does nothing once its session is gone or the
// candidacy has ended.
template <typename Fn>
auto LeaderContender::guard(Fn fn) {
  return [this, generation = generation_, fn = std::move(fn)](auto&&... args) {
    if (generation != generation_ || state_ == State::kLost) return;
    fn(std::forward<decltype(args)>(args)...);
  };
}

void LeaderContender::start() { newSession(); }

void LeaderContender::newSession() {
  ++generation_;
  connected_ = false;
  everConnected_ = false;
  createInFlight_ = false;
  createUncertain_ = false;
  memberPath_.clear();
  watching_.clear();
  session_ = sessions_();
  LOG_INFO("contending for leadership in ZooKeeper " << session_->describe() << " at "
                                                      << groupPath_);
  session_->start(guard([this, generation = generation_](const ZkEvent& event) {
    onEvent(generation, event);
  }));
  // Say so once if ZooKeeper cannot be reached within 10 s (the client keeps
  // trying by itself).
  retryTimer_.expires_after(std::chrono::seconds(10));
  retryTimer_.async_wait([this, generation = generation_](const boost::system::error_code& ec) {
    if (ec || generation != generation_ || state_ == State::kLost || everConnected_) return;
    LOG_WARNING("ZooKeeper " << session_->describe() << " still unreachable; this master "
                             << "stays a standby and keeps trying");
  });
}

void LeaderContender::onEvent(uint64_t generation, const ZkEvent& event) {
  if (event.kind == ZkEvent::Kind::kSession) return onSessionEvent(event);
  if (event.kind != ZkEvent::Kind::kDeleted) return;
  if (!watching_.empty() && event.path == watching_) {
    LOG_INFO("member " << watching_ << " is gone; checking whether this master leads");
    watching_.clear();
    return check();
  }
  if (!memberPath_.empty() && event.path == memberPath_) return check();
  // Anything else is a watch of an earlier round (we moved on): ignore it.
}

void LeaderContender::onSessionEvent(const ZkEvent& event) {
  switch (event.state) {
    case ZkState::kConnected:
      connected_ = true;
      fenceTimer_.cancel();
      negotiatedTimeout_ = event.negotiatedTimeout;
      LOG_INFO((everConnected_ ? "reconnected" : "connected") << " to ZooKeeper (session timeout "
                                                               << toMs(negotiatedTimeout_) << " ms)");
      everConnected_ = true;
      // Set the predecessor watch again rather than trust the client's
      // re-registration across servers (a standby once missed the
      // deletion after moving to another server of an ensemble).
      watching_.clear();
      if (!memberPath_.empty()) return check();
      if (createInFlight_) return;
      return createUncertain_ ? findOrJoin() : ensurePath(1);
    case ZkState::kConnecting:
      connected_ = false;
      if (state_ != State::kLeading) {
        LOG_WARNING("lost the link to ZooKeeper; the client reconnects by itself");
        return;
      }
      LOG_WARNING("leader lost the link to ZooKeeper; stepping down unless it is back within "
                  << toMs(negotiatedTimeout_ / 3) << " ms");
      fenceTimer_.expires_after(negotiatedTimeout_ / 3);
      fenceTimer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec || connected_ || state_ != State::kLeading) return;
        loseLeadership("no link to ZooKeeper for a third of the session timeout (" +
                       std::to_string(toMs(negotiatedTimeout_)) +
                       " ms): the servers may already have expired our session");
      });
      return;
    case ZkState::kExpired:
      if (state_ == State::kLeading) return loseLeadership("ZooKeeper session expired");
      LOG_WARNING("ZooKeeper session expired; joining again with a new session");
      state_ = State::kJoining;
      asio::post(io_, guard([this] { newSession(); }));
      return;
    case ZkState::kAuthFailed:
      if (state_ == State::kLeading) return loseLeadership("ZooKeeper refused our credentials");
      return refuse("ZooKeeper refused this master's credentials (--zk-credentials)");
  }
}

// Creates the group path's ancestors one by one ("/a", "/a/b", ...);
// an existing znode is fine.
void LeaderContender::ensurePath(size_t depth) {
  size_t end = 0;
  for (size_t i = 0; i < depth; ++i) {
    end = groupPath_.find('/', end + 1);
    if (end == std::string::npos) break;
  }
  std::string prefix = end == std::string::npos ? groupPath_ : groupPath_.substr(0, end);
  session_->create(prefix, "", false, guard([this, depth, prefix](ZkRc rc, const std::string&,
                                                                   const ZkStat&) {
    onPathCreated(depth, prefix, rc);
  }));
}

void LeaderContender::onPathCreated(size_t depth, const std::string& prefix, ZkRc rc) {
  if (rc == ZkRc::kNoAuth) {
    // ZooKeeper checks the parent's ACL before existence: a znode someone
    // else made and locked is fine as long as it exists.
    session_->exists(prefix, false, guard([this, depth, prefix](ZkRc found, const ZkStat&) {
      if (found == ZkRc::kOk) return onPathCreated(depth, prefix, ZkRc::kNodeExists);
      if (found == ZkRc::kConnectionLoss) return;  // retried on the next kConnected
      refuse("ZooKeeper does not let this master create " + prefix +
             " (its parent's ACL): check --zk-credentials");
    }));
    return;
  }
  if (rc != ZkRc::kOk && rc != ZkRc::kNodeExists) {
    if (rc != ZkRc::kConnectionLoss) LOG_WARNING("cannot create " << prefix << ": " << zkRcName(rc));
    return;  // retried on the next kConnected
  }
  if (prefix == groupPath_) return restrictGroup();
  ensurePath(depth + 1);
}

// With credentials, the group znode (whoever made it) gets the masters' ACL
// before this master joins: members are created and deleted under it.
void LeaderContender::restrictGroup() {
  session_->restrict(groupPath_, guard([this](ZkRc rc) {
    if (rc == ZkRc::kOk) return join();
    if (rc == ZkRc::kNoNode) return ensurePath(1);  // deleted meanwhile
    if (rc == ZkRc::kNoAuth) {
      return refuse("ZooKeeper does not let this master change the ACL of " + groupPath_ +
                    ": another identity owns it (check --zk-credentials)");
    }
    if (rc != ZkRc::kConnectionLoss)
      LOG_WARNING("cannot set the ACL of " << groupPath_ << ": " << zkRcName(rc));
  }));
}

void LeaderContender::join() {
  createInFlight_ = true;
  std::string path = groupPath_ + "/" + memberPrefix(guid_);
  session_->create(path, encodeMemberData(member_), true,
                   guard([this](ZkRc rc, const std::string& created, const ZkStat& stat) {
    createInFlight_ = false;
    if (rc == ZkRc::kOk) {
      createUncertain_ = false;
      memberPath_ = created;
      memberEpoch_ = stat.czxid > 0 ? epochOf(stat.czxid) : 0;
      LOG_INFO("joined the contender group as " << memberPath_);
      return check();
    }
    if (rc == ZkRc::kNoNode) return ensurePath(1);  // the group was deleted meanwhile
    if (rc == ZkRc::kNoAuth) {
      return refuse("ZooKeeper does not let this master join " + groupPath_ +
                    " (the group's ACL): wrong or missing --zk-credentials");
    }
    if (rc == ZkRc::kConnectionLoss) {
      // The znode may exist without our knowing its name: look for our
      // guid once connected again rather than create a second member.
      createUncertain_ = true;
      if (connected_) findOrJoin();
      return;
    }
    LOG_WARNING("cannot join " << groupPath_ << ": " << zkRcName(rc) << "; retrying in 1 s");
    retryTimer_.expires_after(kRetryDelay);
    retryTimer_.async_wait([this, generation = generation_](const boost::system::error_code& ec) {
      if (!ec && generation == generation_ && state_ != State::kLost && connected_) join();
    });
  }));
}

void LeaderContender::findOrJoin() {
  session_->children(groupPath_, false,
                     guard([this](ZkRc rc, const std::vector<std::string>& children) {
    if (rc == ZkRc::kConnectionLoss) return;  // again on kConnected
    if (rc == ZkRc::kNoNode) return ensurePath(1);
    for (const auto& member : parseMembers(children)) {
      if (member.guid != guid_) continue;
      createUncertain_ = false;
      memberPath_ = groupPath_ + "/" + member.name;
      memberEpoch_ = 0;  // not known until our znode is read
      LOG_INFO("found our member " << memberPath_ << " created before the link dropped");
      return check();
    }
    createUncertain_ = false;
    join();
  }));
}

void LeaderContender::check() {
  session_->children(groupPath_, false,
                     guard([this](ZkRc rc, const std::vector<std::string>& children) {
    if (rc == ZkRc::kConnectionLoss) return;  // again on kConnected
    if (rc == ZkRc::kNoNode) {
      if (state_ == State::kLeading) return loseLeadership("the group znode " + groupPath_ + " was deleted");
      memberPath_.clear();
      return ensurePath(1);
    }
    auto members = parseMembers(children);
    size_t mine = members.size();
    for (size_t i = 0; i < members.size(); ++i) {
      if (groupPath_ + "/" + members[i].name == memberPath_) mine = i;
    }
    if (mine == members.size()) {
      if (state_ == State::kLeading) return loseLeadership("our znode " + memberPath_ + " was deleted");
      LOG_WARNING("our member " << memberPath_ << " is gone; joining again");
      memberPath_.clear();
      return join();
    }
    if (mine > 0) {
      if (state_ == State::kLeading) return loseLeadership("a member older than ours leads");
      state_ = State::kStandby;
      std::string predecessor = groupPath_ + "/" + members[mine - 1].name;
      if (predecessor == watching_) return;
      watching_ = predecessor;
      LOG_INFO("standing by; watching " << watching_);
      session_->exists(watching_, true, guard([this, predecessor](ZkRc rc, const ZkStat&) {
        if (rc == ZkRc::kNoNode && predecessor == watching_) {
          watching_.clear();
          check();
        }
      }));
      return;
    }
    if (state_ == State::kLeading) return;
    // Lowest: watch our own znode, so its deletion reaches us. Its czxid is
    // the epoch: known from our create, the master leads at once (one
    // ZooKeeper round trip less between the predecessor's deletion and
    // serving peers) and the watch is set beside it; a znode deleted
    // meanwhile reaches check() through the watch or this answer, which
    // steps down. A member found after a lost create reply reads it first.
    std::string path = memberPath_;
    session_->exists(memberPath_, true, guard([this, path](ZkRc rc, const ZkStat& stat) {
      if (path != memberPath_) return;
      if (rc == ZkRc::kOk) {
        if (state_ == State::kLeading) return;
        epoch_ = epochOf(stat.czxid);
        return becomeLeader();
      }
      if (rc == ZkRc::kNoNode) check();
    }));
    if (memberEpoch_ != 0) {
      epoch_ = memberEpoch_;
      becomeLeader();
    }
  }));
}

void LeaderContender::becomeLeader() {
  if (state_ == State::kLeading) return;
  state_ = State::kLeading;
  watching_.clear();
  LOG_INFO("elected leader with epoch " << epoch_ << " (" << memberPath_ << ")");
  if (callbacks_.elected) callbacks_.elected(epoch_);
}

void LeaderContender::loseLeadership(const std::string& why) {
  state_ = State::kLost;
  fenceTimer_.cancel();
  LOG_ERROR("no longer the leader: " << why);
  if (callbacks_.lost) callbacks_.lost(why);
}

void LeaderContender::refuse(const std::string& why) {
  state_ = State::kLost;
  fenceTimer_.cancel();
  retryTimer_.cancel();
  LOG_ERROR("cannot contend for leadership: " << why);
  if (callbacks_.refused) callbacks_.refused(why);
}

}  // namespace allot
