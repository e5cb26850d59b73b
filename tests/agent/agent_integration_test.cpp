// allot-master + allot-agent + allot-execute as real processes on loopback.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>

#include <gtest/gtest.h>

#include "sdk/scheduler.h"
#include "tests/agent/cluster.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

int exitStatus(int st) { return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1; }

class AgentCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>();
    if (auto why = cluster_->missing(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(cluster_->startMaster()) << "master did not come up";
    ASSERT_TRUE(cluster_->startAgent()) << "agent did not register:\n" << cluster_->agentLog();
  }
  void TearDown() override { cluster_.reset(); }

  std::unique_ptr<Cluster> cluster_;
};

TEST_F(AgentCluster, CommandRunsAndItsExitCodeComesBack) {
  Child ok = cluster_->execute({"--command", "echo out-of-task", "--resources", "cpus:0.1;mem:16"});
  ASSERT_EQ(exitStatus(ok.wait(30s)), 0) << ok.out() << ok.err() << cluster_->agentLog();
  EXPECT_NE(ok.out().find("FINISHED"), std::string::npos) << ok.out();
  // The task's stdout is in its executor's sandbox.
  bool found = false;
  for (const auto& e : fs::recursive_directory_iterator(cluster_->workDir() + "/sandboxes")) {
    if (e.path().extension() == ".stdout" && readAll(e.path()).find("out-of-task") != std::string::npos) {
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(AgentCluster, FailingCommandReportsFailedWithItsExitCode) {
  Child bad = cluster_->execute({"--command", "exit 7", "--resources", "cpus:0.1;mem:16"});
  ASSERT_EQ(exitStatus(bad.wait(30s)), 7) << bad.out() << bad.err();
  EXPECT_NE(bad.out().find("FAILED exit code 7"), std::string::npos) << bad.out();
}

TEST_F(AgentCluster, FiftyInstancesAllFinish) {
  Child many = cluster_->execute({"--command", "true", "--instances", "50", "--resources",
                                  "cpus:0.1;mem:16"});
  ASSERT_EQ(exitStatus(many.wait(60s)), 0) << many.out() << many.err();
  EXPECT_EQ(count(many.out(), " FINISHED"), 50u) << many.out();
}

TEST_F(AgentCluster, KillEndsTheTaskAsKilled) {
  Child run = cluster_->execute({"--command", "sleep 100", "--kill-after", "1", "--resources",
                                 "cpus:0.1;mem:16"});
  ASSERT_EQ(exitStatus(run.wait(30s)), 137) << run.out() << run.err();
  EXPECT_NE(run.out().find("KILLED"), std::string::npos) << run.out();
  EXPECT_TRUE(waitFor([&] { return processesUnder(cluster_->workDir()).empty(); }, 10s))
      << "the task or its executor outlived the kill";
}

TEST_F(AgentCluster, ExecutorKilledFromOutsideIsReported) {
  Child run = cluster_->execute({"--command", "sleep 100", "--resources", "cpus:0.1;mem:16"});
  ASSERT_TRUE(waitFor([&] { return run.out().find("RUNNING") != std::string::npos; }, 30s)) << run.out();
  auto executors = cluster_->executors();
  ASSERT_EQ(executors.size(), 1u);
  ::kill(executors[0], SIGKILL);
  int st = run.wait(30s);
  EXPECT_NE(exitStatus(st), 0);
  EXPECT_NE(run.out().find("FAILED signal 9 (EXECUTOR_SIGNALED)"), std::string::npos) << run.out();
  // Its task went with it.
  EXPECT_TRUE(waitFor([&] { return processesUnder(cluster_->workDir()).empty(); }, 10s));
}

TEST_F(AgentCluster, RestartedAgentReattachesToItsExecutors) {
  Child run = cluster_->execute({"--command", "sleep 3; echo done", "--resources", "cpus:0.1;mem:16"});
  ASSERT_TRUE(waitFor([&] { return run.out().find("RUNNING") != std::string::npos; }, 30s)) << run.out();
  auto before = cluster_->executors();
  ASSERT_EQ(before.size(), 1u);
  cluster_->agentProcess().killOnly(SIGKILL);
  ASSERT_EQ(cluster_->executors(), before) << "the executor died with the agent";
  ASSERT_TRUE(cluster_->startAgent()) << cluster_->agentLog();
  EXPECT_NE(cluster_->agentLog().find("re-attach"), std::string::npos) << cluster_->agentLog();
  ASSERT_EQ(exitStatus(run.wait(30s)), 0) << run.out() << run.err() << cluster_->agentLog();
  EXPECT_NE(run.out().find("FINISHED"), std::string::npos);
}

// A framework that never acknowledges: counts deliveries per update id.
class SilentScheduler : public Scheduler {
 public:
  void resourceOffers(SchedulerDriver& d, const std::vector<wire::Offer>& offers) override {
    for (const auto& o : offers) {
      if (launched) {
        (void)d.declineOffer(o.offer_id());
        continue;
      }
      wire::TaskInfo t;
      t.set_task_id("silent-1");
      t.set_agent_id(o.agent_id());
      Resources::parse("cpus:0.1;mem:16")->toWire(t.mutable_resources());
      t.mutable_command()->set_shell("sleep 30");
      (void)d.acceptOffer({o.offer_id()}, {t});
      launched = true;
    }
  }
  void statusUpdate(SchedulerDriver&, const wire::TaskStatus& s) override {
    if (s.state() == wire::TASK_RUNNING && !s.update_id().empty()) ++deliveries[s.update_id()];
  }
  int maxDeliveries() const {
    int m = 0;
    for (const auto& [id, n] : deliveries) m = std::max(m, n);
    return m;
  }
  bool launched = false;
  std::map<std::string, int> deliveries;
};

TEST_F(AgentCluster, UnacknowledgedUpdateIsResentAfterTheAgentReconnects) {
  asio::io_context io;
  SilentScheduler scheduler;
  wire::FrameworkInfo info;
  info.set_name("silent");
  SchedulerDriver driver(io, scheduler, info, SchedulerOptions{.master = cluster_->masterAddress()});
  ASSERT_TRUE(driver.start());
  auto runUntil = [&](const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io.restart();
      io.run_for(20ms);
    }
    return done();
  };
  ASSERT_TRUE(runUntil([&] { return scheduler.maxDeliveries() >= 1; }, 30s));
  // The agent restarts (its periodic resend also runs, every 1 s here): the
  // RUNNING update comes again with the same update id.
  cluster_->agentProcess().killOnly(SIGKILL);
  ASSERT_TRUE(cluster_->startAgent()) << cluster_->agentLog();
  EXPECT_TRUE(runUntil([&] { return scheduler.maxDeliveries() >= 2; }, 15s));
  EXPECT_EQ(scheduler.deliveries.size(), 1u);
  driver.stop();
  runUntil([] { return false; }, 200ms);
}

TEST_F(AgentCluster, CommandThatCannotExecFailsWithExitCode127) {
  Child run = cluster_->execute({"--command", "/nonexistent/command", "--resources", "cpus:0.1;mem:16"});
  ASSERT_EQ(exitStatus(run.wait(30s)), 127) << run.out() << run.err();
  EXPECT_NE(run.out().find("FAILED exit code 127"), std::string::npos) << run.out();
}

TEST_F(AgentCluster, MissingExecutorBinaryFailsTheTaskWithExecFailed) {
  Child run = cluster_->execute({"--command", "true", "--executor", "/nonexistent/executor",
                                 "--resources", "cpus:0.1;mem:16"});
  ASSERT_EQ(exitStatus(run.wait(30s)), 1) << run.out() << run.err();
  EXPECT_NE(run.out().find("FAILED (EXEC_FAILED)"), std::string::npos) << run.out();
  EXPECT_NE(run.out().find("/nonexistent/executor"), std::string::npos) << run.out();
}

TEST_F(AgentCluster, OldSandboxesAreRemoved) {
  cluster_->agentProcess().killOnly(SIGTERM);
  ASSERT_TRUE(cluster_->startAgent({"--sandbox-max-age", "1"})) << cluster_->agentLog();
  Child run = cluster_->execute({"--command", "true", "--resources", "cpus:0.1;mem:16"});
  ASSERT_EQ(exitStatus(run.wait(30s)), 0) << run.out() << run.err();
  auto sandboxes = [&] {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(cluster_->workDir() + "/sandboxes")) n += e.is_directory();
    return n;
  };
  EXPECT_GE(sandboxes(), 1u);
  // The executor idles out (0.5 s), its sandbox ages past 1 s, gc runs every 1 s.
  EXPECT_TRUE(waitFor([&] { return sandboxes() == 0; }, 15s)) << cluster_->agentLog();
}

class AgentFlags : public ::testing::Test {
 protected:
  int runAgent(std::vector<std::string> args, std::string* err) {
    const char* agent = envOr("ALLOT_AGENT");
    if (!agent) return -2;
    args.insert(args.begin(), agent);
    Cluster scratch;
    Child c(args, scratch.dir() + "/out", scratch.dir() + "/err");
    int st = c.wait(10s);
    *err = c.err();
    return exitStatus(st);
  }
};

TEST_F(AgentFlags, BadInputIsAClearErrorWithExitCode2) {
  if (!envOr("ALLOT_AGENT")) GTEST_SKIP() << "ALLOT_AGENT not set (allot-agent not built)";
  std::string err;
  EXPECT_EQ(runAgent({"--no-such-flag"}, &err), 2);
  EXPECT_NE(err.find("no-such-flag"), std::string::npos) << err;
  EXPECT_EQ(runAgent({"--master", "127.0.0.1:1", "--work-dir", "/tmp/allot-flags-test",
                      "--resources", "cpus:lots"}, &err), 2);
  EXPECT_NE(err.find("--resources"), std::string::npos) << err;
  EXPECT_EQ(runAgent({"--master", "127.0.0.1:1", "--zk", "zk://127.0.0.1:2181/allot"}, &err), 2);
  EXPECT_NE(err.find("give one of --master, --zk and --shards"), std::string::npos) << err;
  EXPECT_EQ(runAgent({"--master", "127.0.0.1", "--work-dir", "/tmp/allot-flags-test"}, &err), 2);
  EXPECT_NE(err.find("--master"), std::string::npos) << err;
  EXPECT_EQ(runAgent({"--work-dir", "/tmp/allot-flags-test"}, &err), 2);
  EXPECT_NE(err.find("--master"), std::string::npos) << err;
  EXPECT_EQ(runAgent({"--master", "127.0.0.1:1", "--work-dir", "/tmp/allot-flags-test",
                      "--attributes", "rack"}, &err), 2);
  EXPECT_NE(err.find("--attributes"), std::string::npos) << err;
  EXPECT_EQ(runAgent({"--master", "127.0.0.1:1", "--work-dir", "/tmp/allot-flags-test",
                      "--isolation", "no/such-isolator"}, &err), 2);
  EXPECT_NE(err.find("--isolation"), std::string::npos) << err;
  fs::remove_all("/tmp/allot-flags-test");
}

}  // namespace
}  // namespace allot::testing
