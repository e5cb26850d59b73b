// The zk suite: a real ZooKeeper server (or ensemble) started here, the
// real C client, real allot-master processes.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <map>
#include <optional>
#include <sstream>

#include "ha/contender.h"
#include "ha/group.h"
#include "ha/zk_detector.h"
#include "proto/connection.h"
#include "tests/common/agent_cgroups.h"
#include "tests/ha/zk_cluster.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::Child;
using testing::runFor;
using testing::runUntil;
using testing::ZooKeeperCluster;

// One standalone server shared by the tests that never stop it; each test
// uses its own group path.
class ZkTest : public ::testing::Test {
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
    group_ = "/allot-test/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  std::unique_ptr<ZooKeeperDetector> detect(const ZooKeeperCluster& zk) {
    auto url = parseZkUrl(zk.url(group_));
    EXPECT_TRUE(url);
    auto d = std::make_unique<ZooKeeperDetector>(
        io_, *zooKeeperSessionFactory(io_, url->servers, 4s), url->path, "test");
    d->start([this](const std::optional<Leader>& l) { leader_ = l; });
    return d;
  }

  std::unique_ptr<LeaderContender> contend(const ZooKeeperCluster& zk, uint16_t port, Duration timeout,
                                           bool* elected, std::string* lost) {
    auto sessions = zooKeeperSessionFactory(io_, zk.connectString(), timeout);
    LeaderContender::Callbacks cb;
    cb.elected = [elected](uint64_t) { *elected = true; };
    cb.lost = [lost](const std::string& why) { *lost = why; };
    MemberData member{Endpoint{Endpoint::Kind::kTcp, "127.0.0.1", port, ""}, "m" + std::to_string(port),
                      std::nullopt};
    auto c = std::make_unique<LeaderContender>(io_, std::move(*sessions), group_, std::move(member), cb);
    c->start();
    EXPECT_TRUE(runUntil(io_, [&] { return !c->memberPath().empty(); }, 10000ms));
    return c;
  }

  // allot-master with --zk; its port from --port-file.
  struct Master {
    Child child;
    uint16_t port = 0;
    uint16_t httpPort = 0;  // with --http-listen
  };
  Master startMaster(const ZooKeeperCluster& zk, double sessionTimeoutS, bool http = false) {
    std::string dir = ::testing::TempDir() + "/allot-ha-" + std::to_string(getpid()) + "-" +
                      std::to_string(mastersStarted_++);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    dirs_.push_back(dir);
    std::string portFile = dir + "/port";
    std::string httpPortFile = dir + "/http-port";
    Master m;
    std::vector<std::string> args = {std::getenv("ALLOT_MASTER"), "--listen", "127.0.0.1:0",
                                     "--port-file", portFile, "--zk", zk.url(group_),
                                     "--zk-session-timeout", std::to_string(sessionTimeoutS)};
    if (http) {
      for (const char* a : {"--http-listen", "127.0.0.1:0", "--http-port-file"}) args.push_back(a);
      args.push_back(httpPortFile);
    }
    m.child = Child(args, dir + "/master.log");
    runUntil(io_, [&] { return std::ifstream(portFile) >> m.port ? true : false; }, 10000ms);
    if (http) runUntil(io_, [&] { return std::ifstream(httpPortFile) >> m.httpPort ? true : false; }, 10000ms);
    // Masters join in the order the test starts them.
    runUntil(io_, [&] { return m.child.log().find("joined the contender group") != std::string::npos; },
             10000ms);
    return m;
  }

  // The leader epoch in the Hello of whoever answers at `port`, or nullopt
  // if nobody completes a handshake within `limit`.
  std::optional<uint64_t> helloEpoch(uint16_t port, std::chrono::milliseconds limit) {
    std::optional<uint64_t> epoch;
    std::shared_ptr<Connection> conn;
    asyncConnect(io_, "127.0.0.1", port, [&](Result<asio::ip::tcp::socket> socket) {
      if (!socket) return;
      Connection::Options options;
      options.localRole = wire::ROLE_SCHEDULER;
      options.localName = "zk test";
      conn = Connection::create(std::move(*socket), options);
      Connection::Handlers handlers;
      handlers.onHello = [&](const wire::Hello& hello) { epoch = hello.leader_epoch(); };
      handlers.onMessage = [](wire::Envelope&) {};
      handlers.onClose = [](const std::string&) {};
      conn->start(std::move(handlers));
    });
    runUntil(io_, [&] { return epoch.has_value(); }, limit);
    if (conn) conn->close("done");
    return epoch;
  }

  void TearDown() override {
    for (const auto& d : dirs_) {
      // An agent that ran in d/work left its tracking cgroups (by design).
      EXPECT_EQ(testing::removeAgentCgroupTree(testing::defaultAgentCgroupsRoot(d + "/work")), "");
      std::filesystem::remove_all(d);
    }
  }

  asio::io_context io_;
  std::vector<std::string> dirs_;  // removed after the test (masters are gone by then)
  std::string group_;
  std::optional<Leader> leader_;
  static inline int mastersStarted_ = 0;
  static inline ZooKeeperCluster* shared_ = nullptr;
};

