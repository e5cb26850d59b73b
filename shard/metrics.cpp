#include "shard/metrics.h"

#include <prometheus/text_serializer.h>

namespace allot {

namespace p = prometheus;

namespace {

p::Gauge* addGauge(p::Registry& registry, const char* name, const char* help) {
  return &p::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

p::Counter* addCounter(p::Registry& registry, const char* name, const char* help) {
  return &p::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

ShardMetrics::ShardMetrics() : registry_(std::make_shared<p::Registry>()) {
  agents_ = addGauge(*registry_, "allot_shard_agents", "Agent links the shard holds.");
  leaderLinked_ = addGauge(*registry_, "allot_shard_leader_linked", "1 while the link to the leader is up.");
  handshakes_ = addCounter(*registry_, "allot_shard_handshakes_total", "Agent link handshakes completed.");
  heartbeats_ = addCounter(*registry_, "allot_shard_heartbeats_answered_total",
                           "Agent heartbeats the shard answered itself.");
  auto& messages = p::BuildCounter()
                       .Name("allot_shard_forwarded_messages_total")
                       .Help("Messages forwarded, to the leader or to agents.")
                       .Register(*registry_);
  messagesToLeader_ = &messages.Add({{"direction", "to_leader"}});
  messagesToAgents_ = &messages.Add({{"direction", "to_agents"}});
  auto& bytes = p::BuildCounter()
                    .Name("allot_shard_forwarded_bytes_total")
                    .Help("Encoded bytes of the messages forwarded, to the leader or to agents.")
                    .Register(*registry_);
  bytesToLeader_ = &bytes.Add({{"direction", "to_leader"}});
  bytesToAgents_ = &bytes.Add({{"direction", "to_agents"}});
}

void ShardMetrics::toLeader(size_t bytes) {
  messagesToLeader_->Increment();
  bytesToLeader_->Increment(static_cast<double>(bytes));
}

void ShardMetrics::toAgent(size_t bytes) {
  messagesToAgents_->Increment();
  bytesToAgents_->Increment(static_cast<double>(bytes));
}

std::string ShardMetrics::serialize() const { return p::TextSerializer().Serialize(registry_->Collect()); }

}  // namespace allot
