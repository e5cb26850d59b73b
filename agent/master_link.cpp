#include "agent/master_link.h"

#include "base/log.h"
#include "proto/connection.h"

namespace allot {

MasterLink::MasterLink(asio::io_context& io, Options options, Callbacks callbacks)
    : io_(io),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      reconnectTimer_(io),
      heartbeatTimer_(io),
      backoff_(options_.reconnectMin) {}

MasterLink::~MasterLink() {
  alive_.reset();
  if (connection_) connection_->close("agent stopping");
}

void MasterLink::start() {
  stopped_ = false;
  connect();
}

void MasterLink::stop() {
  stopped_ = true;
  registered_ = false;
  reconnectTimer_.cancel();
  heartbeatTimer_.cancel();
  if (connection_) connection_->closeAfterFlush("agent stopping");
}

Status MasterLink::send(const wire::Envelope& envelope) {
  if (!registered_ || !connection_) return Error{"not registered with the master"};
  return connection_->send(envelope);
}

void MasterLink::connect() {
  std::weak_ptr<Alive> alive = alive_;
  asyncConnect(io_, options_.host, options_.port, [this, alive](Result<asio::ip::tcp::socket> s) {
    if (alive.expired() || stopped_) return;
    if (!s) {
      LOG_DEBUG("master " << options_.host << ":" << options_.port << ": " << s.error().describe());
      scheduleReconnect();
      return;
    }
    onConnected(std::move(*s));
  });
}

void MasterLink::onConnected(asio::ip::tcp::socket socket) {
  Connection::Options copts;
  copts.localRole = wire::ROLE_AGENT;
  copts.localName = options_.name;
  copts.acceptRoles = {wire::ROLE_MASTER};
  connection_ = Connection::create(std::move(socket), copts);
  std::weak_ptr<Alive> alive = alive_;
  Connection::Handlers h;
  h.onHello = [this, alive](const wire::Hello&) {
    if (alive.expired()) return;
    wire::Envelope e;
    callbacks_.buildRegistration(e.mutable_register_agent());
    (void)connection_->send(e);
  };
  h.onMessage = [this, alive](wire::Envelope& e) {
    if (alive.expired()) return;
    if (e.has_agent_registered()) {
      registered_ = true;
      ++registrations_;
      backoff_ = options_.reconnectMin;
      double interval = e.agent_registered().heartbeat_interval_s();
      heartbeatInterval_ = secondsToDuration(interval > 0 ? interval : 1);
      ackedSequence_ = sequence_;
      beat();
      callbacks_.onRegistered(e.agent_registered());
      return;
    }
    if (e.has_heartbeat_ack()) {
      ackedSequence_ = std::max(ackedSequence_, e.heartbeat_ack().sequence());
      return;
    }
    if (e.has_error()) {
      LOG_ERROR("master says: " << e.error().message());
      return;
    }
    callbacks_.onMessage(e);
  };
  h.onClose = [this, alive, conn = connection_.get()](const std::string& reason) {
    if (!alive.expired() && connection_.get() == conn) onClosed(reason);
  };
  connection_->start(std::move(h));
}

void MasterLink::onClosed(const std::string& reason) {
  bool was = registered_;
  registered_ = false;
  connection_.reset();
  heartbeatTimer_.cancel();
  if (was) LOG_WARNING("link to master closed: " << reason << "; re-registering");
  if (was && callbacks_.onDisconnected) callbacks_.onDisconnected(reason);
  if (!stopped_) scheduleReconnect();
}

void MasterLink::scheduleReconnect() {
  reconnectTimer_.expires_after(backoff_);
  backoff_ = std::min(backoff_ * 2, options_.reconnectMax);
  std::weak_ptr<Alive> alive = alive_;
  reconnectTimer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired() || stopped_) return;
    connect();
  });
}

void MasterLink::beat() {
  heartbeatTimer_.expires_after(heartbeatInterval_);
  std::weak_ptr<Alive> alive = alive_;
  heartbeatTimer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired() || !registered_ || !connection_) return;
    if (sequence_ - ackedSequence_ >= static_cast<uint64_t>(kMissedHeartbeatsMax)) {
      connection_->close("master did not answer " + std::to_string(kMissedHeartbeatsMax) +
                         " heartbeats");
      return;
    }
    wire::Envelope e;
    e.mutable_heartbeat()->set_sequence(++sequence_);
    (void)connection_->send(e);
    beat();
  });
}

}  // namespace allot
