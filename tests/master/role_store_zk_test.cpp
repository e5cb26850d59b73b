// The ZooKeeper RoleStore (master/role_store_zk.h) against FakeZooKeeper:
// the znode is made when missing, read and claimed by each new leader, and
// a fenced ex-leader's write fails instead of overwriting a newer leader's
// settings. The same store against a real server: tests/ha/role_settings_zk_test.cpp.
#include <gtest/gtest.h>

#include "master/role_store_zk.h"
#include "tests/common/test_util.h"
#include "tests/ha/fake_zookeeper.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::FakeZooKeeper;
using testing::runUntil;

constexpr const char* kGroup = "/allot";

class ZkRoleStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The group path, as the contender leaves it.
    auto s = zk_.factory()();
    s->start([](const ZkEvent&) {});
    bool made = false;
    s->create(kGroup, "", false, [&](ZkRc rc, const std::string&, const ZkStat&) { made = rc == ZkRc::kOk; });
    ASSERT_TRUE(runUntil(io_, [&] { return made; }, 2000ms));
  }

  std::unique_ptr<ZkSession> session() {
    auto s = zk_.factory()();
    s->start([](const ZkEvent&) {});
    return s;
  }

  Result<RoleSettings> load(RoleStore& store) {
    std::optional<Result<RoleSettings>> got;
    store.load([&](Result<RoleSettings> r) { got = std::move(r); });
    EXPECT_FALSE(got) << "completed inside load()";
    EXPECT_TRUE(runUntil(io_, [&] { return got.has_value(); }, 30000ms));
    return got ? std::move(*got) : Result<RoleSettings>(Error{"no answer"});
  }
  Status save(RoleStore& store, const RoleSettings& settings) {
    std::optional<Status> got;
    store.save(settings, [&](Status st) { got = std::move(st); });
    EXPECT_TRUE(runUntil(io_, [&] { return got.has_value(); }, 5000ms));
    return got ? *got : Status(Error{"no answer"});
  }

  static RoleSettings weight(const std::string& role, double w) {
    RoleSettings s;
    s[role] = RoleSetting{w, std::nullopt};
    return s;
  }

  asio::io_context io_;
  FakeZooKeeper zk_{io_};
  const std::string path_ = roleSettingsPath(kGroup);
};

TEST_F(ZkRoleStoreTest, TheFirstLeaderMakesTheZnodeAndTheNextReadsWhatItSaved) {
  auto s1 = session();
  auto first = makeZooKeeperRoleStore(io_, *s1, kGroup, 100);
  auto loaded = load(*first);
  ASSERT_TRUE(loaded) << loaded.error().describe();
  EXPECT_TRUE(loaded->empty());
  EXPECT_TRUE(zk_.exists(path_));
  ASSERT_TRUE(save(*first, weight("batch", 2)));
  EXPECT_NE(zk_.data(path_).find("epoch 100\nrole batch weight=2\n"), std::string::npos) << zk_.data(path_);

  auto s2 = session();
  auto second = makeZooKeeperRoleStore(io_, *s2, kGroup, 200);
  auto again = load(*second);
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_EQ(*again, weight("batch", 2));
  EXPECT_NE(zk_.data(path_).find("epoch 200\n"), std::string::npos) << "the new leader did not claim the znode";
}

TEST_F(ZkRoleStoreTest, AFencedExLeaderCannotOverwriteTheNewLeadersSettings) {
  auto s1 = session();
  auto old = makeZooKeeperRoleStore(io_, *s1, kGroup, 100);
  ASSERT_TRUE(load(*old));
  ASSERT_TRUE(save(*old, weight("batch", 2)));
  // A new leader takes over (the old one does not know yet) and claims.
  auto s2 = session();
  auto fresh = makeZooKeeperRoleStore(io_, *s2, kGroup, 200);
  ASSERT_TRUE(load(*fresh));
  Status stale = save(*old, weight("batch", 99));
  ASSERT_FALSE(stale);
  EXPECT_NE(stale.error().message.find("another master"), std::string::npos) << stale.error().message;
  ASSERT_TRUE(save(*fresh, weight("batch", 3)));
  EXPECT_FALSE(save(*old, weight("batch", 99))) << "a fenced store wrote again";
  auto s3 = session();
  auto reader = makeZooKeeperRoleStore(io_, *s3, kGroup, 300);
  EXPECT_EQ(*load(*reader), weight("batch", 3));
}

TEST_F(ZkRoleStoreTest, CorruptOrOversizedDataIsAnErrorAndTheLeaderMayReplaceIt) {
  auto s0 = session();
  auto first = makeZooKeeperRoleStore(io_, *s0, kGroup, 100);
  ASSERT_TRUE(load(*first));
  zk_.setData(path_, "allot-role-settings 1\nepoch 5\nrole batch weight=banana\n");
  auto s1 = session();
  auto leader = makeZooKeeperRoleStore(io_, *s1, kGroup, 200);
  auto corrupt = load(*leader);
  ASSERT_FALSE(corrupt);
  EXPECT_NE(corrupt.error().message.find(path_ + " in ZooKeeper: line 3: weight"), std::string::npos)
      << corrupt.error().message;
  EXPECT_NE(zk_.data(path_).find("banana"), std::string::npos) << "the claim rewrote corrupt data";
  ASSERT_TRUE(save(*leader, weight("web", 4)));
  EXPECT_EQ(zk_.data(path_).find("banana"), std::string::npos);

  zk_.setData(path_, std::string(kRoleSettingsBytesMax + 1, 'x'));
  auto s2 = session();
  auto next = makeZooKeeperRoleStore(io_, *s2, kGroup, 300);
  auto oversized = load(*next);
  ASSERT_FALSE(oversized);
  EXPECT_NE(oversized.error().message.find("at most"), std::string::npos);
}

TEST_F(ZkRoleStoreTest, ConnectionLossWhileLoadingIsRetried) {
  auto s = session();
  auto store = makeZooKeeperRoleStore(io_, *s, kGroup, 100);
  zk_.disconnect(zk_.sessionsCreated());
  std::optional<Result<RoleSettings>> got;
  store->load([&](Result<RoleSettings> r) { got = std::move(r); });
  testing::runFor(io_, 1200ms);
  EXPECT_FALSE(got) << "gave up while disconnected";
  zk_.reconnect(zk_.sessionsCreated());
  ASSERT_TRUE(runUntil(io_, [&] { return got.has_value(); }, 5000ms));
  EXPECT_TRUE(*got);
  EXPECT_TRUE(zk_.exists(path_));
}

}  // namespace
}  // namespace allot
