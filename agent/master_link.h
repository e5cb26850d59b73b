// MasterLink: the agent's connection to the leading master. Rides on a
// ReconnectingLink (proto/reconnecting_link.h) fed by the detector for
// Options::master ("host:port" or "zk://.../path"): it sends Hello{ROLE_AGENT}
// and a RegisterAgent built by the caller on every (re)connection (with every
// executor and task, so a new master rebuilds its state), and keeps the
// link alive at the interval the master gives in AgentRegistered.
//
// Liveness: any frame proves its sender alive, so a heartbeat goes only at
// the end of an interval in which the link did not carry traffic both ways
// (as TCP keepalive and HTTP/2 PING): the agent sent nothing in it (the
// master would not hear it) or heard nothing (the master is asked to
// speak). A link busy both ways carries none; a heartbeat is not traffic
// the agent sent, so an idle agent beats every interval. Any frame heard
// answers every heartbeat sent before it; at the end of an interval that
// needs a heartbeat after kMissedHeartbeatsMax unanswered ones in a row,
// the link is dropped instead (the ReconnectingLink then reconnects with
// jittered backoff). So the master hears a live agent at least once every
// two intervals (it sent early in one, then nothing), and the agent gives
// up on a silent master within kMissedHeartbeatsMax + 1 intervals of the
// last frame heard, whatever the agent itself sends meanwhile.
// With Options::shards the link goes through link shards instead
// (proto/shard_placement.h): the first choice for Options::shardKey, and the
// next one when the link to a shard is lost after registering or no
// registration comes within kShardRegistrationTimeout. When the leader
// changes the shard keeps the link and hands the agent to the new one with
// the report it keeps (shard/fold.h); the agent hears of it only when it
// must (it has unacknowledged updates, or the new leader's answer differs
// from what it knows): an AgentRegistered from another master arrives
// unasked and counts as a registration (onRegistered, so the agent sends
// its unacknowledged updates again). The full registration is not sent
// again: the new leader holds it already. Over TLS a shard
// must present a `shard` certificate (it says ROLE_MASTER in its Hello).
// Every message from the master passes validateFromMaster (proto/validate.h)
// before anything acts on it; a refused one goes to Callbacks::onRefused
// and nowhere else.
//
// Thread: the agent's io_context thread; callbacks run there.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/asio.h"
#include "base/clock.h"
#include "base/result.h"
#include "proto/allot.pb.h"
#include "proto/reconnecting_link.h"
#include "proto/shard_placement.h"

namespace allot {

inline constexpr int kMissedHeartbeatsMax = 3;
// Through shards: how long a shard has to bring the registration's answer
// before the agent tries the next one.
inline constexpr Duration kShardRegistrationTimeout = std::chrono::seconds(5);

class MasterLink {
 public:
  struct Options {
    std::string master;  // "host:port" or "zk://host:port,.../path"
    std::vector<Endpoint> shards;  // non-empty: through these shards, not `master`
    std::string shardsZk;          // zk://.../path: through the shards listed there
    std::string shardKey;          // ranks the shards (the agent's host and work dir)
    std::string name;    // Hello.name
    std::shared_ptr<ssl::context> tls;  // null: plaintext
    Duration reconnectMin = std::chrono::milliseconds(100);
    Duration reconnectMax = std::chrono::seconds(5);
  };
  struct Callbacks {
    // Fills the RegisterAgent sent on every (re)connection.
    std::function<void(wire::RegisterAgent*)> buildRegistration;
    std::function<void(const wire::AgentRegistered&)> onRegistered;
    // Every other message from the master.
    std::function<void(wire::Envelope&)> onMessage;
    // A message that failed validation (logged here already); the agent
    // answers what it can (a RunTask with TASK_ERROR).
    std::function<void(const wire::Envelope&, const Error&)> onRefused;
    std::function<void(const std::string& reason)> onDisconnected;
  };

  MasterLink(asio::io_context& io, Options options, Callbacks callbacks);
  ~MasterLink();

  // Fails on a malformed master address.
  Status start();
  void stop();

  // Sends when registered; an Error otherwise (the caller keeps what must
  // be resent after the next registration).
  Status send(const wire::Envelope& envelope);
  bool registered() const { return registered_; }
  uint64_t registrations() const { return registrations_; }

 private:
  struct Alive {};
  void onConnected();
  void onMessage(wire::Envelope& e);
  void onDisconnected(const std::string& reason);
  void heard();
  void scheduleBeat();
  void beat();
  Result<std::unique_ptr<LeaderDetector>> makeDetector();
  void watchShard();

  asio::io_context& io_;
  Options options_;
  Callbacks callbacks_;
  std::unique_ptr<ReconnectingLink> link_;
  asio::steady_timer heartbeatTimer_;
  asio::steady_timer shardTimer_;
  ShardDetector* shardDetector_ = nullptr;  // owned by link_; null without shards
  Duration heartbeatInterval_ = std::chrono::seconds(1);
  uint64_t sequence_ = 0;
  // Heartbeats sent since the last frame heard.
  int unanswered_ = 0;
  // Traffic in the current interval, each way (heartbeats not counted).
  bool sent_ = false;
  bool heard_ = false;
  uint64_t registrations_ = 0;
  std::string masterId_;  // of the last AgentRegistered
  bool registered_ = false;
  std::shared_ptr<Alive> alive_ = std::make_shared<Alive>();
};

}  // namespace allot
