// The zk suite, ZooKeeper access: masters with --zk-credentials lock the
// group's znodes to their digest identity; anyone may still read the leader;
// a master whose credentials ZooKeeper does not accept refuses to start.
// A real ZooKeeper server, the real C client, real allot-master processes.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "ha/group.h"
#include "ha/zk_detector.h"
#include "tests/ha/zk_cluster.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::Child;
using testing::runUntil;
using testing::ZooKeeperCluster;

class ZkSecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!ZooKeeperCluster::missing().empty()) return;
    shared_ = new ZooKeeperCluster(1);
    if (!shared_->start()) {
      delete shared_;
      shared_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete shared_;
    shared_ = nullptr;
  }
  void SetUp() override {
    if (auto why = ZooKeeperCluster::missing(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_NE(shared_, nullptr) << "the ZooKeeper server did not start";
    ASSERT_NE(std::getenv("ALLOT_MASTER"), nullptr);
    auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    group_ = "/allot-sec/" + std::string(info->name());
    dir_ = ::testing::TempDir() + "/allot-zksec-" + std::to_string(getpid()) + "-" + info->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string credentialsFile(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), 0600);
    return path;
  }

  Child master(const std::string& name, const std::string& credentials) {
    std::vector<std::string> args = {std::getenv("ALLOT_MASTER"), "--listen", "127.0.0.1:0",
                                     "--zk", shared_->url(group_), "--zk-session-timeout", "2"};
    if (!credentials.empty()) {
      args.push_back("--zk-credentials");
      args.push_back(credentials);
    }
    return Child(args, dir_ + "/" + name + ".log");
  }

  // A connected session (credentials "": none).
  std::unique_ptr<ZkSession> session(const std::string& credentials) {
    ZkClientOptions options;
    options.credentials = credentials;
    auto factory = zooKeeperSessionFactory(io_, shared_->connectString(), 4s, options);
    EXPECT_TRUE(factory);
    auto s = (*factory)();
    bool connected = false;
    s->start([&connected](const ZkEvent& e) { connected |= e.state == ZkState::kConnected; });
    EXPECT_TRUE(runUntil(io_, [&] { return connected; }, 5000ms));
    return s;
  }

  // Waits for one asynchronous call's answer.
  template <typename Start>
  ZkRc await(Start start) {
    std::optional<ZkRc> rc;
    start([&rc](ZkRc r, auto&&...) { rc = r; });
    EXPECT_TRUE(runUntil(io_, [&] { return rc.has_value(); }, 5000ms));
    return rc.value_or(ZkRc::kOther);
  }

  // The members of the group once one leads (its roles znode written).
  std::vector<GroupMember> waitForLeader(ZkSession& s) {
    std::vector<GroupMember> members;
    auto deadline = std::chrono::steady_clock::now() + 15s;
    while (std::chrono::steady_clock::now() < deadline) {
      bool haveRoles = await([&](auto done) { s.get(group_ + "/roles", done); }) == ZkRc::kOk;
      await([&](auto done) {
        s.children(group_, false, [&, done](ZkRc rc, const std::vector<std::string>& c) {
          members = parseMembers(c);
          done(rc);
        });
      });
      if (haveRoles && !members.empty()) break;
      testing::runFor(io_, 100ms);
    }
    return members;
  }

  asio::io_context io_;
  std::string group_;
  std::string dir_;
  static inline ZooKeeperCluster* shared_ = nullptr;
};

