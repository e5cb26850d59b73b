#include "shard/shard.h"

#include "base/log.h"
#include "ha/detector_factory.h"
#include "proto/validate.h"

namespace allot {

Result<std::unique_ptr<LinkShard>> LinkShard::create(asio::io_context& io, ShardOptions options) {
  std::unique_ptr<LinkShard> shard(new LinkShard(io, std::move(options)));
  if (Status st = listenTcp(shard->acceptor_, shard->options_.listen, "--listen"); !st) return st.error();
  shard->port_ = shard->acceptor_.local_endpoint().port();
  HostPort& advertise = shard->options_.advertise;
  if (advertise.host.empty()) advertise = HostPort{shard->options_.listen.host, shard->port_};
  if (shard->options_.name.empty()) shard->options_.name = advertise.host + ":" + std::to_string(advertise.port);
  if (!shard->options_.announce.empty() && (advertise.host == "0.0.0.0" || advertise.host == "::")) {
    return Error{"--zk-announce: --listen " + advertise.host + " is not an address agents can reach: give --advertise"};
  }
  auto detector = makeLeaderDetector(io, shard->options_.master);
  if (!detector) return Error{"--master: " + detector.error().describe()};
  shard->detector_ = std::move(*detector);
  return shard;
}

LinkShard::LinkShard(asio::io_context& io, ShardOptions options)
    : io_(io),
      options_(std::move(options)),
      acceptor_(io),
      retryTimer_(io),
      livenessTimer_(io),
      graceTimer_(io),
      backoff_(std::chrono::milliseconds(100), std::chrono::seconds(2), 0),
      fold_(options_.maxAgents) {}

void LinkShard::start() {
  LOG_INFO("link shard " << options_.name << " listening for agents on " << options_.listen.host << ":" << port_
                         << ", leader from " << detector_->describe());
  detector_->start([this](const std::optional<Leader>& leader) { onLeaderReported(leader); });
  if (!options_.announce.empty()) announce();
  acceptNext();
  scheduleLiveness();
}

void LinkShard::stop() {
  stopped_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  retryTimer_.cancel();
  livenessTimer_.cancel();
  graceTimer_.cancel();
  detector_.reset();
  announcement_.reset();  // its ephemeral member goes with the session
  closeAgents("shard shutting down");
  if (leader_) leader_->close("shard shutting down");
}

// A member of the announcement group, as masters are of theirs. Being
// "elected" there means nothing to a shard; an announcement that ends
// (session expired, member gone) is made again.
void LinkShard::announce() {
  auto url = parseZkUrl(options_.announce);
  auto sessions = url ? zooKeeperSessionFactory(io_, url->servers, kAnnounceSessionTimeout)
                      : Result<ZkSessionFactory>(url.error());
  if (!sessions) {
    LOG_ERROR("--zk-announce: " << sessions.error().describe());
    return;
  }
  Endpoint address{Endpoint::Kind::kTcp, options_.advertise.host, options_.advertise.port, ""};
  LeaderContender::Callbacks cb;
  cb.elected = [](uint64_t) {};
  cb.lost = [this](const std::string& why) {
    LOG_WARNING("the shard's announcement ended (" << why << "); announcing again");
    asio::post(io_, [this] {
      if (!stopped_) announce();
    });
  };
  cb.refused = [](const std::string& why) { LOG_ERROR("ZooKeeper refused the shard's announcement: " << why); };
  announcement_ = std::make_unique<LeaderContender>(io_, std::move(*sessions), url->path,
                                                    MemberData{address, options_.name, std::nullopt, std::nullopt}, cb);
  announcement_->start();
}

// ------------------------------------------------------------------ leader

// A fixed --master names the --shard-listen itself; a leader found in
// ZooKeeper publishes it beside its address.
void LinkShard::onLeaderReported(const std::optional<Leader>& leader) {
  std::optional<Endpoint> target;
  if (leader) target = leader->epoch == 0 ? std::optional<Endpoint>(leader->endpoint) : leader->shards;
  if (leader && !target) LOG_WARNING("the leader " << leader->endpoint.describe() << " takes no link shards");
  if (target == target_) return;
  target_ = target;
  ++targetGeneration_;
  retryTimer_.cancel();
  backoff_.reset();
  if (leader_) leader_->close("the leader changed");  // onLeaderClosed reconnects
  else connectLeader();
}

void LinkShard::connectLeader() {
  if (stopped_ || !target_ || leader_) return;
  uint64_t generation = targetGeneration_;
  asyncConnect(io_, target_->host, target_->port, [this, generation](Result<asio::ip::tcp::socket> socket) {
    if (stopped_ || generation != targetGeneration_ || leader_) return;
    if (!socket) return retryLeader(socket.error().describe());
    ShardLink::Options o;
    o.localName = options_.name;
    o.tls = options_.masterTls;
    o.tlsSide = TlsSide::kClient;
    o.requirePeerCertRole = "master";
    o.handshakeTimeout = options_.handshakeTimeout;
    leader_ = ShardLink::create(std::move(*socket), o);
    ShardLink::Handlers h;
    h.onHello = [this](const shard::ShardHello& hello) { onLeaderHello(hello); };
    h.onMessage = [this](shard::ShardEnvelope& e) { onLeaderMessage(e); };
    h.onClose = [this](const std::string& reason) { onLeaderClosed(reason); };
    leader_->start(std::move(h));
  });
}

void LinkShard::retryLeader(const std::string& why) {
  Duration wait = backoff_.next();
  LOG_WARNING("leader link: " << why << "; retrying in "
                              << std::chrono::duration_cast<std::chrono::milliseconds>(wait).count()
                              << " ms");
  retryTimer_.expires_after(wait);
  retryTimer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) connectLeader();
  });
}