TEST_F(ZkTest, ContendersAndDetectorOverTheRealClient) {
  bool aElected = false, bElected = false;
  std::string aLost, bLost;
  auto a = contend(*shared_, 6001, 1s, &aElected, &aLost);
  auto b = contend(*shared_, 6002, 1s, &bElected, &bLost);
  auto detector = detect(*shared_);
  ASSERT_TRUE(runUntil(io_, [&] { return aElected && leader_ && leader_->endpoint.port == 6001; }, 5000ms));
  EXPECT_FALSE(bElected);
  EXPECT_EQ(b->watching(), a->memberPath());
  uint64_t firstEpoch = a->epoch();
  EXPECT_EQ(leader_->epoch, firstEpoch);
  a.reset();  // closes the session: the znode goes at once
  ASSERT_TRUE(runUntil(io_, [&] { return bElected && leader_ && leader_->endpoint.port == 6002; }, 3000ms));
  EXPECT_GT(b->epoch(), firstEpoch);
  EXPECT_EQ(leader_->epoch, b->epoch());
  EXPECT_TRUE(bLost.empty());
}

TEST_F(ZkTest, EnsembleKeepsTheLeaderWhenOneServerIsKilled) {
  ZooKeeperCluster ensemble(3);
  ASSERT_TRUE(ensemble.start(60s)) << ensemble.log(0);
  bool aElected = false, bElected = false;
  std::string aLost, bLost;
  // 4 s sessions: the ensemble re-elects its own leader in about 0.5 s, under
  // the contender's fence (a third of the session).
  auto a = contend(ensemble, 6011, 4s, &aElected, &aLost);
  auto b = contend(ensemble, 6012, 4s, &bElected, &bLost);
  ASSERT_TRUE(runUntil(io_, [&] { return aElected; }, 5000ms));
  ensemble.kill(0);
  runFor(io_, 3000ms);
  EXPECT_TRUE(a->leading()) << aLost;
  EXPECT_TRUE(aLost.empty()) << aLost;
  EXPECT_FALSE(bElected);
  a.reset();
  ASSERT_TRUE(runUntil(io_, [&] { return bElected; }, 5000ms)) << "two of three servers must elect";
}

class MasterFailover : public ZkTest, public ::testing::WithParamInterface<std::tuple<int, int>> {};

TEST_P(MasterFailover, AStandbyTakesOverWithAHigherEpochInItsHello) {
  auto [masters, sig] = GetParam();
  ASSERT_NE(std::getenv("ALLOT_MASTER"), nullptr);
  std::vector<Master> ms;
  for (int i = 0; i < masters; ++i) {
    ms.push_back(startMaster(*shared_, 1.0));
    ASSERT_NE(ms.back().port, 0) << ms.back().child.log();
  }
  auto detector = detect(*shared_);
  ASSERT_TRUE(runUntil(io_, [&] { return leader_ && leader_->endpoint.port == ms[0].port; }, 10000ms))
      << ms[0].child.log();
  uint64_t firstEpoch = leader_->epoch;
  EXPECT_EQ(helloEpoch(ms[0].port, 3000ms), firstEpoch);
  EXPECT_EQ(helloEpoch(ms[1].port, 300ms), std::nullopt) << "a standby serves no peers";

  auto killedAt = std::chrono::steady_clock::now();
  ms[0].child.signal(sig);
  ASSERT_TRUE(runUntil(io_, [&] { return leader_ && leader_->endpoint.port != ms[0].port; }, 10000ms));
  auto took = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - killedAt);
  EXPECT_EQ(leader_->endpoint.port, ms[1].port);
  EXPECT_GT(leader_->epoch, firstEpoch);
  EXPECT_EQ(helloEpoch(ms[1].port, 3000ms), leader_->epoch) << ms[1].child.log();
  if (sig == SIGTERM) {
    EXPECT_EQ(ms[0].child.waitExit(5000ms), 0);
  }
  for (size_t i = 2; i < ms.size(); ++i) EXPECT_TRUE(ms[i].child.running());
  RecordProperty("failover_ms", static_cast<int>(took.count()));
}