TEST_F(ZkSecurityTest, WithoutCredentialsAClientReadsTheLeaderButCannotWriteTheGroup) {
  Child leader = master("leader", credentialsFile("zk", "allot-masters:s3cret\n"));
  auto reader = session("");
  auto members = waitForLeader(*reader);
  ASSERT_EQ(members.size(), 1u) << leader.log();
  std::string leaderZnode = group_ + "/" + members[0].name;

  // Reading: the leader's data, through the detector every client uses.
  std::optional<Leader> found;
  auto url = parseZkUrl(shared_->url(group_));
  ZooKeeperDetector detector(io_, *zooKeeperSessionFactory(io_, url->servers, 4s), url->path, "test");
  detector.start([&found](const std::optional<Leader>& l) { found = l; });
  EXPECT_TRUE(runUntil(io_, [&] { return found.has_value(); }, 5000ms));

  // Writing, without credentials and with the wrong ones.
  auto wrong = session("allot-masters:guess");
  for (ZkSession* s : {reader.get(), wrong.get()}) {
    EXPECT_EQ(await([&](auto done) { s->remove(leaderZnode, done); }), ZkRc::kNoAuth);
    EXPECT_EQ(await([&](auto done) {
                s->create(group_ + "/" + memberPrefix(newMemberGuid()), "address=127.0.0.1:1\n", true, done);
              }), ZkRc::kNoAuth);
    EXPECT_EQ(await([&](auto done) { s->set(group_ + "/roles", "", -1, done); }), ZkRc::kNoAuth);
    EXPECT_EQ(await([&](auto done) { s->remove(group_ + "/roles", done); }), ZkRc::kNoAuth);
  }
  auto grab = session("allot-masters:guess");
  EXPECT_EQ(await([&](auto done) { grab->restrict(group_, done); }), ZkRc::kNoAuth)
      << "another identity cannot take the group's ACL over";
  EXPECT_TRUE(leader.running()) << leader.log();
  EXPECT_EQ(await([&](auto done) { reader->exists(leaderZnode, false, done); }), ZkRc::kOk);
}

TEST_F(ZkSecurityTest, AMasterWithTheWrongCredentialsRefusesToStart) {
  Child leader = master("leader", credentialsFile("zk", "allot-masters:s3cret"));
  auto reader = session("");
  ASSERT_EQ(waitForLeader(*reader).size(), 1u) << leader.log();

  Child wrong = master("wrong", credentialsFile("zk-wrong", "allot-masters:guess"));
  EXPECT_EQ(wrong.waitExit(15000ms), 1) << wrong.log();
  EXPECT_NE(wrong.log().find("ZooKeeper will not let this master contend"), std::string::npos)
      << wrong.log();
  Child none = master("none", "");
  EXPECT_EQ(none.waitExit(15000ms), 1) << none.log();
  Child unreadable = master("unreadable", dir_ + "/no-such-file");
  EXPECT_EQ(unreadable.waitExit(15000ms), 2) << unreadable.log();
  EXPECT_NE(unreadable.log().find("cannot read the ZooKeeper credentials file"), std::string::npos)
      << unreadable.log();
  Child malformed = master("malformed", credentialsFile("zk-bad", "no colon here\n"));
  EXPECT_EQ(malformed.waitExit(15000ms), 2) << malformed.log();

  Child standby = master("standby", credentialsFile("zk-same", "allot-masters:s3cret"));
  EXPECT_TRUE(runUntil(io_, [&] {
    return standby.log().find("joined the contender group") != std::string::npos;
  }, 10000ms)) << standby.log();
  EXPECT_TRUE(leader.running()) << leader.log();
}

TEST_F(ZkSecurityTest, AGroupLeftOpenIsLockedByTheFirstMasterWithCredentials) {
  group_ = "/allot-sec-open/group";  // the other tests' parent is locked already
  auto anyone = session("");
  std::string parent = group_.substr(0, group_.rfind('/'));
  for (const std::string& p : {parent, group_, group_ + "/roles"}) {
    ZkRc rc = await([&](auto done) { anyone->create(p, "", false, done); });
    EXPECT_TRUE(rc == ZkRc::kOk || rc == ZkRc::kNodeExists) << zkRcName(rc);
  }
  Child leader = master("leader", credentialsFile("zk", "allot-masters:s3cret"));
  ASSERT_EQ(waitForLeader(*anyone).size(), 1u) << leader.log();
  runUntil(io_, [&] { return leader.log().find("role settings:") != std::string::npos; }, 5000ms);
  EXPECT_EQ(await([&](auto done) {
              anyone->create(group_ + "/" + memberPrefix(newMemberGuid()), "address=127.0.0.1:1\n", true, done);
            }), ZkRc::kNoAuth);
  EXPECT_EQ(await([&](auto done) { anyone->set(group_ + "/roles", "", -1, done); }), ZkRc::kNoAuth);
}

}  // namespace
}  // namespace allot
