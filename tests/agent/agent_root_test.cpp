// ROOT: allot-agent with the cgroup isolators on this host's real cgroups.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "tests/agent/cluster.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

int exitStatus(int st) { return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1; }

// Executor cgroups under `root` in any cgroup hierarchy (not the agent's own
// leaf, <root>/agent).
std::vector<std::string> executorCgroups(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    std::error_code ec2;
    for (const auto& c : fs::directory_iterator(h.path() / root, ec2)) {
      if (c.is_directory() && c.path().filename() != "agent") out.push_back(c.path());
    }
  }
  return out;
}

class AgentRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (cgroups)";
    cluster_ = std::make_unique<Cluster>();
    if (auto why = cluster_->missing(); !why.empty()) GTEST_SKIP() << why;
    cgroupsRoot_ = "allot-agent-test-" + std::to_string(getpid());
    cluster_->setCgroupsRoot(cgroupsRoot_);
    setenv("ALLOT_LOG_LEVEL", "debug", 1);  // the master logs each usage report
    bool started = cluster_->startMaster();
    unsetenv("ALLOT_LOG_LEVEL");
    ASSERT_TRUE(started);
    if (!cluster_->startAgent({"--isolation", "cgroups/cpu,cgroups/mem", "--cgroups-root", cgroupsRoot_,
                               "--usage-interval", "0.3"})) {
      GTEST_SKIP() << "the agent cannot isolate with cgroups/cpu,cgroups/mem here:\n"
                   << cluster_->agentLog();
    }
  }
  void TearDown() override {
    cluster_.reset();
    // The agent removes its executors' cgroups; the root itself may stay,
    // and the agent's leaf when the agent was killed.
    for (const auto& h : {"cpu", "cpuacct", "memory", "freezer", "unified"}) {
      std::error_code ec;
      fs::remove(fs::path("/sys/fs/cgroup") / h / cgroupsRoot_ / "agent", ec);
      fs::remove(fs::path("/sys/fs/cgroup") / h / cgroupsRoot_, ec);
    }
  }

  std::unique_ptr<Cluster> cluster_;
  std::string cgroupsRoot_;
};

TEST_F(AgentRoot, ExecutorRunsInItsOwnCgroupAndLeavesNoneBehind) {
  Child run = cluster_->execute({"--command", "cat /proc/self/cgroup", "--resources", "cpus:0.5;mem:64"});
  ASSERT_EQ(exitStatus(run.wait(30s)), 0) << run.out() << run.err() << cluster_->agentLog();
  bool found = false;
  for (const auto& e : fs::recursive_directory_iterator(cluster_->workDir() + "/sandboxes")) {
    if (e.path().extension() == ".stdout") found = readAll(e.path()).find(cgroupsRoot_ + "/") != std::string::npos;
  }
  EXPECT_TRUE(found) << "the task did not run in an executor cgroup under " << cgroupsRoot_;
  EXPECT_TRUE(waitFor([&] { return executorCgroups(cgroupsRoot_).empty(); }, 10s))
      << "left behind: " << (executorCgroups(cgroupsRoot_).empty() ? "" : executorCgroups(cgroupsRoot_)[0]);
}

TEST_F(AgentRoot, MemoryLimitEndsTheExecutorWithItsReason) {
  Child run = cluster_->execute({"--command", "head -c 400000000 /dev/zero | tail -n 1 >/dev/null; sleep 5",
                                 "--resources", "cpus:0.5;mem:32"});
  int st = run.wait(60s);
  EXPECT_NE(exitStatus(st), 0);
  EXPECT_NE(run.out().find("MEMORY_LIMIT"), std::string::npos) << run.out() << cluster_->agentLog();
  EXPECT_TRUE(waitFor([&] { return executorCgroups(cgroupsRoot_).empty(); }, 10s));
}