INSTANTIATE_TEST_SUITE_P(TwoAndThreeMasters, MasterFailover,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Values(SIGKILL, SIGTERM)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "Masters" +
                                  (std::get<1>(info.param) == SIGKILL ? "Sigkill" : "Sigterm");
                         });

// End to end with real daemons: ZooKeeper, two masters with --zk, a real
// agent and allot-execute both following the leader through zk://. A task
// that spans the failover keeps running and its FINISHED reaches the
// framework; a task launched after the failover runs too.
class DaemonFailover : public ZkTest, public ::testing::WithParamInterface<int> {};

TEST_P(DaemonFailover, RunningTaskSurvivesAndANewTaskRunsAfterTheLeaderDies) {
  int sig = GetParam();
  for (const char* v : {"ALLOT_MASTER", "ALLOT_AGENT", "ALLOT_EXECUTE"}) {
    if (!std::getenv(v)) GTEST_SKIP() << v << " not set (binary not built)";
  }
  std::string dir = ::testing::TempDir() + "/allot-ha-e2e-" + std::to_string(getpid()) + "-" +
                    std::to_string(sig);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/work");
  dirs_.push_back(dir);

  std::vector<Master> ms;
  ms.push_back(startMaster(*shared_, 1.0));
  ASSERT_NE(ms[0].port, 0) << ms[0].child.log();
  auto detector = detect(*shared_);
  // The first master leads before the second one exists.
  ASSERT_TRUE(runUntil(io_, [&] { return leader_ && leader_->endpoint.port == ms[0].port; }, 15000ms))
      << ms[0].child.log();
  ms.push_back(startMaster(*shared_, 1.0));
  ASSERT_NE(ms[1].port, 0) << ms[1].child.log();

  std::string url = shared_->url(group_);
  Child agent({std::getenv("ALLOT_AGENT"), "--master", url, "--work-dir", dir + "/work", "--resources",
               "cpus:4;mem:4096;disk:1024", "--recovery-timeout", "30", "--status-update-retry", "1",
               "--executor-idle-timeout", "0.5"},
              dir + "/agent.log");
  auto registrations = [&] {
    std::string log = agent.log();
    size_t n = 0;
    for (size_t at = log.find("registered with master"); at != std::string::npos;
         at = log.find("registered with master", at + 1))
      ++n;
    return n;
  };
  ASSERT_TRUE(runUntil(io_, [&] { return registrations() >= 1; }, 20000ms)) << agent.log();

  // A task that outlives the failover (the failover takes about 1-3 s).
  Child longTask({std::getenv("ALLOT_EXECUTE"), "--master", url, "--timeout", "60", "--command",
                  "sleep 8", "--resources", "cpus:0.1;mem:16"},
                 dir + "/long.log");
  ASSERT_TRUE(runUntil(io_, [&] { return longTask.log().find("RUNNING") != std::string::npos; }, 20000ms))
      << longTask.log() << agent.log();

  ms[0].child.signal(sig);
  if (sig == SIGTERM) {
    EXPECT_EQ(ms[0].child.waitExit(10000ms), 0) << ms[0].child.log();
  }
  ASSERT_TRUE(runUntil(io_, [&] { return leader_ && leader_->endpoint.port == ms[1].port; }, 15000ms))
      << ms[1].child.log();
  ASSERT_TRUE(runUntil(io_, [&] { return registrations() >= 2; }, 20000ms))
      << "the agent did not register with the new leader\n"
      << agent.log() << ms[1].child.log();
  EXPECT_EQ(agent.log().find("new agent id"), std::string::npos) << "the agent kept its id\n" << agent.log();

  EXPECT_EQ(longTask.waitExit(40000ms), 0) << longTask.log() << agent.log() << ms[1].child.log();
  EXPECT_NE(longTask.log().find("FINISHED"), std::string::npos) << longTask.log();
  EXPECT_EQ(longTask.log().find("LOST"), std::string::npos) << longTask.log();

  Child after({std::getenv("ALLOT_EXECUTE"), "--master", url, "--timeout", "30", "--command", "true",
               "--resources", "cpus:0.1;mem:16"},
              dir + "/after.log");
  EXPECT_EQ(after.waitExit(30000ms), 0) << after.log() << ms[1].child.log();
  EXPECT_NE(after.log().find("FINISHED"), std::string::npos) << after.log();
  EXPECT_TRUE(agent.running());
  agent.signal(SIGTERM);
  agent.waitExit(10000ms);
}

