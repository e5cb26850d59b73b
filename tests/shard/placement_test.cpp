// Which shard an agent picks (proto/shard_placement.h).
#include "proto/shard_placement.h"

#include <gtest/gtest.h>

#include <map>

namespace allot {
namespace {

std::vector<Endpoint> shards(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += (i ? "," : "") + std::string("10.0.0.") + std::to_string(i + 1) + ":5060";
  auto list = parseShardList(text);
  EXPECT_TRUE(list.ok());
  return list.ok() ? *list : std::vector<Endpoint>{};
}

TEST(ShardPlacement, ParsesAListAndRefusesBadOnes) {
  EXPECT_EQ(shards(3).size(), 3u);
  EXPECT_FALSE(parseShardList("10.0.0.1:5060,10.0.0.1:5060").ok());
  EXPECT_FALSE(parseShardList("10.0.0.1:5060,").ok());
  EXPECT_FALSE(parseShardList("unix:/run/x.sock").ok());
  EXPECT_FALSE(parseShardList("").ok());
}

TEST(ShardPlacement, SpreadsAgentsEvenly) {
  auto list = shards(4);
  std::map<std::string, int> counts;
  for (int i = 0; i < 4000; ++i) ++counts[rankShards(list, "host-" + std::to_string(i)).front().describe()];
  ASSERT_EQ(counts.size(), 4u);
  for (const auto& [shard, n] : counts) {
    EXPECT_GT(n, 800) << shard;
    EXPECT_LT(n, 1200) << shard;
  }
}

TEST(ShardPlacement, ADepartedShardMovesOnlyItsOwnAgents) {
  auto list = shards(5);
  auto fewer = list;
  fewer.erase(fewer.begin() + 2);
  const std::string gone = list[2].describe();
  int moved = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string key = "host-" + std::to_string(i);
    auto before = rankShards(list, key);
    auto after = rankShards(fewer, key);
    if (before.front().describe() == gone) {
      ++moved;
      EXPECT_EQ(after.front(), before[1]) << key;  // its own next choice
    } else {
      EXPECT_EQ(after.front(), before.front()) << key;
    }
  }
  EXPECT_GT(moved, 0);
}

}  // namespace
}  // namespace allot
