#include "proto/reconnecting_link.h"

#include "base/log.h"

namespace allot {

Backoff::Backoff(Duration min, Duration max, uint64_t seed)
    : min_(min),
      max_(std::max(min, max)),
      bound_(min),
      random_(seed != 0 ? seed : std::random_device{}()) {}

Duration Backoff::jitter(Duration bound) {
  std::uniform_int_distribution<Duration::rep> pick(0, std::max<Duration::rep>(bound.count(), 0));
  return Duration(pick(random_));
}

Duration Backoff::next() {
  Duration wait = jitter(bound_);
  bound_ = std::min(bound_ * 2, max_);
  return wait;
}

ReconnectingLink::ReconnectingLink(asio::io_context& io, std::unique_ptr<LeaderDetector> detector,
                                   Options options, Callbacks callbacks)
    : io_(io),
      detector_(std::move(detector)),
      detectorText_(detector_->describe()),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      waitTimer_(io),
      attemptTimer_(io),
      backoff_(options_.backoffMin, options_.backoffMax, options_.seed) {}

ReconnectingLink::~ReconnectingLink() {
  alive_.reset();
  detector_.reset();
  if (connection_) connection_->close("link destroyed");
}

void ReconnectingLink::start() {
  CHECK(!started_);
  started_ = true;
  std::weak_ptr<Alive> alive = alive_;
  detector_->start([this, alive](const std::optional<Leader>& leader) {
    if (!alive.expired()) onLeader(leader);
  });
}

void ReconnectingLink::stop() {
  stopped_ = true;
  waitTimer_.cancel();
  attemptTimer_.cancel();
  ++attempt_;
  if (connection_) connection_->closeAfterFlush("link stopped");
}

Status ReconnectingLink::send(const wire::Envelope& envelope) {
  if (!connected()) return Error{"not connected to " + detectorText_};
  return connection_->send(envelope);
}

void ReconnectingLink::registered() {
  backoff_.reset();
  failures_ = 0;
}

void ReconnectingLink::drop(const std::string& reason) {
  if (connection_) connection_->close(reason);
}

void ReconnectingLink::onLeader(const std::optional<Leader>& leader) {
  if (stopped_) return;
  // Epoch 0 is no epoch (a fixed address, a link shard): only the peer's
  // Hello can be fenced then.
  if (leader && leader->epoch != 0 && leader->epoch < highestEpoch_) {
    LOG_WARNING(detectorText_ << ": ignoring leader " << leader->endpoint.describe()
                              << " with epoch " << leader->epoch << " below " << highestEpoch_);
    return;
  }
  if (leader_ == leader) return;
  bool first = !everReported_;
  everReported_ = true;
  leader_ = leader;
  fenced_ = false;
  if (leader_) highestEpoch_ = std::max(highestEpoch_, leader_->epoch);
  ++attempt_;  // an attempt in flight was for the old leader
  attemptTimer_.cancel();
  if (connection_) {
    // Closed here rather than through onLinkClosed: no backoff retry to
    // the old leader.
    std::string reason =
        leader_ ? "leader changed to " + leader_->endpoint.describe() : "no leader known";
    auto conn = std::move(connection_);
    bool was = handshaken_;
    handshaken_ = false;
    conn->close(reason);
    if (was && callbacks_.onDisconnected) callbacks_.onDisconnected(reason);
  }
  waitTimer_.cancel();
  if (!leader_) {
    LOG_WARNING(detectorText_ << ": no leading master known; waiting");
    return;
  }
  LOG_INFO(detectorText_ << ": leader is " << leader_->endpoint.describe() << " (epoch "
                         << leader_->epoch << ")");
  backoff_.reset();
  if (first) return connectNow();
  waitFor(backoff_.jitter(options_.leaderChangeSpread));
}

void ReconnectingLink::waitFor(Duration wait) {
  lastWait_ = wait;
  waitTimer_.expires_after(lastWait_);
  std::weak_ptr<Alive> alive = alive_;
  waitTimer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (!ec && !alive.expired()) connectNow();
  });
}

void ReconnectingLink::retryAfterBackoff(const std::string& why) {
  if (stopped_ || !leader_ || fenced_) return;
  ++failures_;
  waitFor(backoff_.next());
  // The first failure of a streak is worth a warning; the rest repeat it.
  if (failures_ == 1) {
    LOG_WARNING(leader_->endpoint.describe() << ": " << why << "; retrying");
  } else {
    LOG_DEBUG(leader_->endpoint.describe() << ": " << why << "; retry "
                        << failures_ << " in " << lastWait_.count() / 1000000 << " ms");
  }
}