INSTANTIATE_TEST_SUITE_P(Signals, DaemonFailover, ::testing::Values(SIGKILL, SIGTERM),
                         [](const auto& info) { return info.param == SIGKILL ? "Sigkill" : "Sigterm"; });

TEST_F(ZkTest, LeaderCutOffFromZooKeeperExitsAndExactlyOneLeadsWhenItReturns) {
  ZooKeeperCluster zk(1);
  ASSERT_TRUE(zk.start());
  Master first = startMaster(zk, 1.0);
  Master second = startMaster(zk, 1.0);
  ASSERT_NE(second.port, 0);
  {
    auto detector = detect(zk);
    ASSERT_TRUE(runUntil(io_, [&] { return leader_ && leader_->endpoint.port == first.port; }, 10000ms));
  }
  leader_.reset();
  zk.kill(0);
  EXPECT_EQ(first.child.waitExit(5000ms), 1) << first.child.log();
  EXPECT_NE(first.child.log().find("can no longer be sure it leads"), std::string::npos);
  EXPECT_TRUE(second.child.running());
  zk.launch(0);
  ASSERT_TRUE(zk.waitServing(0, 30s));
  auto detector = detect(zk);
  ASSERT_TRUE(runUntil(io_, [&] { return leader_ && leader_->endpoint.port == second.port; }, 15000ms))
      << second.child.log();
  EXPECT_TRUE(helloEpoch(second.port, 3000ms).has_value()) << second.child.log();
  EXPECT_TRUE(second.child.running());
}

