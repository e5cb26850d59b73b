// The zk suite for run-time role settings: a real ZooKeeper
// server, the real C client, real allot-master processes.
//   - The ZooKeeper role store fences a stale leader through the znode
//     version (zoo_aset), as FakeZooKeeper does in the unit test.
//   - A weight and a quota set on the leader over HTTP are reported and
//     applied by the standby that takes over when the leader is killed:
//     an agent and a framework of that role on the new leader are offered
//     what the stored quota allows, not what the flags say.
#include <gtest/gtest.h>

#include <signal.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include "http/client.h"
#include "master/role_store_zk.h"
#include "proto/connection.h"
#include "tests/ha/zk_cluster.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::Child;
using testing::runUntil;
using testing::ZooKeeperCluster;

class RoleSettingsZk : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!ZooKeeperCluster::missing().empty()) return;
    zk_ = new ZooKeeperCluster(1);
    if (!zk_->start()) {
      delete zk_;
      zk_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete zk_;
    zk_ = nullptr;
  }
  void SetUp() override {
    if (auto why = ZooKeeperCluster::missing(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_NE(zk_, nullptr) << "the ZooKeeper server did not start";
    group_ = "/allot-roles-test/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
    dir_ = ::testing::TempDir() + "/allot-roles-zk-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    masters_.clear();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<ZkSession> session() {
    auto factory = zooKeeperSessionFactory(io_, zk_->connectString(), 4s);
    EXPECT_TRUE(factory);
    auto s = (*factory)();
    connected_ = false;
    s->start([this](const ZkEvent& e) {
      if (e.kind == ZkEvent::Kind::kSession) connected_ = e.state == ZkState::kConnected;
    });
    EXPECT_TRUE(runUntil(io_, [&] { return connected_; }, 10000ms));
    return s;
  }
  // Makes each znode of `path` (as the contender does for its group).
  void makePath(ZkSession& s, const std::string& path) {
    for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
      bool done = false;
      s.create(path.substr(0, slash), "", false, [&](ZkRc, const std::string&, const ZkStat&) { done = true; });
      ASSERT_TRUE(runUntil(io_, [&] { return done; }, 5000ms));
      if (slash == std::string::npos) return;
    }
  }
  Result<RoleSettings> load(RoleStore& store) {
    std::optional<Result<RoleSettings>> got;
    store.load([&](Result<RoleSettings> r) { got = std::move(r); });
    EXPECT_TRUE(runUntil(io_, [&] { return got.has_value(); }, 10000ms));
    return got ? std::move(*got) : Result<RoleSettings>(Error{"no answer"});
  }
  Status save(RoleStore& store, const RoleSettings& settings) {
    std::optional<Status> got;
    store.save(settings, [&](Status st) { got = std::move(st); });
    EXPECT_TRUE(runUntil(io_, [&] { return got.has_value(); }, 10000ms));
    return got ? *got : Status(Error{"no answer"});
  }

  struct Master {
    Child child;
    uint16_t port = 0;
    HostPort http{"127.0.0.1", 0};
  };
  // allot-master --zk with the flags --role-weight batch:3 --quota
  // batch:cpus:3; its ports from its port files.
  Master& startMaster() {
    std::string n = std::to_string(masters_.size());
    Master& m = masters_.emplace_back();
    m.child = Child({std::getenv("ALLOT_MASTER"), "--listen", "127.0.0.1:0", "--port-file", dir_ + "/port" + n,
                     "--http-listen", "127.0.0.1:0", "--http-port-file", dir_ + "/http" + n, "--zk",
                     zk_->url(group_), "--zk-session-timeout", "1", "--role-weight", "batch:3", "--quota",
                     "batch:cpus:3", "--allocation-interval", "0.2"},
                    dir_ + "/master" + n + ".log");
    runUntil(io_, [&] {
      return std::ifstream(dir_ + "/port" + n) >> m.port && std::ifstream(dir_ + "/http" + n) >> m.http.port;
    }, 10000ms);
    runUntil(io_, [&] { return m.child.log().find("joined the contender group") != std::string::npos; }, 10000ms);
    return m;
  }
  std::string roles(const Master& m) {
    auto r = http::fetch(m.http, "GET", "/roles", "", 3000ms);
    return r ? r->body : "";
  }
  unsigned post(const Master& m, const std::string& target) {
    auto r = http::fetch(m.http, "POST", target, "", 5000ms);
    return r ? r->status : 0;
  }

  // Registers an agent (cpus:4;mem:1024) and a framework of `role` on the
  // master at `port`; the cpus of the first offer the framework gets (0:
  // none within `limit`).
  int64_t firstOfferCpus(uint16_t port, const std::string& role, std::chrono::milliseconds limit) {
    std::shared_ptr<Connection> agent, framework;
    int64_t cpus = 0;
    auto open = [&](wire::Role as, std::shared_ptr<Connection>* out, wire::Envelope reg,
                    std::function<void(wire::Envelope&)> onMessage) {
      asyncConnect(io_, "127.0.0.1", port, [&, as, out, reg, onMessage](Result<asio::ip::tcp::socket> socket) {
        if (!socket) return;
        Connection::Options options;
        options.localRole = as;
        options.localName = "role settings test";
        *out = Connection::create(std::move(*socket), options);
        Connection::Handlers handlers;
        std::weak_ptr<Connection> weak = *out;
        handlers.onHello = [weak, reg](const wire::Hello&) {
          if (auto c = weak.lock()) (void)c->send(reg);
        };
        handlers.onMessage = onMessage;
        handlers.onClose = [](const std::string&) {};
        (*out)->start(std::move(handlers));
      });
    };
    wire::Envelope regAgent;
    regAgent.mutable_register_agent()->mutable_info()->set_hostname("node");
    Resources::parse("cpus:4;mem:1024")->toWire(regAgent.mutable_register_agent()->mutable_info()->mutable_resources());
    bool agentIn = false;
    open(wire::ROLE_AGENT, &agent, regAgent, [&](wire::Envelope& e) { agentIn = agentIn || e.has_agent_registered(); });
    EXPECT_TRUE(runUntil(io_, [&] { return agentIn; }, limit));
    wire::Envelope regFramework;
    regFramework.mutable_register_framework()->mutable_info()->set_name("f");
    regFramework.mutable_register_framework()->mutable_info()->set_role(role);
    regFramework.mutable_register_framework()->set_needs_offers(true);
    open(wire::ROLE_SCHEDULER, &framework, regFramework, [&](wire::Envelope& e) {
      if (!e.has_resource_offers() || cpus != 0) return;
      for (const auto& o : e.resource_offers().offers()) cpus += Resources::fromWire(o.resources())->scalarMillis("cpus");
    });
    runUntil(io_, [&] { return cpus != 0; }, limit);
    if (agent) agent->close("done");
    if (framework) framework->close("done");
    return cpus;
  }

  asio::io_context io_;
  bool connected_ = false;
  std::string group_;
  std::string dir_;
  std::deque<Master> masters_;
  static inline ZooKeeperCluster* zk_ = nullptr;
};

