#include "master/shard_hub.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "base/log.h"
#include "proto/connection.h"
#include "proto/input_limits.h"

namespace allot {

ShardHub::ShardHub(asio::io_context& io, Options options, Master& master,
                   std::function<void()> afterEvent)
    : io_(io),
      options_(std::move(options)),
      master_(master),
      afterEvent_(std::move(afterEvent)),
      acceptor_(io),
      acceptPause_(io) {}

Status ShardHub::listen() {
  if (Status st = listenTcp(acceptor_, options_.listen, "--shard-listen", " for shards"); !st) return st;
  port_ = acceptor_.local_endpoint().port();
  return okStatus();
}

void ShardHub::start(uint64_t leaderEpoch) {
  options_.leaderEpoch = leaderEpoch;
  LOG_INFO("accepting link shards on " << options_.listen.host << ":" << port_);
  acceptNext();
}

// Like MasterServer::stop(): the Master is going away, so its agents are
// not told one by one.
void ShardHub::stop() {
  stopped_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  acceptPause_.cancel();
  auto shards = std::move(shards_);
  shards_.clear();
  peers_.clear();
  for (auto& [id, state] : shards) state.link->close("master shutting down");
}

void ShardHub::acceptNext() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, asio::ip::tcp::socket socket) {
    if (stopped_ || ec == asio::error::operation_aborted) return;
    if (!ec) {
      onAccepted(std::move(socket));
      return acceptNext();
    }
    LOG_WARNING("shard accept failed: " << ec.message() << "; retrying in 100 ms");
    acceptPause_.expires_after(std::chrono::milliseconds(100));
    acceptPause_.async_wait([this](const boost::system::error_code& e) {
      if (!e && !stopped_) acceptNext();
    });
  });
}

void ShardHub::onAccepted(asio::ip::tcp::socket socket) {
  if (shards_.size() >= options_.maxShards) {
    LOG_WARNING("refusing a shard link: " << options_.maxShards << " shards already");
    return;
  }
  ShardLink::Options o;
  o.localName = "allot-master " + master_.masterId();
  o.leaderEpoch = options_.leaderEpoch;
  o.maxFrameBytes = options_.maxFrameBytes;
  o.tls = options_.tls;
  o.tlsSide = TlsSide::kServer;
  o.requirePeerCertRole = "shard";
  o.handshakeTimeout = options_.handshakeTimeout;
  auto link = ShardLink::create(std::move(socket), o);
  uint64_t id = nextShard_++;
  shards_[id].link = link;
  shards_[id].summaryAt = master_.clock().now();
  ShardLink::Handlers h;
  h.onHello = [this, id](const shard::ShardHello& hello) {
    auto it = shards_.find(id);
    if (it == shards_.end()) return;
    LOG_INFO("shard " << id << " (" << hello.name() << ", " << it->second.link->peerAddress() << ", "
                      << it->second.link->peer().describe() << ") linked");
  };
  h.onMessage = [this, id](shard::ShardEnvelope& e) { onMessage(id, e); };
  h.onClose = [this, id](const std::string& reason) { onClosed(id, reason); };
  link->start(std::move(h));
}

void ShardHub::onMessage(uint64_t shard, shard::ShardEnvelope& e) {
  auto it = shards_.find(shard);
  if (it == shards_.end()) return;
  ++counts_.messagesIn;
  switch (e.body_case()) {
    case shard::ShardEnvelope::kAttached: attach(shard, it->second, e.attached()); break;
    case shard::ShardEnvelope::kDetached: detach(it->second, e.detached().slot()); break;
    case shard::ShardEnvelope::kAgentMessage: forward(shard, it->second, *e.mutable_agent_message()); break;
    case shard::ShardEnvelope::kLiveness: liveness(it->second, e.liveness()); break;
    default:
      LOG_WARNING("shard " << shard << " sent an unexpected message (field " << e.body_case() << ")");
      return;
  }
  afterEvent_();
}

// Every agent of a lost shard is a lost agent link: the Master keeps its
// tasks until the agent re-registers (through another shard or directly)
// or its timeout ends them.
void ShardHub::onClosed(uint64_t shard, const std::string& reason) {
  auto it = shards_.find(shard);
  if (it == shards_.end()) return;
  LOG_WARNING("shard " << shard << " (" << it->second.link->peerAddress() << ") closed: " << reason
                       << "; its " << it->second.slots.size() << " agents are disconnected");
  auto slots = std::move(it->second.slots);
  shards_.erase(it);
  for (auto& [slot, peer] : slots) {
    peers_.erase(peer);
    master_.peerClosed(peer);
  }
  afterEvent_();
}