// allotctl --master zk://...: finds the leader's HTTP address in its
// ZooKeeper entry, follows a failover, and says so when no master leads.
TEST_F(ZkTest, AllotctlAsksTheLeaderFoundInZooKeeperAndTheNextOneAfterAFailover) {
  for (const char* v : {"ALLOT_MASTER", "ALLOTCTL"}) {
    if (!std::getenv(v)) GTEST_SKIP() << v << " not set (binary not built)";
  }
  std::string url = shared_->url(group_);
  int runs = 0;
  // allotctl's exit code, and its stdout and stderr together.
  auto allotctl = [&](const std::vector<std::string>& args) {
    std::string log = ::testing::TempDir() + "/allotctl-" + std::to_string(getpid()) + "-" +
                      std::to_string(runs++) + ".log";
    std::vector<std::string> argv = {std::getenv("ALLOTCTL"), "--master", url, "--timeout", "5"};
    argv.insert(argv.end(), args.begin(), args.end());
    Child ctl(argv, log);
    int rc = ctl.waitExit(15000ms);
    std::string out = ctl.log();
    std::filesystem::remove(log);
    return std::make_pair(rc, out);
  };

  auto [noGroupRc, noGroup] = allotctl({"agents"});
  EXPECT_EQ(noGroupRc, 3) << noGroup;
  EXPECT_NE(noGroup.find("no master leads"), std::string::npos) << noGroup;

  std::vector<Master> ms;
  ms.push_back(startMaster(*shared_, 1.0, true));
  ms.push_back(startMaster(*shared_, 1.0, true));
  for (auto& m : ms) ASSERT_NE(m.httpPort, 0) << m.child.log();
  auto detector = detect(*shared_);
  ASSERT_TRUE(runUntil(io_, [&] { return leader_ && leader_->endpoint.port == ms[0].port; }, 10000ms))
      << ms[0].child.log();

  auto [rc, out] = allotctl({"leader"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("HTTP 127.0.0.1:" + std::to_string(ms[0].httpPort)), std::string::npos) << out;
  EXPECT_NE(out.find("protocol 127.0.0.1:" + std::to_string(ms[0].port)), std::string::npos) << out;
  EXPECT_NE(out.find("epoch " + std::to_string(leader_->epoch)), std::string::npos) << out;
  std::tie(rc, out) = allotctl({"agents", "--json"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "[]\n");

  ms[0].child.signal(SIGKILL);
  ASSERT_TRUE(runUntil(io_, [&] { return leader_ && leader_->endpoint.port == ms[1].port; }, 10000ms))
      << ms[1].child.log();
  std::tie(rc, out) = allotctl({"leader"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("HTTP 127.0.0.1:" + std::to_string(ms[1].httpPort)), std::string::npos) << out;
  std::tie(rc, out) = allotctl({"frameworks"});
  EXPECT_EQ(rc, 0) << out;

  ms[1].child.signal(SIGTERM);  // closes its session: the group is empty at once
  EXPECT_EQ(ms[1].child.waitExit(10000ms), 0);
  std::tie(rc, out) = allotctl({"agents"});
  EXPECT_EQ(rc, 3) << out;
  EXPECT_NE(out.find("no master leads: the group " + group_ + " has no members"), std::string::npos)
      << out;
}

// A master without --http-listen publishes no HTTP address: allotctl says
// what to do instead of guessing one.
TEST_F(ZkTest, AllotctlExplainsALeaderThatServesNoHttp) {
  for (const char* v : {"ALLOT_MASTER", "ALLOTCTL"}) {
    if (!std::getenv(v)) GTEST_SKIP() << v << " not set (binary not built)";
  }
  Master m = startMaster(*shared_, 1.0, false);
  auto detector = detect(*shared_);
  ASSERT_TRUE(runUntil(io_, [&] { return leader_ && leader_->endpoint.port == m.port; }, 10000ms));
  std::string log = ::testing::TempDir() + "/allotctl-nohttp-" + std::to_string(getpid()) + ".log";
  Child ctl({std::getenv("ALLOTCTL"), "--master", shared_->url(group_), "agents"}, log);
  EXPECT_EQ(ctl.waitExit(15000ms), 3);
  EXPECT_NE(ctl.log().find("publishes no HTTP address"), std::string::npos) << ctl.log();
  std::filesystem::remove(log);
}

// The nice value of each thread of process `pid`, by thread id.
std::map<pid_t, int> threadNice(pid_t pid) {
  std::map<pid_t, int> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::string stat = testing::readFile(entry.path().string() + "/stat");
    auto paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(stat.substr(paren + 2));
    std::string field;
    // After the command: state is field 3; nice is field 19.
    for (int i = 3; i < 19; ++i) fields >> field;
    int nice = 0;
    fields >> nice;
    out[static_cast<pid_t>(std::stoi(entry.path().filename().string()))] = nice;
  }
  return out;
}

bool mayRaisePriority() {
  int before = getpriority(PRIO_PROCESS, 0);
  if (setpriority(PRIO_PROCESS, 0, before - 1) != 0) return false;
  setpriority(PRIO_PROCESS, 0, before);
  return true;
}

// --zk-client-priority (default 10): the master's ZooKeeper client threads
// run 10 nice levels above its loop, which stays where it was.
TEST_F(ZkTest, TheMastersZooKeeperClientThreadsRunAtARaisedPriority) {
  if (!mayRaisePriority()) GTEST_SKIP() << "needs CAP_SYS_NICE (root) to raise a thread's priority";
  Master m = startMaster(*shared_, 1.0);
  ASSERT_NE(m.port, 0) << m.child.log();
  auto nice = threadNice(m.child.pid());
  int loop = nice.at(m.child.pid());
  int boosted = 0;
  for (const auto& [tid, value] : nice) boosted += value == loop - 10;
  EXPECT_EQ(boosted, 2) << "the C client's I/O and completion threads";
  EXPECT_EQ(loop, getpriority(PRIO_PROCESS, 0)) << "the loop keeps the master's own priority";
  EXPECT_EQ(m.child.log().find("cannot run the ZooKeeper client's threads"), std::string::npos);
}

TEST_F(ZkTest, ClientThreadsInheritTheBoostOnlyWhenAsked) {
  if (!mayRaisePriority()) GTEST_SKIP() << "needs CAP_SYS_NICE (root) to raise a thread's priority";
  int own = getpriority(PRIO_PROCESS, 0);
  auto before = threadNice(getpid());
  auto count = [&](int nice) {
    int n = 0;
    for (const auto& [tid, value] : threadNice(getpid())) n += !before.count(tid) && value == nice;
    return n;
  };
  {
    auto plain = zooKeeperSessionFactory(io_, shared_->connectString(), 2s);
    ASSERT_TRUE(plain);
    auto session = (*plain)();
    session->start([](const ZkEvent&) {});
    EXPECT_EQ(count(own), 2);
  }
  ZkClientOptions options;
  options.priorityBoost = 5;
  auto boosted = zooKeeperSessionFactory(io_, shared_->connectString(), 2s, options);
  ASSERT_TRUE(boosted);
  auto session = (*boosted)();
  bool connected = false;
  session->start([&](const ZkEvent& e) { connected |= e.state == ZkState::kConnected; });
  EXPECT_EQ(count(own - 5), 2);
  EXPECT_EQ(getpriority(PRIO_PROCESS, 0), own) << "the calling thread is restored";
  EXPECT_TRUE(runUntil(io_, [&] { return connected; }, 5000ms));
  EXPECT_FALSE(zooKeeperSessionFactory(io_, "127.0.0.1:1", 2s, ZkClientOptions{40}));
}

}  // namespace
}  // namespace allot
