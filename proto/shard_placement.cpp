#include "proto/shard_placement.h"

#include <algorithm>
#include <set>

#include "base/log.h"

namespace allot {

namespace {

// FNV-1a, 64 bits: stable across builds and hosts (std::hash is not), so
// every agent and tool ranks the same way.
uint64_t fnv1a(std::string_view text, uint64_t hash = 1469598103934665603ull) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// A final mix so that keys differing in one byte rank shards independently.
uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

class ListDetector final : public ShardDetector {
 public:
  ListDetector(asio::io_context& io, std::vector<Endpoint> ranked)
      : io_(io), ranked_(std::move(ranked)) {}

  void start(Callback onLeader) override {
    onLeader_ = std::move(onLeader);
    report();
  }
  std::string describe() const override {
    std::string out = "shards ";
    for (size_t i = 0; i < ranked_.size(); ++i) out += (i ? "," : "") + ranked_[i].describe();
    return out;
  }
  void advance() override {
    index_ = (index_ + 1) % ranked_.size();
    LOG_INFO("moving to shard " << ranked_[index_].describe());
    report();
  }
  const Endpoint& current() const override { return ranked_[index_]; }

 private:
  void report() {
    std::weak_ptr<int> alive = alive_;
    asio::post(io_, [this, alive, endpoint = ranked_[index_]] {
      if (!alive.expired() && onLeader_) onLeader_(Leader{endpoint, 0, ""});
    });
  }

  asio::io_context& io_;
  std::vector<Endpoint> ranked_;
  size_t index_ = 0;
  Callback onLeader_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace

Result<std::vector<Endpoint>> parseShardList(std::string_view text) {
  std::vector<Endpoint> out;
  std::set<std::string> seen;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    auto endpoint = parseEndpoint(item);
    if (!endpoint) return endpoint.error();
    if (endpoint->kind != Endpoint::Kind::kTcp) return Error{"shard '" + std::string(item) + "' is not host:port"};
    if (!seen.insert(endpoint->describe()).second) return Error{"shard " + endpoint->describe() + " is listed twice"};
    if (out.size() == kShardListMax) return Error{"more than " + std::to_string(kShardListMax) + " shards"};
    out.push_back(*endpoint);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<Endpoint> rankShards(const std::vector<Endpoint>& shards, std::string_view key) {
  uint64_t keyHash = fnv1a(key);
  std::vector<std::pair<uint64_t, Endpoint>> scored;
  scored.reserve(shards.size());
  for (const auto& shard : shards) scored.emplace_back(mix(fnv1a(shard.describe(), keyHash)), shard);
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second.describe() < b.second.describe();
  });
  std::vector<Endpoint> out;
  out.reserve(scored.size());
  for (auto& [score, shard] : scored) out.push_back(std::move(shard));
  return out;
}

std::unique_ptr<ShardDetector> makeShardDetector(asio::io_context& io, std::vector<Endpoint> shards,
                                                 std::string_view key) {
  CHECK(!shards.empty());
  return std::make_unique<ListDetector>(io, rankShards(shards, key));
}

}  // namespace allot
