#include "master/server.h"

#include <poll.h>

#include "base/log.h"
#include "diag/loop_stall_meter.h"

namespace allot {

LoopSections makeMasterLoopSections() {
  // In the order of LoopSection.
  return LoopSections({"message", "peer change", "tick", "allocate", "accept", "state slice",
                       "state pieces", "metrics", "roles"});
}

void MasterServer::loopTicked(const LoopStallMeter& meter, double lateS) {
  auto taken = master_->metrics().loop().meterTicked(meter, lateS, sections_);
  if (!taken) return;
  double cpuWaitS = meter.lastCpuWaitMs() / 1000;
  uint64_t tick = meter.stats().ticks;
  auto now = std::chrono::steady_clock::now();
  if (now - lastLateLog_ < std::chrono::seconds(1) && lateS <= lastLateLoggedS_) return;
  lastLateLog_ = now;
  lastLateLoggedS_ = lateS;
  LOG_WARNING("loop tick #" << tick << " " << lateS * 1000 << " ms late, " << cpuWaitS * 1000
                            << " ms of it waiting for a CPU; timed since the previous tick: "
                            << taken->describe());
}

Result<std::unique_ptr<MasterServer>> MasterServer::create(asio::io_context& io,
                                                           ServerOptions options,
                                                           MasterOptions masterOptions) {
  std::unique_ptr<MasterServer> server(new MasterServer(io, options));
  auto master = Master::create(std::move(masterOptions), server->clock_, *server);
  if (!master) return master.error();
  server->master_ = std::move(*master);
  server->master_->metrics().loop().exportSections(&server->sections_);
  server->roleSettings_ = std::make_unique<RoleSettingsKeeper>(io, *server->master_);

  if (Status st = listenTcp(server->acceptor_, options.listen, "--listen"); !st) return st.error();
  // acceptPending() takes what the backlog holds without blocking.
  boost::system::error_code ec;
  server->acceptor_.non_blocking(true, ec);
  if (ec) return Error{"cannot make the listener non-blocking: " + ec.message(), ec.value()};
  server->port_ = server->acceptor_.local_endpoint().port();
  if (!options.shardListen.host.empty()) {
    ShardHub::Options hub;
    hub.listen = options.shardListen;
    hub.tls = options.tls;
    hub.maxFrameBytes = options.maxFrameBytes;
    hub.handshakeTimeout = options.handshakeTimeout;
    MasterServer* raw = server.get();
    server->shards_ = std::make_unique<ShardHub>(io, hub, *server->master_, [raw] { raw->afterEvent(); });
    if (Status st = server->shards_->listen(); !st) return st.error();
  }
  return server;
}

MasterServer::MasterServer(asio::io_context& io, ServerOptions options)
    : io_(io), options_(std::move(options)), acceptor_(io), tickTimer_(io), statsTimer_(io), acceptPause_(io) {}

void MasterServer::start() {
  LOG_INFO("master " << master_->masterId() << " listening on " << options_.listen.host << ":"
                     << port_ << " (leader epoch " << options_.leaderEpoch << ", "
                     << (options_.tls ? "mutual TLS)" : "plaintext)"));
  acceptNext();
  if (shards_) shards_->start(options_.leaderEpoch);
  scheduleTick();
  statsSince_ = clock_.now();
  if (options_.statsInterval > Duration::zero()) scheduleStats();
}

void MasterServer::scheduleStats() {
  statsTimer_.expires_after(options_.statsInterval);
  statsTimer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    TimePoint now = clock_.now();
    double seconds = std::chrono::duration<double>(now - statsSince_).count();
    LOG_INFO("stats: peers=" << connections_.size() << " pending_handshakes="
                             << pendingHandshakes_ << " agents=" << master_->agentCount()
                             << " frameworks=" << master_->frameworkCount()
                             << " tasks=" << master_->taskCount()
                             << " offers=" << master_->offerCount()
                             << " msgs_in_per_s=" << static_cast<uint64_t>(messagesIn_ / seconds)
                             << " msgs_out_per_s=" << static_cast<uint64_t>(messagesOut_ / seconds));
    messagesIn_ = messagesOut_ = 0;
    statsSince_ = now;
    scheduleStats();
  });
}

