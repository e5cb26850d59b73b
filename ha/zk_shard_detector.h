// The link shards an agent may use, found in ZooKeeper (`allot-agent
// --shards zk://host:port,.../path`). Each allot-shard started with
// --zk-announce announces itself in that directory as an ephemeral member
// (ha/group.h: "address=HOST:PORT" is where agents connect), so a shard that
// dies leaves the list within its session timeout.
//
// The detector lists the members (with a watch), reads each one's address,
// ranks the live shards for the agent's key (rankShards,
// proto/shard_placement.h) and reports its first choice. It keeps reporting
// the shard it chose while that shard is listed, so a shard joining moves
// no agent; advance() moves to the next one in rank. No shard listed: it
// reports nullopt until one is.
//
// Thread: the io_context thread; the callback runs there.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/asio.h"
#include "ha/zk_session.h"
#include "ha/zk_session_cycle.h"
#include "proto/shard_placement.h"

namespace allot {

class ZooKeeperShardDetector final : public ShardDetector {
 public:
  ZooKeeperShardDetector(asio::io_context& io, ZkSessionFactory sessions, std::string path, std::string key,
                         std::string description);

  void start(Callback onLeader) override;
  std::string describe() const override { return description_; }
  void advance() override;
  const Endpoint& current() const override { return index_ < ranked_.size() ? ranked_[index_] : none_; }

 private:
  void newSession();
  void onEvent(const ZkEvent& event);
  void list();
  void read(const std::vector<std::string>& members, uint64_t listing);
  void update(const std::vector<Endpoint>& shards);
  void report();

  asio::io_context& io_;
  std::string path_;
  std::string key_;
  std::string description_;
  Callback onLeader_;
  uint64_t listing_ = 0;            // the latest listing; older answers are stale
  std::vector<Endpoint> ranked_;    // the live shards, the key's first choice first
  size_t index_ = 0;                // into ranked_: the one reported
  std::optional<Endpoint> reported_;
  Endpoint none_;
  ZkSessionCycle zk_;  // last: its session goes first, before what its answers touch
};

// `url` is "zk://servers/path"; `key` ranks the shards for this agent.
std::unique_ptr<ShardDetector> makeZooKeeperShardDetector(asio::io_context& io, const ZkUrl& url,
                                                          std::string key);

}  // namespace allot