// docs/hog-analysis.md: the root outweighs the system's other top-level
// groups (a root weighted like its cpus keeps only a fraction of that on a
// busy CPU), and the agent's own process sits in <root>/agent beside its
// executors.
TEST_F(AgentRoot, TheAgentsRootOutweighsTheRestOfTheSystemAndHoldsTheAgent) {
  std::string v1 = "/sys/fs/cgroup/cpu/" + cgroupsRoot_;
  std::string v2 = "/sys/fs/cgroup/" + cgroupsRoot_;
  std::string agentPid = std::to_string(cluster_->agentProcess().pid()) + "\n";
  if (fs::exists(v1 + "/cpu.shares")) {
    EXPECT_EQ(readAll(v1 + "/cpu.shares"), "102400\n");
    EXPECT_NE(readAll(v1 + "/agent/cgroup.procs").find(agentPid), std::string::npos);
  } else {
    ASSERT_TRUE(fs::exists(v2 + "/cpu.weight")) << "no cpu weight file for the agent's root";
    EXPECT_EQ(readAll(v2 + "/cpu.weight"), "10000\n");
    EXPECT_NE(readAll(v2 + "/agent/cgroup.procs").find(agentPid), std::string::npos);
  }
}

TEST_F(AgentRoot, ExecutorUsageReachesTheMaster) {
  Child run = cluster_->execute({"--command", "head -c 20000000 /dev/zero | tail -c 1 >/dev/null; sleep 2",
                                 "--resources", "cpus:0.5;mem:64"});
  ASSERT_EQ(exitStatus(run.wait(30s)), 0) << run.out() << run.err() << cluster_->agentLog();
  std::string log = cluster_->masterLog();
  auto at = log.find("usage from agent");
  ASSERT_NE(at, std::string::npos) << log;
  // Memory measured by the mem isolator: some report shows memory in use.
  EXPECT_TRUE(std::regex_search(log, std::regex(" mem_bytes=[1-9]")))
      << "no report shows memory in use: " << log.substr(at, 400);
}

// The case: no --isolation, a task whose background processes leave
// the executor's session (setsid) and its process tree (a double fork,
// reparented to the agent). When the executor ends they end with it.
class AgentContainment : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (cgroups)";
    cluster_ = std::make_unique<Cluster>();
    if (auto why = cluster_->missing(); !why.empty()) GTEST_SKIP() << why;
    cgroupsRoot_ = "allot-containment-test-" + std::to_string(getpid());
    cluster_->setCgroupsRoot(cgroupsRoot_);
    ASSERT_TRUE(cluster_->startMaster());
    ASSERT_TRUE(cluster_->startAgent({"--cgroups-root", cgroupsRoot_})) << cluster_->agentLog();
  }
  void TearDown() override {
    for (pid_t pid : strays_) {
      if (alive(pid)) kill(pid, SIGKILL);
    }
    cluster_.reset();
    for (const auto& h : {"cpu", "cpuacct", "memory", "freezer", "unified"}) {
      std::error_code ec;
      fs::remove(fs::path("/sys/fs/cgroup") / h / cgroupsRoot_, ec);
    }
  }
  static bool alive(pid_t pid) {
    std::string stat = readAll("/proc/" + std::to_string(pid) + "/stat");
    auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
  }

  std::unique_ptr<Cluster> cluster_;
  std::string cgroupsRoot_;
  std::vector<pid_t> strays_;
};

TEST_F(AgentContainment, BackgroundProcessInANewSessionDiesWithItsExecutor) {
  std::string pidFile = cluster_->workDir() + "/stray.pids";
  // The task runs as --default-user (nobody): it may append, not create.
  { std::ofstream(pidFile).flush(); }
  ::chmod(pidFile.c_str(), 0666);
  // One stray in a new session, one double-forked and in a new session.
  std::string cmd = "setsid sh -c 'echo $$ >> " + pidFile + "; exec sleep 600' </dev/null >/dev/null 2>&1 & "
                    "( ( setsid sh -c 'echo $$ >> " + pidFile + "; exec sleep 600' </dev/null >/dev/null 2>&1 & ) & ); "
                    "sleep 0.5";
  Child run = cluster_->execute({"--command", cmd, "--resources", "cpus:0.1;mem:32"});
  ASSERT_EQ(exitStatus(run.wait(30s)), 0) << run.out() << run.err() << cluster_->agentLog();
  std::istringstream in(readAll(pidFile));
  for (pid_t pid; in >> pid;) strays_.push_back(pid);
  ASSERT_EQ(strays_.size(), 2u) << readAll(pidFile);
  for (pid_t pid : strays_) EXPECT_NE(getsid(pid), getsid(0)) << "the stray left every session we know";
  // The task finished; its executor idles out (0.5 s) and its cgroup is reaped.
  bool gone = waitFor([&] { return !alive(strays_[0]) && !alive(strays_[1]); }, 10s);
  EXPECT_TRUE(gone) << "a task's background process outlived its executor\n" << cluster_->agentLog();
  EXPECT_TRUE(waitFor([&] { return executorCgroups(cgroupsRoot_).empty(); }, 10s));
}

