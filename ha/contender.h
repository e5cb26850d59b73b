// LeaderContender: one master's candidacy in the ZooKeeper group
// (ha/group.h), following ZooKeeper's election recipe:
//   0. with credentials (ZkClientOptions), set the group znode's ACL so only
//      the masters' identity writes there (anyone reads);
//   1. create <path>/member_<guid>_ (ephemeral, sequential) holding the
//      master's address and id;
//   2. list the group; the lowest sequence leads (the epoch, our znode's
//      czxid, is known from the create: the listing alone elects, the
//      watch on our own znode is set beside it);
//   3. otherwise watch only the next-lower member (no herd effect) and go
//      back to 2 when it goes.
//
// Fencing (docs/links.md section 4, docs/decisions.md): once elected, the
// contender calls `lost` and stops for good when it can no longer be sure it
// leads: the session expired, our znode vanished, or the link to ZooKeeper
// stayed down for a third of the negotiated session timeout (the client
// notices silence after 2/3 of it, so by then the servers may expire us any
// moment). The master exits on `lost`; systemd restarts it as a standby.
// A standby whose session expires starts a new session and joins again.
//
// Thread: the io_context thread; callbacks run there, never inside start().
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/asio.h"
#include "ha/group.h"
#include "ha/zk_session.h"
#include "proto/leader.h"

namespace allot {

class LeaderContender {
 public:
  struct Callbacks {
    std::function<void(uint64_t epoch)> elected;        // at most once
    std::function<void(const std::string& why)> lost;   // only after elected; at most once
    // ZooKeeper will not let this master take part: its credentials were
    // refused, or the group's ACL forbids its writes (wrong or missing
    // credentials). Retrying cannot help; the contender stops. At most once,
    // instead of `lost`.
    std::function<void(const std::string& why)> refused;
  };

  LeaderContender(asio::io_context& io, ZkSessionFactory sessions, std::string groupPath,
                  MemberData member, Callbacks callbacks);
  ~LeaderContender();

  void start();
  bool leading() const { return state_ == State::kLeading; }
  uint64_t epoch() const { return epoch_; }
  // The session this contender leads with (null before start()); while
  // leading() it stays the same session until `lost`. Others may issue calls
  // on it (the leader's writes: master/role_store_zk.h), never start it.
  ZkSession* session() const { return session_.get(); }
  // The znode path of this member ("" until created).
  const std::string& memberPath() const { return memberPath_; }
  // The path this standby watches ("" when leading or not yet known).
  const std::string& watching() const { return watching_; }

 private:
  enum class State { kJoining, kStandby, kLeading, kLost };

  void newSession();
  void onEvent(uint64_t generation, const ZkEvent& event);
  void onSessionEvent(const ZkEvent& event);
  void ensurePath(size_t depth);
  void onPathCreated(size_t depth, const std::string& prefix, ZkRc rc);
  void restrictGroup();
  void join();
  void findOrJoin();
  void check();
  void becomeLeader();
  void loseLeadership(const std::string& why);
  void refuse(const std::string& why);
  template <typename Fn>
  auto guard(Fn fn);

  asio::io_context& io_;
  ZkSessionFactory sessions_;
  std::string groupPath_;
  MemberData member_;
  Callbacks callbacks_;
  std::string guid_;
  std::unique_ptr<ZkSession> session_;
  uint64_t generation_ = 0;  // bumped per session; stale callbacks are dropped
  State state_ = State::kJoining;
  bool connected_ = false;
  bool everConnected_ = false;
  bool createInFlight_ = false;
  bool createUncertain_ = false;  // a create ended in connection loss
  std::string memberPath_;
  uint64_t memberEpoch_ = 0;  // epochOf(our znode's czxid) when our create told it
  std::string watching_;
  uint64_t epoch_ = 0;
  Duration negotiatedTimeout_{};
  asio::steady_timer fenceTimer_;
  asio::steady_timer retryTimer_;
};

}  // namespace allot