void LinkShard::onLeaderHello(const shard::ShardHello& hello) {
  backoff_.reset();
  graceTimer_.cancel();
  leaderEpoch_ = hello.leader_epoch();
  LOG_INFO("linked to the leader " << hello.name() << " (epoch " << leaderEpoch_ << ")");
  handOver();
}

// Every agent held goes to the new leader as the old one had it: attached,
// then its kept report as its registration. Slots are per leader link, so
// the same slots serve.
void LinkShard::handOver() {
  size_t handed = 0;
  handing_.clear();
  handoverStart_ = std::chrono::steady_clock::now();
  for (const auto& [slot, conn] : agents_) {
    if (!conn->handshaken()) continue;
    sendLeader(attachedEnvelope(slot, *conn));
    if (const wire::RegisterAgent* report = fold_.report(slot)) {
      shard::ShardEnvelope e;
      e.mutable_agent_message()->set_slot(slot);
      *e.mutable_agent_message()->mutable_envelope()->mutable_register_agent() = *report;
      sendLeader(e);
      handing_.insert(slot);
    }
    ++handed;
  }
  handingTotal_ = handing_.size();
  if (handed > 0) LOG_INFO("handed " << handed << " agents to the leader");
}

// The leader answered the report handed over for `slot` (or the agent
// left): once every one is, the leader holds every agent's state.
void LinkShard::handoverAnswered(Slot slot) {
  if (handing_.erase(slot) == 0 || !handing_.empty()) return;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - handoverStart_);
  LOG_INFO("the leader registered every agent handed over (" << handingTotal_ << ") " << ms.count()
                                                               << " ms after the handover");
}

void LinkShard::onLeaderClosed(const std::string& reason) {
  leader_.reset();
  handing_.clear();
  fold_.leaderLost();
  if (stopped_) return;
  LOG_WARNING("lost the leader link: " << reason << "; holding " << agents_.size() << " agents");
  startGrace();
  if (target_) retryLeader("lost: " + reason);
}