// A process the kill cannot end (here: frozen by a v1 freezer cgroup the
// test made, which holds SIGKILL until it thaws, as uninterruptible sleep
// does) keeps its container's cgroup busy. The agent retries the reap off
// its loop, which goes on serving (another task runs meanwhile), and
// removes the cgroup once the process lets go.
TEST_F(AgentContainment, AContainerWhoseProcessResistsTheKillIsReapedOnceItLetsGo) {
  std::string freezer = "/sys/fs/cgroup/freezer/allot-resist-test-" + std::to_string(getpid());
  if (!fs::exists("/sys/fs/cgroup/freezer/cgroup.procs") || !fs::exists("/sys/fs/cgroup/unified/cgroup.procs")) {
    GTEST_SKIP() << "needs a v1 freezer beside cgroup2 (a hybrid host): the agent tracks with cgroup2, the test "
                    "freezes with v1";
  }
  std::string pidFile = cluster_->workDir() + "/resist.pid";
  { std::ofstream(pidFile).flush(); }
  ::chmod(pidFile.c_str(), 0666);
  Child run = cluster_->execute({"--command", "sleep 600 & echo $! >> " + pidFile + "; wait", "--resources",
                                 "cpus:0.1;mem:32"});
  pid_t resister = 0;
  ASSERT_TRUE(waitFor([&] { return (std::istringstream(readAll(pidFile)) >> resister) && resister > 0; }, 30s))
      << run.out() << cluster_->agentLog();
  strays_.push_back(resister);
  ASSERT_TRUE(fs::create_directory(freezer));
  // Whatever happens below, the process thaws, dies and the freezer goes.
  struct Thaw {
    std::string dir;
    pid_t pid;
    ~Thaw() {
      std::ofstream(dir + "/freezer.state") << "THAWED";
      ::kill(pid, SIGKILL);
      waitFor([&] { return ::rmdir(dir.c_str()) == 0 || errno == ENOENT; }, std::chrono::seconds(5));
    }
  } thaw{freezer, resister};
  std::ofstream(freezer + "/cgroup.procs") << resister;
  std::ofstream(freezer + "/freezer.state") << "FROZEN";
  ASSERT_TRUE(waitFor([&] { return readAll(freezer + "/freezer.state").rfind("FROZEN", 0) == 0; }, 5s));

  run.kill(SIGTERM);  // allot-execute kills its task; the executor then idles out
  bool failed = waitFor([&] { return cluster_->agentLog().find("reap attempt 1 failed") != std::string::npos; }, 20s);
  EXPECT_TRUE(failed) << cluster_->agentLog();
  EXPECT_NE(cluster_->agentLog().find("still has processes"), std::string::npos) << cluster_->agentLog();
  EXPECT_TRUE(alive(resister));
  EXPECT_FALSE(executorCgroups(cgroupsRoot_).empty()) << "the cgroup of a process still alive went";
  // The loop is not waiting for the kernel: another framework's task runs.
  Child other = cluster_->execute({"--command", "true", "--resources", "cpus:0.1;mem:32"});
  EXPECT_EQ(exitStatus(other.wait(30s)), 0) << other.out() << other.err() << cluster_->agentLog();

  std::ofstream(freezer + "/freezer.state") << "THAWED";  // the SIGKILL it held lands
  EXPECT_TRUE(waitFor([&] { return !alive(resister); }, 10s));
  EXPECT_TRUE(waitFor([&] { return executorCgroups(cgroupsRoot_).empty(); }, 20s))
      << "left behind: " << (executorCgroups(cgroupsRoot_).empty() ? "" : executorCgroups(cgroupsRoot_)[0])
      << "\n" << cluster_->agentLog();
  EXPECT_NE(cluster_->agentLog().find("failed attempt(s)"), std::string::npos) << cluster_->agentLog();
}

}  // namespace
}  // namespace allot::testing
