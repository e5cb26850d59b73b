#include "ha/leader_lookup.h"

#include <optional>

namespace allot {

namespace {

// A leader that goes between the listing and the read makes the lookup list
// again; past this many reads it gives up (a group churning that fast has
// no leader worth naming).
constexpr int kMaxReads = 8;

class Lookup {
 public:
  Lookup(std::unique_ptr<ZkSession> session, std::string groupPath)
      : session_(std::move(session)), groupPath_(std::move(groupPath)) {}
  // The session goes first: after its destructor no callback runs, so none
  // can reach this object half destroyed.
  ~Lookup() { session_.reset(); }

  void start() {
    session_->start([this](const ZkEvent& event) { onEvent(event); });
  }
  bool done() const { return result_.has_value(); }
  bool everConnected() const { return everConnected_; }
  Result<LeaderEntry> take() { return std::move(*result_); }
  const ZkSession& session() const { return *session_; }
  void finish(Result<LeaderEntry> result) {
    if (!result_) result_ = std::move(result);
  }

 private:
  void onEvent(const ZkEvent& event) {
    if (event.kind != ZkEvent::Kind::kSession) return;  // no watches are set
    if (event.state == ZkState::kConnected) {
      everConnected_ = true;
      return list();  // also after a reconnect: answers lost with the link
    }
    if (event.state == ZkState::kAuthFailed)
      finish(Error{"ZooKeeper " + session_->describe() + ": authentication failed"});
    if (event.state == ZkState::kExpired)
      finish(Error{"ZooKeeper " + session_->describe() + ": session expired before the leader was read"});
  }

  void list() {
    session_->children(groupPath_, false, [this](ZkRc rc, const std::vector<std::string>& children) {
      if (done() || rc == ZkRc::kConnectionLoss) return;  // listed again on kConnected
      if (rc == ZkRc::kNoNode)
        return finish(Error{"no master leads: no master has joined " + groupPath_ +
                            " (the group znode does not exist)"});
      if (rc != ZkRc::kOk)
        return finish(Error{"cannot list " + groupPath_ + ": " + std::string(zkRcName(rc))});
      auto members = parseMembers(children);
      if (members.empty())
        return finish(Error{"no master leads: the group " + groupPath_ + " has no members"});
      read(members.front().name);
    });
  }

  void read(const std::string& member) {
    if (++reads_ > kMaxReads)
      return finish(Error{"the leader of " + groupPath_ + " changed " + std::to_string(kMaxReads) +
                          " times while it was being read"});
    std::string path = groupPath_ + "/" + member;
    session_->get(path, [this, member, path](ZkRc rc, const std::string& data, const ZkStat& stat) {
      if (done() || rc == ZkRc::kConnectionLoss) return;
      if (rc == ZkRc::kNoNode) return list();  // it went meanwhile: the next one leads
      if (rc != ZkRc::kOk) return finish(Error{"cannot read " + path + ": " + std::string(zkRcName(rc))});
      auto decoded = decodeMemberData(data);
      if (!decoded)
        return finish(Error{"the leader's znode " + path + " is unreadable: " + decoded.error().describe()});
      finish(LeaderEntry{member, epochOf(stat.czxid), std::move(*decoded)});
    });
  }

  std::unique_ptr<ZkSession> session_;
  std::string groupPath_;
  std::optional<Result<LeaderEntry>> result_;
  bool everConnected_ = false;
  int reads_ = 0;
};

}  // namespace

Result<LeaderEntry> findLeader(asio::io_context& io, const ZkSessionFactory& sessions,
                               const std::string& groupPath, Duration timeout) {
  Lookup lookup(sessions(), groupPath);
  asio::steady_timer deadline(io);
  deadline.expires_after(timeout);
  std::string within =
      " within " + std::to_string(std::chrono::duration_cast<Millis>(timeout).count()) + " ms";
  deadline.async_wait([&lookup, within](const boost::system::error_code& ec) {
    if (ec) return;
    lookup.finish(Error{lookup.everConnected()
                            ? "ZooKeeper " + lookup.session().describe() + " did not answer" + within
                            : "cannot reach ZooKeeper " + lookup.session().describe() + within});
  });
  lookup.start();
  io.restart();
  while (!lookup.done() && io.run_one() > 0) {
  }
  deadline.cancel();
  if (!lookup.done()) return Error{"findLeader: the io_context stopped before an answer"};
  return lookup.take();
}

}  // namespace allot