void LinkShard::startGrace() {
  graceTimer_.expires_after(options_.leaderGrace);
  graceTimer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_ || leaderConnected()) return;
    std::string why = "no leader for " + std::to_string(std::chrono::duration<double>(options_.leaderGrace).count()) + " s";
    if (!agents_.empty()) LOG_WARNING(why << ": letting " << agents_.size() << " agents go");
    closeAgents("the shard has had " + why);
  });
}

void LinkShard::sendLeader(const shard::ShardEnvelope& e) {
  if (!leaderConnected()) return;
  // Framing computed the size: read, not walked again.
  if (leader_->send(e)) metrics_.toLeader(e.GetCachedSize());
}

// The leader names slots this shard gave it; a slot whose agent has gone
// since is answered by the AgentDetached already on its way.
void LinkShard::onLeaderMessage(shard::ShardEnvelope& e) {
  if (e.has_agent_message()) {
    auto it = agents_.find(e.agent_message().slot());
    if (it == agents_.end()) return;
    const wire::Envelope& m = e.agent_message().envelope();
    if (m.has_agent_registered()) {
      bool passOn = fold_.registered(it->first, m.agent_registered());
      handoverAnswered(it->first);
      if (!passOn) return;
    }
    if (m.has_run_task()) fold_.launched(it->first, m.run_task());
    if (m.has_status_acknowledgement()) fold_.acknowledged(it->first, m.status_acknowledgement());
    sendAgent(*it->second, m, agentMessageEnvelopeBytes(leader_->frame(), it->first));
    return;
  }
  if (e.has_detached()) {
    auto it = agents_.find(e.detached().slot());
    if (it != agents_.end()) it->second->closeAfterFlush("the master closed the link: " + e.detached().reason());
    return;
  }
  LOG_WARNING("unexpected message from the leader (field " << e.body_case() << ")");
}

// ------------------------------------------------------------------ agents

// The leader's message for an agent goes on as it arrived when its bytes
// are at hand (`raw`, what `m` parsed from), else serialized again.
void LinkShard::sendAgent(Connection& conn, const wire::Envelope& m, std::string_view raw) {
  if (!raw.empty() && m.body_case() != wire::Envelope::BODY_NOT_SET) {
    if (conn.sendSerialized(raw)) metrics_.toAgent(raw.size());
    return;
  }
  if (conn.send(m)) metrics_.toAgent(m.GetCachedSize());
}

void LinkShard::acceptNext() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, asio::ip::tcp::socket socket) {
    if (stopped_ || ec == asio::error::operation_aborted) return;
    if (!ec) {
      onAccepted(std::move(socket));
      return acceptNext();
    }
    LOG_WARNING("accept failed: " << ec.message() << "; retrying in 100 ms");
    retryTimer_.expires_after(std::chrono::milliseconds(100));
    retryTimer_.async_wait([this](const boost::system::error_code& e) {
      if (!e) acceptNext();
    });
  });
}

void LinkShard::onAccepted(asio::ip::tcp::socket socket) {
  // Without a leader, or full, the agent is turned away at once: its own
  // backoff brings it back or on to another shard.
  if (!leaderConnected() || agents_.size() >= options_.maxAgents) return;
  Connection::Options o;
  o.localRole = wire::ROLE_MASTER;
  o.localName = options_.name;
  o.acceptRoles = {wire::ROLE_AGENT};
  o.leaderEpoch = leaderEpoch_;
  o.tls = options_.agentTls;
  o.tlsSide = TlsSide::kServer;
  o.requirePeerCertRole = certRoleFor(wire::ROLE_AGENT);
  o.handshakeTimeout = options_.handshakeTimeout;
  o.coalesceWrites = true;
  auto conn = Connection::create(std::move(socket), o);
  Slot slot = nextSlot_++;
  agents_[slot] = conn;
  Connection::Handlers h;
  h.onHello = [this, slot](const wire::Hello&) { agentHello(slot); };
  h.onMessage = [this, slot](wire::Envelope& e) { agentMessage(slot, e); };
  h.onClose = [this, slot](const std::string& reason) { agentClosed(slot, reason); };
  conn->start(std::move(h));
}

