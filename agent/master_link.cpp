#include "agent/master_link.h"

#include "base/log.h"
#include "ha/detector_factory.h"
#include "ha/zk_shard_detector.h"
#include "proto/validate.h"

namespace allot {

MasterLink::MasterLink(asio::io_context& io, Options options, Callbacks callbacks)
    : io_(io), options_(std::move(options)), callbacks_(std::move(callbacks)), heartbeatTimer_(io), shardTimer_(io) {}

MasterLink::~MasterLink() { alive_.reset(); }

Result<std::unique_ptr<LeaderDetector>> MasterLink::makeDetector() {
  std::unique_ptr<ShardDetector> detector;
  if (!options_.shardsZk.empty()) {
    auto url = parseZkUrl(options_.shardsZk);
    if (!url) return url.error();
    detector = makeZooKeeperShardDetector(io_, *url, options_.shardKey);
  } else if (!options_.shards.empty()) {
    detector = makeShardDetector(io_, options_.shards, options_.shardKey);
  } else {
    return makeLeaderDetector(io_, options_.master);
  }
  shardDetector_ = detector.get();
  return std::unique_ptr<LeaderDetector>(std::move(detector));
}

// A shard that does not answer the registration in time (down, without a
// leader, full) is passed over for the next one.
void MasterLink::watchShard() {
  if (!shardDetector_) return;
  shardTimer_.expires_after(kShardRegistrationTimeout);
  std::weak_ptr<Alive> alive = alive_;
  shardTimer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired() || registered_) return;
    LOG_WARNING("no registration through shard " << shardDetector_->current().describe() << " within "
                << std::chrono::duration<double>(kShardRegistrationTimeout).count() << " s");
    shardDetector_->advance();
    watchShard();
  });
}

Status MasterLink::start() {
  auto detector = makeDetector();
  if (!detector) return Error{"--master: " + detector.error().describe()};
  ReconnectingLink::Options lo;
  lo.localRole = wire::ROLE_AGENT;
  lo.localName = options_.name;
  lo.peerRole = wire::ROLE_MASTER;
  lo.tls = options_.tls;
  // A link shard speaks for the master with a certificate of its own role.
  if (!options_.shards.empty() || !options_.shardsZk.empty()) lo.peerCertRole = "shard";
  lo.backoffMin = options_.reconnectMin;
  lo.backoffMax = options_.reconnectMax;
  ReconnectingLink::Callbacks lc;
  lc.onConnected = [this](const wire::Hello&) { onConnected(); };
  lc.onMessage = [this](wire::Envelope& e) { onMessage(e); };
  lc.onDisconnected = [this](const std::string& reason) { onDisconnected(reason); };
  link_ = std::make_unique<ReconnectingLink>(io_, std::move(*detector), lo, lc);
  link_->start();
  watchShard();
  return okStatus();
}

void MasterLink::stop() {
  registered_ = false;
  heartbeatTimer_.cancel();
  shardTimer_.cancel();
  if (link_) link_->stop();
}

Status MasterLink::send(const wire::Envelope& envelope) {
  if (!registered_ || !link_) return Error{"not registered with the master"};
  Status sent = link_->send(envelope);
  if (sent) sent_ = true;
  return sent;
}

void MasterLink::onConnected() {
  wire::Envelope e;
  callbacks_.buildRegistration(e.mutable_register_agent());
  (void)link_->send(e);
}

void MasterLink::onMessage(wire::Envelope& e) {
  heard();
  if (Status valid = validateFromMaster(e); !valid) {
    LOG_WARNING("refused a message from the master: " << valid.error().describe());
    if (callbacks_.onRefused) callbacks_.onRefused(e, valid.error());
    return;
  }
  if (e.has_agent_registered()) {
    // Unasked, from a master other than ours: our shard handed us to a
    // new leader with the report it keeps of us, which is current (every
    // message of ours and of the leader's for us passed through it), so
    // the new leader holds our state already. What it may lack are the
    // updates sent while the shard had no leader: onRegistered sends every
    // unacknowledged one again, as after any registration.
    bool handedOver = registered_ && e.agent_registered().master_id() != masterId_;
    masterId_ = e.agent_registered().master_id();
    registered_ = true;
    ++registrations_;
    link_->registered();
    double interval = e.agent_registered().heartbeat_interval_s();
    heartbeatInterval_ = secondsToDuration(interval > 0 ? interval : 1);
    scheduleBeat();
    if (handedOver) LOG_INFO("handed to master " << masterId_ << " by the shard, with the state it kept");
    callbacks_.onRegistered(e.agent_registered());
    return;
  }
  if (e.has_heartbeat_ack()) return;  // heard() counted it
  if (e.has_error()) {
    LOG_ERROR("master says: " << e.error().message());
    return;
  }
  callbacks_.onMessage(e);
}

void MasterLink::onDisconnected(const std::string& reason) {
  bool was = registered_;
  registered_ = false;
  heartbeatTimer_.cancel();
  if (was) LOG_WARNING("link to master closed: " << reason << "; re-registering");
  if (was && shardDetector_) {
    shardDetector_->advance();
    watchShard();
  }
  if (was && callbacks_.onDisconnected) callbacks_.onDisconnected(reason);
}

// Even a frame that fails validation shows the peer alive.
void MasterLink::heard() {
  heard_ = true;
  unanswered_ = 0;
}

// One wakeup per interval, whatever the traffic: its flags say whether the
// interval needs a heartbeat.
void MasterLink::scheduleBeat() {
  sent_ = heard_ = false;
  heartbeatTimer_.expires_after(heartbeatInterval_);
  std::weak_ptr<Alive> alive = alive_;
  heartbeatTimer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired() || !registered_) return;
    if (!sent_ || !heard_) {
      if (unanswered_ >= kMissedHeartbeatsMax) {
        link_->drop("master did not answer " + std::to_string(kMissedHeartbeatsMax) + " heartbeats");
        return;
      }
      beat();
    }
    scheduleBeat();
  });
}

void MasterLink::beat() {
  wire::Envelope e;
  e.mutable_heartbeat()->set_sequence(++sequence_);
  (void)link_->send(e);
  ++unanswered_;
}

}  // namespace allot