TEST_F(RoleSettingsZk, AStaleLeaderCannotOverwriteTheNewLeadersSettings) {
  auto s1 = session();
  ASSERT_NO_FATAL_FAILURE(makePath(*s1, group_));
  auto s2 = session();
  RoleSettings mine;
  mine["batch"] = RoleSetting{2.0, std::nullopt};
  RoleSettings theirs;
  theirs["batch"] = RoleSetting{7.0, Resources()};
  auto old = makeZooKeeperRoleStore(io_, *s1, group_, 10);
  ASSERT_TRUE(load(*old));
  ASSERT_TRUE(save(*old, mine));
  auto fresh = makeZooKeeperRoleStore(io_, *s2, group_, 20);
  auto loaded = load(*fresh);
  ASSERT_TRUE(loaded) << loaded.error().describe();
  EXPECT_EQ(*loaded, mine);
  Status stale = save(*old, theirs);
  ASSERT_FALSE(stale);
  EXPECT_NE(stale.error().message.find("another master"), std::string::npos) << stale.error().message;
  ASSERT_TRUE(save(*fresh, theirs));
  auto s3 = session();
  auto reader = makeZooKeeperRoleStore(io_, *s3, group_, 30);
  auto last = load(*reader);
  ASSERT_TRUE(last);
  EXPECT_EQ(*last, theirs);
}

TEST_F(RoleSettingsZk, TheStandbyThatTakesOverAppliesTheLeadersRunTimeSettings) {
  if (!std::getenv("ALLOT_MASTER")) GTEST_SKIP() << "ALLOT_MASTER not set (binary not built)";
  Master& leader = startMaster();
  Master& standby = startMaster();
  ASSERT_NE(leader.http.port, 0) << leader.child.log();
  ASSERT_NE(standby.http.port, 0) << standby.child.log();
  ASSERT_TRUE(runUntil(io_, [&] { return roles(leader).find("\"store\":\"zookeeper ") != std::string::npos; },
                       10000ms))
      << leader.child.log();
  EXPECT_EQ(post(standby, "/api/v1/roles?role=batch&weight=9"), 503u) << "a standby took a change";
  ASSERT_EQ(post(leader, "/api/v1/roles?role=batch&weight=5"), 200u) << leader.child.log();
  ASSERT_EQ(post(leader, "/api/v1/roles?role=batch&quota=cpus:1"), 200u) << leader.child.log();
  ASSERT_EQ(post(leader, "/api/v1/roles?role=other&weight=2.5"), 200u) << leader.child.log();

  leader.child.signal(SIGKILL);
  ASSERT_TRUE(runUntil(io_, [&] { return roles(standby).find("\"store\":\"zookeeper ") != std::string::npos; },
                       15000ms))
      << standby.child.log();
  std::string after = roles(standby);
  EXPECT_NE(after.find("{\"name\":\"batch\",\"weight\":5,\"quota\":\"cpus:1\""), std::string::npos)
      << after << standby.child.log();
  EXPECT_NE(after.find("{\"name\":\"other\",\"weight\":2.5,"), std::string::npos) << after;
  // Allocation follows the stored quota (cpus:1), not the flag's (cpus:3).
  EXPECT_EQ(firstOfferCpus(standby.port, "batch", 10000ms), 1000) << standby.child.log();
  // And the new leader stores further changes.
  EXPECT_EQ(post(standby, "/api/v1/roles?role=batch&weight=6"), 200u) << standby.child.log();
}

}  // namespace
}  // namespace allot