void LinkShard::agentHello(Slot slot) {
  auto it = agents_.find(slot);
  if (it == agents_.end()) return;
  const std::string& principal = it->second->peer().principal;
  if (!options_.acls.registerAgent(principal)) {
    return refuseAgent(slot, "principal '" + principal + "' may not register agents");
  }
  if (Status st = fold_.attach(slot); !st) return refuseAgent(slot, st.error().describe());
  metrics_.handshake();
  sendLeader(attachedEnvelope(slot, *it->second));
}

shard::ShardEnvelope LinkShard::attachedEnvelope(Slot slot, const Connection& conn) const {
  shard::ShardEnvelope e;
  auto* attached = e.mutable_attached();
  attached->set_slot(slot);
  attached->set_name(conn.peerHello().name());
  attached->set_principal(conn.peer().principal);
  attached->set_cert_role(conn.peer().certRole);
  return e;
}

// The agent hears why (logged on its side) before its link closes.
void LinkShard::refuseAgent(Slot slot, const std::string& reason) {
  auto it = agents_.find(slot);
  if (it == agents_.end()) return;
  LOG_WARNING("refusing agent slot " << slot << " (" << it->second->peerAddress() << ", "
                                     << it->second->peer().describe() << "): " << reason);
  wire::Envelope error;
  error.mutable_error()->set_message(reason);
  (void)it->second->send(error);
  it->second->closeAfterFlush(reason);
}

void LinkShard::agentMessage(Slot slot, wire::Envelope& e) {
  auto it = agents_.find(slot);
  if (it == agents_.end()) return;
  if (Status valid = validateFromAgent(e); !valid) {
    LOG_WARNING("refused a message from agent slot " << slot << ": " << valid.error().describe());
    wire::Envelope error;
    error.mutable_error()->set_message(valid.error().describe());
    (void)it->second->send(error);
    return;
  }
  wire::Envelope answer;
  switch (fold_.fold(slot, e, &answer)) {
    case FoldAction::kAnswer:
      if (answer.has_heartbeat_ack()) metrics_.heartbeatAnswered();
      (void)it->second->send(answer);
      return;
    case FoldAction::kDrop: return;
    case FoldAction::kForward: break;
  }
  // Forwarded as it arrived: the bytes parsed into `e`, not `e` serialized
  // again. The link keeps no copy until its next frame (a registration
  // may be large).
  std::string_view raw = it->second->frame();
  if (leaderConnected() && leader_->sendAgentMessage(slot, raw)) {
    metrics_.toLeader(agentMessagePayloadBytes(slot, raw.size()));
  }
  e.Clear();
}

void LinkShard::agentClosed(Slot slot, const std::string& reason) {
  auto it = agents_.find(slot);
  if (it == agents_.end()) return;
  bool attached = it->second->handshaken();
  agents_.erase(it);
  fold_.detach(slot);
  handoverAnswered(slot);
  if (!attached) return;
  shard::ShardEnvelope e;
  e.mutable_detached()->set_slot(slot);
  e.mutable_detached()->set_reason(reason);
  sendLeader(e);
}

void LinkShard::closeAgents(const std::string& reason) {
  auto agents = std::move(agents_);
  agents_.clear();
  for (auto& [slot, conn] : agents) {
    fold_.detach(slot);
    conn->close(reason);
  }
}

void LinkShard::scheduleLiveness() {
  livenessTimer_.expires_after(options_.livenessInterval);
  livenessTimer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    // Sent even when empty: the leader counts its agents' silence only up
    // to the latest summary it handled, so summaries must keep coming.
    std::vector<Slot> heard = fold_.takeLiveness();
    shard::ShardEnvelope e;
    e.mutable_liveness()->mutable_slots()->Assign(heard.begin(), heard.end());
    sendLeader(e);
    scheduleLiveness();
  });
}

}  // namespace allot
