// ROOT: allot-agent with --isolation disk/du (its cgroup containment needs
// root): a task writing past its disk resource ends TASK_FAILED with
// REASON_DISK_LIMIT and a message naming limit and usage; one under it
// finishes; the usage reaches the master.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <regex>

#include "tests/agent/cluster.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

int exitStatus(int st) { return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1; }

class AgentDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (every executor gets a cgroup)";
    cluster_ = std::make_unique<Cluster>();
    if (auto why = cluster_->missing(); !why.empty()) GTEST_SKIP() << why;
    cgroupsRoot_ = "allot-disk-test-" + std::to_string(getpid());
    cluster_->setCgroupsRoot(cgroupsRoot_);
    setenv("ALLOT_LOG_LEVEL", "debug", 1);  // the master logs each usage report
    bool started = cluster_->startMaster();
    unsetenv("ALLOT_LOG_LEVEL");
    ASSERT_TRUE(started);
    ASSERT_TRUE(cluster_->startAgent({"--isolation", "disk/du", "--disk-watch-interval", "0.2",
                                      "--cgroups-root", cgroupsRoot_, "--usage-interval", "0.3"}))
        << cluster_->agentLog();
  }
  void TearDown() override {
    cluster_.reset();
    for (const auto& h : {"cpu", "cpuacct", "memory", "freezer", "pids", "unified"}) {
      std::error_code ec;
      fs::remove(fs::path("/sys/fs/cgroup") / h / cgroupsRoot_ / "agent", ec);
      fs::remove(fs::path("/sys/fs/cgroup") / h / cgroupsRoot_, ec);
    }
  }

  std::unique_ptr<Cluster> cluster_;
  std::string cgroupsRoot_;
};

TEST_F(AgentDisk, ATaskWritingPastItsDiskLimitFailsWithTheReason) {
  Child run = cluster_->execute({"--command", "head -c 12000000 /dev/urandom > blob; sync; sleep 30",
                                 "--resources", "cpus:0.2;mem:64;disk:4"});
  int st = run.wait(60s);
  EXPECT_NE(exitStatus(st), 0);
  std::string out = run.out();
  EXPECT_NE(out.find("allot-execute-0 FAILED (DISK_LIMIT): "), std::string::npos) << out << cluster_->agentLog();
  EXPECT_NE(out.find("disk limit 4.0 MiB exceeded: the sandbox holds more than"), std::string::npos) << out;
}

TEST_F(AgentDisk, ATaskUnderItsDiskLimitFinishesAndItsUsageIsReported) {
  Child run = cluster_->execute({"--command", "head -c 2000000 /dev/urandom > blob; sync; sleep 2",
                                 "--resources", "cpus:0.2;mem:64;disk:16"});
  ASSERT_EQ(exitStatus(run.wait(60s)), 0) << run.out() << run.err() << cluster_->agentLog();
  EXPECT_NE(run.out().find("allot-execute-0 FINISHED"), std::string::npos) << run.out();
  // The master logs the usage reports it gets; one shows the 2 MB blob.
  std::string log = cluster_->masterLog();
  EXPECT_TRUE(std::regex_search(log, std::regex(" disk_bytes=[2-9][0-9]{6}")))
      << "no usage report shows the sandbox's 2 MB: " << log.substr(0, 2000);
}

}  // namespace
}  // namespace allot::testing
