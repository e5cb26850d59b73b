// The zk suite: examples/service (allot-service) keeps 3 healthy copies on
// two agents (spread over their rack attribute) through an agent killed
// with SIGKILL along with its executors (a lost machine), its own failover,
// and the leading master's death (a standby elected through ZooKeeper).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "tests/common/agent_cgroups.h"
#include "tests/common/wait.h"
#include "tests/ha/zk_cluster.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::Child;
using testing::ZooKeeperCluster;
using testing::count;
using testing::waitFor;

class ServiceZk : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = ZooKeeperCluster::missing(); !why.empty()) GTEST_SKIP() << why;
    for (const char* v : {"ALLOT_MASTER", "ALLOT_AGENT", "ALLOT_SERVICE", "ALLOTCTL"}) {
      if (!std::getenv(v)) GTEST_SKIP() << v << " not set (binary not built)";
    }
    if (geteuid() != 0) GTEST_SKIP() << "the agent needs root";
    char tmpl[] = "/tmp/allot-service-zk-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::filesystem::permissions(dir_, std::filesystem::perms(0711));
    zk_ = std::make_unique<ZooKeeperCluster>(1);
    ASSERT_TRUE(zk_->start());
    url_ = zk_->url("/allot-service-test");
  }

  void TearDown() override {
    service_.signal(SIGKILL);
    for (auto& a : agents_) a.signal(SIGKILL);
    for (auto& m : masters_) m.signal(SIGKILL);
    for (int i = 0; i < agentsStarted_; ++i) {
      EXPECT_EQ(testing::removeAgentCgroupTree(testing::defaultAgentCgroupsRoot(workDir(i))), "");
    }
    zk_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string workDir(int i) const { return dir_ + "/agent" + std::to_string(i); }

  void startMaster() {
    int i = static_cast<int>(masters_.size());
    std::string base = dir_ + "/master" + std::to_string(i);
    masters_.emplace_back(std::vector<std::string>{std::getenv("ALLOT_MASTER"), "--listen", "127.0.0.1:0",
                                                   "--http-listen", "127.0.0.1:0", "--zk", url_,
                                                   "--zk-session-timeout", "1", "--agent-timeout", "3"},
                          base + ".log");
    ASSERT_TRUE(waitFor([&] { return masters_.back().log().find("joined the contender group") != std::string::npos; },
                        15s))
        << masters_.back().log();
  }

  void startAgent(const std::string& rack) {
    int i = agentsStarted_++;
    std::filesystem::create_directories(workDir(i));
    agents_.emplace_back(std::vector<std::string>{std::getenv("ALLOT_AGENT"), "--master", url_, "--work-dir",
                                                  workDir(i), "--resources", "cpus:2;mem:1024;disk:256",
                                                  "--attributes", "rack:" + rack, "--hostname",
                                                  "host-" + rack, "--executor-idle-timeout", "0.5"},
                         dir_ + "/agent" + std::to_string(i) + ".log");
    ASSERT_TRUE(waitFor([&] { return agents_.back().log().find("registered with master") != std::string::npos; },
                        20s))
        << agents_.back().log();
  }

  void startService() {
    service_ = Child({std::getenv("ALLOT_SERVICE"), "--master", url_, "--instances", "3", "--command", "sleep 3600",
                      "--resources", "cpus:0.1;mem:16", "--spread-attribute", "rack", "--state-file",
                      dir_ + "/service.id", "--failover-timeout", "60", "--health-cmd", "true",
                      "--health-delay", "0", "--health-interval", "0.5", "--health-grace", "5"},
                     dir_ + "/service.log");
  }

  // The service's last "instances:" line says 3 running, 3 healthy, after
  // `after` bytes of its log.
  bool threeHealthy(size_t after) {
    std::string log = service_.log();
    auto last = log.rfind("instances: ");
    return last != std::string::npos && last >= after &&
           log.compare(last, 35, "instances: 3 running, 3 healthy\n") == 0;
  }

  // RUNNING and healthy tasks of allot-service in the leader's /state
  // (allotctl tasks: one row each).
  size_t healthyInState() {
    std::string log = dir_ + "/allotctl.log";
    std::filesystem::remove(log);
    Child ctl({std::getenv("ALLOTCTL"), "--master", url_, "--timeout", "5", "tasks"}, log);
    if (ctl.waitExit(15s) != 0) return 0;
    std::istringstream rows(testing::readFile(log));
    size_t n = 0;
    for (std::string row; std::getline(rows, row);) {
      n += row.rfind("allot-service-", 0) == 0 && row.find(" RUNNING ") != std::string::npos &&
           row.find(" healthy ") != std::string::npos;
    }
    return n;
  }

  std::string logs() {
    std::string out = "--- service\n" + service_.log();
    for (size_t i = 0; i < masters_.size(); ++i) out += "--- master " + std::to_string(i) + "\n" + masters_[i].log();
    return out;
  }

  std::string dir_, url_;
  std::unique_ptr<ZooKeeperCluster> zk_;
  std::vector<Child> masters_, agents_;
  Child service_;
  int agentsStarted_ = 0;
};

TEST_F(ServiceZk, KeepsThreeHealthyAcrossALostAgentItsFailoverAndALeaderFailover) {
  startMaster();
  startMaster();
  startAgent("a");
  startAgent("b");
  startService();
  ASSERT_TRUE(waitFor([&] { return threeHealthy(0); }, 60s)) << logs();
  EXPECT_EQ(healthyInState(), 3u) << logs();
  // Spread over the racks: 2 and 1.
  std::string log = service_.log();
  size_t onA = count(log, "launching on host-a"), onB = count(log, "launching on host-b");
  EXPECT_TRUE((onA == 2 && onB == 1) || (onA == 1 && onB == 2)) << log;

  // A lost machine: the agent and everything it ran die at once.
  size_t mark = service_.log().size();
  int lost = onA >= onB ? 0 : 1;
  agents_[lost].signal(SIGKILL);
  EXPECT_EQ(testing::removeAgentCgroupTree(testing::defaultAgentCgroupsRoot(workDir(lost))), "");
  ASSERT_TRUE(waitFor([&] { return service_.log().find(" ended LOST (", mark) != std::string::npos; }, 30s)) << logs();
  ASSERT_TRUE(waitFor([&] { return threeHealthy(mark); }, 60s)) << logs();

  // The service fails over: a new process with the same state file adopts
  // the running copies and launches none.
  service_.signal(SIGTERM);
  ASSERT_EQ(service_.waitExit(10s), 0) << logs();
  size_t launchesBefore = count(service_.log(), "launching on");
  mark = service_.log().size();
  startService();
  ASSERT_TRUE(waitFor([&] { return service_.log().find("re-registered", mark) != std::string::npos; }, 30s))
      << logs();
  ASSERT_TRUE(waitFor([&] { return threeHealthy(mark); }, 30s)) << logs();
  EXPECT_EQ(count(service_.log(), "launching on"), launchesBefore) << logs();

  // The leading master dies; the standby leads, the agent and the service
  // re-register with it, the copies keep running.
  mark = service_.log().size();
  masters_[0].signal(SIGKILL);
  ASSERT_TRUE(waitFor([&] { return service_.log().find("re-registered", mark) != std::string::npos; }, 60s))
      << logs();
  ASSERT_TRUE(waitFor([&] { return healthyInState() == 3; }, 60s)) << logs();
  EXPECT_EQ(count(service_.log(), "launching on"), launchesBefore) << logs();
}

}  // namespace
}  // namespace allot
