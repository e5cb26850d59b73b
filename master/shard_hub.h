// ShardHub: the leader's side of link shards (proto/shard.proto). Listens on
// --shard-listen, runs each shard's one ShardLink, and presents every agent a
// shard holds to the Master as a peer of its own: an agent attached at a
// shard becomes peerConnected(peer, Hello{ROLE_AGENT}, its identity as the
// shard verified it), its forwarded messages peerMessage(peer, ...), its
// detachment (or its shard's link going) peerClosed(peer). The Master
// cannot tell these peers from direct ones; the MasterServer routes what it
// sends to them here (ownsPeer).
//
// Trust: with TLS a shard must present a certificate of role `shard`; an
// agent's principal is the one the shard verified and carried. A shard acts
// only for the slots it attached: a message for any other slot is refused
// (logged, counted, dropped) and reaches no agent's state.
//
// Liveness: every message from an agent, forwarded or not, shows the Master
// it lives. The shard answers its agents' heartbeats itself and sends one
// Liveness summary per interval (empty when it heard none) naming the agents
// whose frames ended at the shard (heartbeats, unchanged usage); each slot
// named in it is a heartbeat to the Master, whose HeartbeatAck is not sent
// on. The Master counts an agent's silence only up to its shard's latest
// summary handled (heardUpTo): when the leader is late reading a shard's
// link, the frames waiting in it are not charged to the agents.
//
// Bounds: at most maxShards links, at most maxAgentsPerShard slots each.
//
// Thread: the master's io_context thread.
#pragma once

#include <functional>
#include <memory>
#include <unordered_map>

#include "base/asio.h"
#include "base/flags.h"
#include "master/master.h"
#include "proto/shard_link.h"

namespace allot {

// Peer ids the hub gives its agents start here; the server's own count up
// from 1 and never reach it.
constexpr PeerId kShardPeerBase = PeerId{1} << 62;
constexpr size_t kShardsMax = 256;
constexpr size_t kAgentsPerShardLinkMax = 65536;

class ShardHub {
 public:
  struct Options {
    HostPort listen;
    std::shared_ptr<ssl::context> tls;  // null: plaintext
    uint64_t leaderEpoch = 0;
    size_t maxShards = kShardsMax;
    size_t maxAgentsPerShard = kAgentsPerShardLinkMax;
    size_t maxFrameBytes = kMaxFrameBytes;
    std::chrono::milliseconds handshakeTimeout = std::chrono::seconds(10);
  };
  struct Counts {
    uint64_t refused = 0;        // messages for slots the shard does not hold
    uint64_t messagesIn = 0;
    uint64_t messagesOut = 0;
  };

  // `afterEvent` runs after every change the Master was told of (the
  // server's allocation trigger).
  ShardHub(asio::io_context& io, Options options, Master& master, std::function<void()> afterEvent);
  // Binds the listener; accepting starts in start().
  [[nodiscard]] Status listen();
  uint16_t port() const { return port_; }
  void start(uint64_t leaderEpoch);
  void stop();

  static bool ownsPeer(PeerId peer) { return peer >= kShardPeerBase; }
  // When the latest liveness summary of the peer's shard was handled (its
  // link's start before the first); `now` for a peer no shard holds.
  TimePoint heardUpTo(PeerId peer, TimePoint now) const;
  void send(PeerId peer, const wire::Envelope& envelope);
  void close(PeerId peer, const std::string& reason);

  size_t shards() const { return shards_.size(); }
  size_t agents() const { return peers_.size(); }
  const Counts& counts() const { return counts_; }
  // Prometheus text for the master's /metrics: allot_master_shards,
  // allot_master_shard_agents{shard="NAME"} (agents each linked shard
  // carries), allot_master_shard_messages_total{direction="in"|"out"} and
  // allot_master_shard_refused_total. Built per scrape: O(shards).
  std::string metricsText() const;

 private:
  struct Route {
    uint64_t shard;
    uint64_t slot;
  };
  struct ShardState {
    std::shared_ptr<ShardLink> link;
    std::unordered_map<uint64_t, PeerId> slots;
    TimePoint summaryAt;
  };
  void acceptNext();
  void onAccepted(asio::ip::tcp::socket socket);
  void onMessage(uint64_t shard, shard::ShardEnvelope& e);
  void onClosed(uint64_t shard, const std::string& reason);
  void attach(uint64_t shard, ShardState& state, const shard::AgentAttached& m);
  void detach(ShardState& state, uint64_t slot);
  void forward(uint64_t shard, ShardState& state, shard::AgentMessage& m);
  void liveness(ShardState& state, const shard::Liveness& m);

  asio::io_context& io_;
  Options options_;
  Master& master_;
  std::function<void()> afterEvent_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer acceptPause_;
  std::unordered_map<uint64_t, ShardState> shards_;
  std::unordered_map<PeerId, Route> peers_;
  uint64_t nextShard_ = 1;
  PeerId nextPeer_ = kShardPeerBase;
  uint16_t port_ = 0;
  bool stopped_ = false;
  Counts counts_;
};

}  // namespace allot
