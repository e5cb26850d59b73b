// allot-execute told to stop (SIGINT, SIGTERM) with and without a master to
// kill its tasks through: real master, agent and allot-execute on loopback.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>

#include <gtest/gtest.h>

#include "tests/agent/cluster.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

// allot-execute's wait for its kills after a signal (kInterruptWait), and
// room for a loaded machine: the bound the tests hold it to.
constexpr auto kInterruptBound = 10s + 5s;

int exitStatus(int st) { return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1; }

class ExecuteInterrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>();
    if (auto why = cluster_->missing(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(cluster_->startMaster()) << "master did not come up";
    ASSERT_TRUE(cluster_->startAgent()) << "agent did not register:\n" << cluster_->agentLog();
  }
  void TearDown() override { cluster_.reset(); }

  // allot-execute with a task that runs until killed, once it runs.
  Child runningTask() {
    Child run = cluster_->execute({"--command", "sleep 600", "--resources", "cpus:0.1;mem:16"});
    EXPECT_TRUE(waitFor([&] { return run.out().find("RUNNING") != std::string::npos; }, 20s))
        << run.out() << run.err() << cluster_->agentLog();
    return run;
  }

  std::unique_ptr<Cluster> cluster_;
};

TEST_F(ExecuteInterrupt, SigtermAfterTheMasterDiedExitsWithinItsBoundNamingTheTasks) {
  Child run = runningTask();
  cluster_->masterProcess().kill(SIGKILL);
  auto signalled = std::chrono::steady_clock::now();
  ::kill(run.pid(), SIGTERM);
  int status = run.wait(kInterruptBound);
  auto took = std::chrono::steady_clock::now() - signalled;
  ASSERT_EQ(exitStatus(status), 130) << "still running after the bound\n" << run.err();
  EXPECT_LT(took, kInterruptBound);
  EXPECT_NE(run.err().find("interrupted; killing tasks (exiting within 10 s"), std::string::npos)
      << run.err();
  EXPECT_NE(run.err().find("these tasks may still run: allot-execute-0"), std::string::npos)
      << run.err();
}

TEST_F(ExecuteInterrupt, ASecondSigintExitsAtOnce) {
  Child run = runningTask();
  cluster_->masterProcess().kill(SIGKILL);
  ::kill(run.pid(), SIGINT);
  ASSERT_TRUE(waitFor([&] { return run.err().find("interrupted;") != std::string::npos; }, 5s))
      << run.err();
  auto second = std::chrono::steady_clock::now();
  ::kill(run.pid(), SIGINT);
  ASSERT_EQ(exitStatus(run.wait(5s)), 130) << run.err();
  EXPECT_LT(std::chrono::steady_clock::now() - second, 5s);
  EXPECT_NE(run.err().find("interrupted again: exiting; these tasks may still run: allot-execute-0"),
            std::string::npos) << run.err();
}

TEST_F(ExecuteInterrupt, SigtermWithTheMasterUpKillsTheTasksAndWaitsForTheirEnd) {
  Child run = runningTask();
  ::kill(run.pid(), SIGTERM);
  ASSERT_EQ(exitStatus(run.wait(kInterruptBound)), 130) << run.err();
  EXPECT_NE(run.out().find("task allot-execute-0 KILLED"), std::string::npos) << run.out();
  EXPECT_EQ(run.err().find("may still run"), std::string::npos) << run.err();
}

}  // namespace
}  // namespace allot::testing
