// Which link shard an agent connects to (docs/architecture.md, "Link
// shards"). Given a static list of shards, every agent ranks them by
// rendezvous hashing of its own key: the shards' order is a pure function of
// (key, shard), so agents spread evenly, and a shard's departure moves only
// the agents that were on it (each to its own next choice).
//
//   auto detector = makeShardDetector(io, shards, key);
//   ShardDetector* raw = detector.get();  // the link owns the detector
//   ReconnectingLink link(io, std::move(detector), ...);
//   ... the shard is gone or never answers: raw->advance();
//
// Thread: the io_context thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/asio.h"
#include "base/result.h"
#include "proto/leader.h"

namespace allot {

// Shards in one list at most.
constexpr size_t kShardListMax = 1024;

// Parses "host:port,host:port,..." (each as parseEndpoint, TCP only, no
// duplicates, at most kShardListMax).
Result<std::vector<Endpoint>> parseShardList(std::string_view text);

// `shards` ranked for `key`, first choice first (highest rendezvous score).
std::vector<Endpoint> rankShards(const std::vector<Endpoint>& shards, std::string_view key);

// A LeaderDetector over a shard list: reports the key's first choice, and
// on each advance() the next one (after the last, the first again).
class ShardDetector : public LeaderDetector {
 public:
  virtual void advance() = 0;
  virtual const Endpoint& current() const = 0;
};

// `shards` must not be empty.
std::unique_ptr<ShardDetector> makeShardDetector(asio::io_context& io, std::vector<Endpoint> shards,
                                                 std::string_view key);

}  // namespace allot