void MasterServer::stop() {
  stopped_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  tickTimer_.cancel();
  statsTimer_.cancel();
  acceptPause_.cancel();
  if (shards_) shards_->stop();
  // The peers are closed without the master's per-peer bookkeeping (offers
  // rescinded, agents marked disconnected, a log line each): this master
  // is going away, and a leader stepping down for a successor should drop
  // 10,000 links in milliseconds, not spend the successor's first second
  // (on the same host: its CPU) on state nobody will read. onClose finds
  // nothing in connections_ and returns.
  auto connections = std::move(connections_);
  connections_.clear();
  if (!connections.empty()) LOG_INFO("closing " << connections.size() << " peer connections");
  for (auto& [peer, conn] : connections) conn->close("master shutting down");
}

bool MasterServer::acceptAllowed() const {
  return pendingHandshakes_ < options_.maxPendingHandshakes;
}

// At the limit no accept is outstanding: new connections wait in the
// listen backlog (the kernel completes their TCP handshake) instead of
// being accepted and starved of CPU by the handshakes already running.
// handshakeEnded() resumes.
void MasterServer::acceptNext() {
  if (stopped_) return;
  if (!acceptAllowed()) {
    if (!acceptPaused_) master_->metrics().acceptPauses().Increment();
    acceptPaused_ = true;
    return;
  }
  acceptor_.async_accept([this](const boost::system::error_code& ec,
                                asio::ip::tcp::socket socket) {
    if (stopped_) return;
    if (!ec) {
      auto timed = this->timed(LoopSection::kAccept);
      onAccepted(std::move(socket));
      acceptPending();
      return acceptNext();
    }
    if (ec == asio::error::operation_aborted) return;
    // EMFILE and friends: the pending connection stays in the backlog, so
    // accepting again at once would spin. Pause, then try again.
    LOG_WARNING("accept failed: " << ec.message() << "; retrying in 100 ms");
    acceptPause_.expires_after(std::chrono::milliseconds(100));
    acceptPause_.async_wait([this](const boost::system::error_code& e) {
      if (!e && !stopped_) acceptNext();
    });
  });
}

// Drains the backlog (up to kAcceptBatch, and while below the pending
// handshake limit) without going back to the loop. Any error (would_block:
// the backlog is empty; EMFILE and friends) ends the batch: the
// asynchronous accept that follows reports and paces the rest.
void MasterServer::acceptPending() {
  for (int i = 0; i < kAcceptBatch && !stopped_ && acceptAllowed(); ++i) {
    boost::system::error_code ec;
    asio::ip::tcp::socket socket(io_);
    acceptor_.accept(socket, ec);
    if (ec) return;
    onAccepted(std::move(socket));
  }
}

void MasterServer::handshakeEnded() {
  --pendingHandshakes_;
  master_->metrics().pendingHandshakes().Set(static_cast<double>(pendingHandshakes_));
  if (acceptPaused_ && !stopped_ && acceptAllowed()) {
    acceptPaused_ = false;
    acceptNext();
  }
}