void ShardHub::attach(uint64_t shard, ShardState& state, const shard::AgentAttached& m) {
  std::string refusal;
  if (state.slots.size() >= options_.maxAgentsPerShard) {
    refusal = "the shard holds " + std::to_string(options_.maxAgentsPerShard) + " agents already";
  } else if (state.slots.count(m.slot()) > 0) {
    refusal = "slot " + std::to_string(m.slot()) + " is attached already";
  } else if (m.name().size() > limits::kNameBytesMax || m.principal().size() > limits::kNameBytesMax ||
             m.cert_role().size() > limits::kNameBytesMax) {
    refusal = "AgentAttached: a name longer than " + std::to_string(limits::kNameBytesMax) + " bytes";
  } else if (!m.principal().empty() && m.cert_role() != certRoleFor(wire::ROLE_AGENT)) {
    refusal = "AgentAttached: certificate role '" + m.cert_role() + "' is not an agent's";
  }
  if (!refusal.empty()) {
    LOG_WARNING("shard " << shard << ": " << refusal);
    shard::ShardEnvelope e;
    e.mutable_detached()->set_slot(m.slot());
    e.mutable_detached()->set_reason(refusal);
    (void)state.link->send(e);
    return;
  }
  PeerId peer = nextPeer_++;
  state.slots[m.slot()] = peer;
  peers_[peer] = Route{shard, m.slot()};
  wire::Hello hello;
  hello.set_protocol_version(kProtocolVersion);
  hello.set_role(wire::ROLE_AGENT);
  hello.set_name(m.name());
  PeerIdentity identity;
  identity.tls = !m.principal().empty();  // the agent's own link to the shard
  identity.principal = m.principal();
  identity.certRole = m.cert_role();
  identity.via = state.link->peerHello().name();
  master_.peerConnected(peer, hello, identity);
}

void ShardHub::detach(ShardState& state, uint64_t slot) {
  auto it = state.slots.find(slot);
  if (it == state.slots.end()) return;
  PeerId peer = it->second;
  state.slots.erase(it);
  peers_.erase(peer);
  master_.peerClosed(peer);
}

void ShardHub::forward(uint64_t shard, ShardState& state, shard::AgentMessage& m) {
  auto it = state.slots.find(m.slot());
  if (it == state.slots.end()) {
    ++counts_.refused;
    LOG_WARNING("shard " << shard << " forwarded a message for slot " << m.slot()
                         << ", which it does not hold: refused");
    return;
  }
  master_.peerMessage(it->second, m.envelope());
}

void ShardHub::liveness(ShardState& state, const shard::Liveness& m) {
  if (static_cast<size_t>(m.slots_size()) > options_.maxAgentsPerShard) {
    LOG_WARNING("a shard's liveness summary names " << m.slots_size() << " slots: refused");
    ++counts_.refused;
    return;
  }
  wire::Envelope beat;
  beat.mutable_heartbeat();
  for (uint64_t slot : m.slots()) {
    auto it = state.slots.find(slot);
    if (it != state.slots.end()) master_.peerMessage(it->second, beat);
  }
  state.summaryAt = master_.clock().now();
}

TimePoint ShardHub::heardUpTo(PeerId peer, TimePoint now) const {
  auto route = peers_.find(peer);
  if (route == peers_.end()) return now;
  auto state = shards_.find(route->second.shard);
  if (state == shards_.end()) return now;
  return state->second.summaryAt;
}

void ShardHub::send(PeerId peer, const wire::Envelope& envelope) {
  // The shard answered the heartbeats a liveness summary stood for.
  if (envelope.has_heartbeat_ack()) return;
  auto route = peers_.find(peer);
  if (route == peers_.end()) return;
  auto state = shards_.find(route->second.shard);
  if (state == shards_.end()) return;
  ++counts_.messagesOut;
  (void)state->second.link->sendAgentMessage(route->second.slot, envelope);
}

// Deferred, as MasterServer::close is: the Master never sees peerClosed()
// inside the handler that decided to close.
void ShardHub::close(PeerId peer, const std::string& reason) {
  asio::post(io_, [this, peer, reason] {
    auto route = peers_.find(peer);
    if (route == peers_.end()) return;
    auto state = shards_.find(route->second.shard);
    if (state == shards_.end()) return;
    shard::ShardEnvelope e;
    e.mutable_detached()->set_slot(route->second.slot);
    e.mutable_detached()->set_reason(reason);
    (void)state->second.link->send(e);
    detach(state->second, route->second.slot);
    afterEvent_();
  });
}

std::string ShardHub::metricsText() const {
  namespace p = prometheus;
  p::Registry registry;
  auto& agents = p::BuildGauge().Name("allot_master_shard_agents")
                     .Help("Agents each linked link shard carries.").Register(registry);
  size_t linked = 0;
  for (const auto& [id, state] : shards_) {
    if (!state.link->handshaken()) continue;
    ++linked;
    agents.Add({{"shard", state.link->peerHello().name()}}).Set(static_cast<double>(state.slots.size()));
  }
  p::BuildGauge().Name("allot_master_shards").Help("Link shards linked to this master.").Register(registry)
      .Add({}).Set(static_cast<double>(linked));
  auto& messages = p::BuildCounter().Name("allot_master_shard_messages_total")
                       .Help("Messages over link shard links, from the shards (in) and to them (out).")
                       .Register(registry);
  messages.Add({{"direction", "in"}}).Increment(static_cast<double>(counts_.messagesIn));
  messages.Add({{"direction", "out"}}).Increment(static_cast<double>(counts_.messagesOut));
  p::BuildCounter().Name("allot_master_shard_refused_total")
      .Help("Messages a shard sent for agents it does not hold, refused.").Register(registry)
      .Add({}).Increment(static_cast<double>(counts_.refused));
  return p::TextSerializer().Serialize(registry.Collect());
}

}  // namespace allot