void ReconnectingLink::connectNow() {
  if (stopped_ || !leader_ || fenced_ || connection_) return;
  uint64_t attempt = ++attempt_;
  handshaken_ = false;
  std::weak_ptr<Alive> alive = alive_;
  // Bounds the TCP connect; Connection's own timer bounds TLS + Hello.
  attemptTimer_.expires_after(options_.handshakeTimeout);
  attemptTimer_.async_wait([this, alive, attempt](const boost::system::error_code& ec) {
    if (ec || alive.expired() || attempt != attempt_ || connection_) return;
    ++attempt_;
    retryAfterBackoff("connect timed out");
  });
  const Endpoint& to = leader_->endpoint;
  if (to.kind == Endpoint::Kind::kUnix) {
    auto socket = std::make_shared<asio::local::stream_protocol::socket>(io_);
    socket->async_connect(
        asio::local::stream_protocol::endpoint(to.path),
        [this, alive, attempt, socket, where = to.describe()](const boost::system::error_code& ec) {
          if (alive.expired() || attempt != attempt_) return;
          if (ec) return retryAfterBackoff("cannot connect to " + where + ": " + ec.message());
          onSocket(attempt, StreamSocket(std::move(*socket)));
        });
    return;
  }
  asyncConnect(io_, to.host, to.port, [this, alive, attempt](Result<asio::ip::tcp::socket> s) {
    if (alive.expired() || attempt != attempt_) return;
    if (!s) return retryAfterBackoff(s.error().describe());
    boost::system::error_code ignored;
    s->set_option(asio::ip::tcp::no_delay(true), ignored);
    onSocket(attempt, StreamSocket(std::move(*s)));
  });
}

void ReconnectingLink::onSocket(uint64_t attempt, StreamSocket socket) {
  attemptTimer_.cancel();
  if (stopped_) return;
  Connection::Options o;
  o.localRole = options_.localRole;
  o.localName = options_.localName;
  o.acceptRoles = {options_.peerRole};
  o.tls = options_.tls;
  o.tlsSide = TlsSide::kClient;
  o.requirePeerCertRole = options_.peerCertRole;
  o.peerHelloCertRole = options_.peerCertRole;
  o.handshakeTimeout = options_.handshakeTimeout;
  o.maxFrameBytes = options_.maxFrameBytes;
  connection_ = Connection::create(std::move(socket), o);
  Connection* conn = connection_.get();
  std::weak_ptr<Alive> alive = alive_;
  Connection::Handlers h;
  h.onHello = [this, alive, conn](const wire::Hello& hello) {
    if (!alive.expired()) onHello(conn, hello);
  };
  h.onMessage = [this, alive](wire::Envelope& e) {
    if (!alive.expired() && callbacks_.onMessage) callbacks_.onMessage(e);
  };
  h.onClose = [this, alive, conn](const std::string& reason) {
    if (!alive.expired()) onLinkClosed(conn, reason);
  };
  // Queued before start(): it leaves in the Hello's write.
  if (callbacks_.firstMessage) (void)connection_->send(callbacks_.firstMessage());
  connection_->start(std::move(h));
}

void ReconnectingLink::onHello(Connection* conn, const wire::Hello& hello) {
  if (conn != connection_.get()) return;
  if (hello.leader_epoch() < highestEpoch_) {
    std::string reason = "master " + conn->peerAddress() + " has leader epoch " +
                         std::to_string(hello.leader_epoch()) + ", below the highest seen (" +
                         std::to_string(highestEpoch_) + "); waiting for a new leader";
    LOG_WARNING(detectorText_ << ": " << reason);
    fenced_ = true;
    conn->close(reason);
    return;
  }
  highestEpoch_ = hello.leader_epoch();
  handshaken_ = true;
  if (callbacks_.onConnected) callbacks_.onConnected(hello);
}

void ReconnectingLink::onLinkClosed(Connection* conn, const std::string& reason) {
  if (conn != connection_.get()) return;
  bool was = handshaken_;
  connection_.reset();
  handshaken_ = false;
  if (stopped_) return;
  if (was && callbacks_.onDisconnected) callbacks_.onDisconnected(reason);
  retryAfterBackoff(was ? "link lost: " + reason : reason);
}

}  // namespace allot