namespace {
// A peer that gave up while its connection waited in the backlog (its own
// handshake timeout, a reconnect storm) has already sent FIN: serving it
// would spend a TLS handshake's CPU on nobody.
bool peerGaveUp(asio::ip::tcp::socket& socket) {
  pollfd p{socket.native_handle(), POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}
}  // namespace

void MasterServer::onAccepted(asio::ip::tcp::socket socket) {
  if (connections_.size() >= options_.maxPeers) {
    LOG_WARNING("refusing a connection: " << options_.maxPeers << " peers already");
    return;
  }
  if (peerGaveUp(socket)) {
    master_->metrics().connectionsAbandoned().Increment();
    return;
  }
  boost::system::error_code ignored;
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  Connection::Options copts;
  copts.localRole = wire::ROLE_MASTER;
  copts.localName = "allot-master " + master_->masterId();
  copts.acceptRoles = {wire::ROLE_SCHEDULER, wire::ROLE_AGENT};
  copts.maxFrameBytes = options_.maxFrameBytes;
  copts.leaderEpoch = options_.leaderEpoch;
  copts.tls = options_.tls;
  copts.tlsSide = TlsSide::kServer;
  copts.handshakeTimeout = options_.handshakeTimeout;
  auto conn = Connection::create(std::move(socket), copts);
  PeerId peer = nextPeer_++;
  connections_[peer] = conn;
  ++pendingHandshakes_;
  pendingHandshakesMax_ = std::max(pendingHandshakesMax_, pendingHandshakes_);
  master_->metrics().pendingHandshakes().Set(static_cast<double>(pendingHandshakes_));
  master_->metrics().pendingHandshakesMax().Set(static_cast<double>(pendingHandshakesMax_));
  Connection::Handlers handlers;
  handlers.onHello = [this, peer, weak = std::weak_ptr<Connection>(conn)](const wire::Hello& hello) {
    auto timed = this->timed(LoopSection::kPeerChange);
    handshakeEnded();
    auto conn = weak.lock();
    master_->peerConnected(peer, hello, conn ? conn->peer() : PeerIdentity{});
  };
  handlers.onMessage = [this, peer](wire::Envelope& e) {
    auto timed = this->timed(LoopSection::kMessage);
    ++messagesIn_;
    master_->metrics().messagesIn().Increment();
    master_->peerMessage(peer, e);
    afterEvent();
  };
  handlers.onClose = [this, peer](const std::string& reason) {
    auto it = connections_.find(peer);
    if (it == connections_.end()) return;
    auto timed = this->timed(LoopSection::kPeerChange);
    LOG_DEBUG("peer " << peer << " (" << it->second->peerAddress() << ") closed: " << reason);
    bool pending = !it->second->handshaken();
    connections_.erase(it);
    if (pending) handshakeEnded();
    master_->peerClosed(peer);
    afterEvent();
  };
  conn->start(std::move(handlers));
}

void MasterServer::send(PeerId peer, const wire::Envelope& envelope) {
  if (shards_ && ShardHub::ownsPeer(peer)) return shards_->send(peer, envelope);
  auto it = connections_.find(peer);
  if (it == connections_.end()) return;
  ++messagesOut_;
  master_->metrics().messagesOut().Increment();
  if (auto st = it->second->send(envelope); !st) {
    LOG_WARNING("cannot send to peer " << peer << ": " << st.error().describe());
  }
}

// Deferred so the master never sees peerClosed() while it is still
// handling the event that decided to close.
void MasterServer::close(PeerId peer, const std::string& reason) {
  if (shards_ && ShardHub::ownsPeer(peer)) return shards_->close(peer, reason);
  asio::post(io_, [this, peer, reason] {
    auto it = connections_.find(peer);
    if (it != connections_.end()) it->second->close(reason);
  });
}

TimePoint MasterServer::heardUpTo(PeerId peer, TimePoint now) const {
  if (shards_ && ShardHub::ownsPeer(peer)) return shards_->heardUpTo(peer, now);
  return now;
}

void MasterServer::afterEvent() {
  if (allocationPosted_ || !master_->allocationPending()) return;
  allocationPosted_ = true;
  asio::post(io_, [this] {
    allocationPosted_ = false;
    auto timed = this->timed(LoopSection::kAllocate);
    if (!stopped_) master_->allocate();
  });
}

void MasterServer::scheduleTick() {
  tickTimer_.expires_after(kTickInterval);
  tickTimer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    auto timed = this->timed(LoopSection::kTick);
    master_->tick();
    afterEvent();
    scheduleTick();
  });
}

}  // namespace allot
