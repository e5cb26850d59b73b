// LinkShard: allot-shard's state and sockets. It terminates agent links for
// the leading master: to an agent it looks like a master (its Hello says
// ROLE_MASTER with the leader's epoch), it validates every agent message
// with the master's named limits (proto/validate.h), folds them
// (shard/fold.h) and forwards what the leader must see over its one
// ShardLink (proto/shard_link.h) to the master's --shard-listen address;
// the leader's messages for an agent come back on the same link and go out
// on that agent's own.
//
// The leader: --master names its --shard-listen ("HOST:PORT") or the
// masters' ZooKeeper group ("zk://.../path"), where each master publishes
// its --shard-listen beside its address (ha/group.h). When the leader link
// goes the shard keeps its agents' links, answers their heartbeats, and
// follows the detector to the next leader; once linked it hands that leader
// every agent in bulk (AgentAttached and the report it kept, shard/fold.h).
// The agents do not reconnect, and hear of the new leader only when they
// need to (AgentFold::registered). Once the leader has answered every
// report handed over, the shard logs it. Only when no leader is linked within
// leaderGrace are the agents' links closed, so that they move on.
//
// New agents are accepted only while the leader link is up: without a
// leader there is no one to register with.
//
// Thread: everything on the given io_context, which one thread runs.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "base/asio.h"
#include "base/flags.h"
#include "master/acls.h"
#include "ha/contender.h"
#include "proto/connection.h"
#include "proto/leader.h"
#include "proto/reconnecting_link.h"
#include "proto/shard_link.h"
#include "shard/fold.h"
#include "shard/metrics.h"

namespace allot {

// Agents one shard holds at most: each is a file descriptor, and a process
// may hold 20,000 on this kind of host (RLIMIT_NOFILE), with room left for
// the leader link, the listener and logs.
constexpr size_t kAgentsPerShardMax = 19000;

struct ShardOptions {
  HostPort listen{"127.0.0.1", 5060};   // agents connect here
  std::string master = "127.0.0.1:5061";  // the leader's --shard-listen, or zk://.../path
  std::string name;  // empty: the advertised HOST:PORT (shown per agent in the master's /state)
  size_t maxAgents = kAgentsPerShardMax;
  Duration livenessInterval = std::chrono::seconds(1);
  // Agents' links: mutual TLS with this server context (each agent's
  // certificate of role `agent`), null: plaintext. The ACL's agent rules
  // are applied here to the principal the certificate names, which is
  // then carried to the leader (it applies them again, with agents_max).
  std::shared_ptr<ssl::context> agentTls;
  Acls acls = Acls::permissive();
  std::shared_ptr<ssl::context> masterTls;  // null: the leader link in plaintext
  std::chrono::milliseconds handshakeTimeout = std::chrono::seconds(10);
  // Agents are held this long without a leader before their links close.
  Duration leaderGrace = std::chrono::seconds(10);
  // zk://.../path: announce this shard there (an ephemeral member whose
  // address is `advertise`) for agents given --shards zk://.../path
  // (ha/zk_shard_detector.h). Empty: not announced.
  std::string announce;
  // Where agents reach this shard; empty host: --listen's host and port.
  HostPort advertise{"", 0};
};

// The ZooKeeper session of a shard's announcement: how long a dead shard
// stays listed.
constexpr auto kAnnounceSessionTimeout = std::chrono::seconds(4);

class LinkShard {
 public:
  static Result<std::unique_ptr<LinkShard>> create(asio::io_context& io, ShardOptions options);

  uint16_t port() const { return port_; }
  void start();
  void stop();

  size_t agents() const { return agents_.size(); }
  bool leaderConnected() const { return leader_ && leader_->handshaken(); }
  const AgentFold& fold() const { return fold_; }
  const std::string& name() const { return options_.name; }
  ShardMetrics& metrics() { return metrics_; }

 private:
  LinkShard(asio::io_context& io, ShardOptions options);
  void onLeaderReported(const std::optional<Leader>& leader);
  void connectLeader();
  void handOver();
  void handoverAnswered(Slot slot);
  shard::ShardEnvelope attachedEnvelope(Slot slot, const Connection& conn) const;
  void startGrace();
  void announce();
  void retryLeader(const std::string& why);
  void onLeaderHello(const shard::ShardHello& hello);
  void onLeaderMessage(shard::ShardEnvelope& e);
  void onLeaderClosed(const std::string& reason);
  void sendLeader(const shard::ShardEnvelope& e);
  void acceptNext();
  void onAccepted(asio::ip::tcp::socket socket);
  void sendAgent(Connection& conn, const wire::Envelope& m, std::string_view raw);
  void agentHello(Slot slot);
  void refuseAgent(Slot slot, const std::string& reason);
  void agentMessage(Slot slot, wire::Envelope& e);
  void agentClosed(Slot slot, const std::string& reason);
  void closeAgents(const std::string& reason);
  void scheduleLiveness();

  asio::io_context& io_;
  ShardOptions options_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer retryTimer_;
  asio::steady_timer livenessTimer_;
  asio::steady_timer graceTimer_;
  std::unique_ptr<LeaderDetector> detector_;
  std::unique_ptr<LeaderContender> announcement_;
  std::optional<Endpoint> target_;  // the leader's --shard-listen, when known
  uint64_t targetGeneration_ = 0;   // bumped on every change of target_
  Backoff backoff_;
  std::shared_ptr<ShardLink> leader_;
  uint64_t leaderEpoch_ = 0;
  // Every agent link, handshaken or not, by slot.
  std::unordered_map<Slot, std::shared_ptr<Connection>> agents_;
  AgentFold fold_;
  // The slots whose reports went to the leader in the last handover and
  // are not answered yet; at most every agent held.
  std::unordered_set<Slot> handing_;
  size_t handingTotal_ = 0;
  std::chrono::steady_clock::time_point handoverStart_;
  ShardMetrics metrics_;
  Slot nextSlot_ = 1;
  uint16_t port_ = 0;
  bool stopped_ = false;
};

}  // namespace allot
