// ShardMetrics: a link shard's Prometheus metrics (prometheus-cpp core),
// served by its GET /metrics (shard/http_api.h):
//   allot_shard_agents                    agent links held (gauge)
//   allot_shard_leader_linked             1 while the leader link is up
//   allot_shard_handshakes_total          agent handshakes completed (rate(): per second)
//   allot_shard_forwarded_messages_total  {direction="to_leader"|"to_agents"}
//   allot_shard_forwarded_bytes_total     the same, in encoded bytes
//   allot_shard_heartbeats_answered_total heartbeats the shard answered itself
// Gauges are set when scraped.
//
// Thread: the shard's loop thread.
#pragma once

#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace allot {

class ShardMetrics {
 public:
  ShardMetrics();

  void handshake() { handshakes_->Increment(); }
  void toLeader(size_t bytes);
  void toAgent(size_t bytes);
  void heartbeatAnswered() { heartbeats_->Increment(); }

  prometheus::Gauge& agents() { return *agents_; }
  prometheus::Gauge& leaderLinked() { return *leaderLinked_; }
  std::string serialize() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* agents_;
  prometheus::Gauge* leaderLinked_;
  prometheus::Counter* handshakes_;
  prometheus::Counter* heartbeats_;
  prometheus::Counter* messagesToLeader_;
  prometheus::Counter* messagesToAgents_;
  prometheus::Counter* bytesToLeader_;
  prometheus::Counter* bytesToAgents_;
};

}  // namespace allot
