// ROOT: tasks run unprivileged (run-as user, no capabilities, no_new_privs,
// the seccomp isolator's default profile), their sandboxes are private, and
// only the executor the agent launched can register as it. A real master,
// agent and allot-execute; real users, cgroups and seccomp.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tests/agent/cluster.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

int exitStatus(int st) { return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1; }

// Everything the tasks wrote to stdout, over all sandboxes.
std::string taskOutput(const std::string& workDir) {
  std::string all;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(workDir + "/sandboxes", ec)) {
    if (e.path().extension() == ".stdout") all += readAll(e.path());
  }
  return all;
}

uid_t uidOf(const char* name) {
  passwd* pw = getpwnam(name);
  return pw ? pw->pw_uid : static_cast<uid_t>(-1);
}

// A user made for this test (useradd), removed on destruction.
class TestUser {
 public:
  TestUser() {
    static int made = 0;
    name_ = "allot-t" + std::to_string(getpid() % 100000) + "-" + std::to_string(++made);
    std::string cmd = "useradd --system --no-create-home --shell /usr/sbin/nologin " + name_ + " 2>/dev/null";
    ok_ = std::system(cmd.c_str()) == 0 && uidOf(name_.c_str()) != static_cast<uid_t>(-1);
  }
  // -f: a task of this user may still be exiting.
  ~TestUser() {
    if (ok_) (void)!std::system(("userdel -f " + name_ + " 2>/dev/null").c_str());
  }
  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  bool ok_ = false;
};

class TrustRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (run-as users, seccomp, cgroups)";
    impostor_ = envOr("ALLOT_IMPOSTOR") ? envOr("ALLOT_IMPOSTOR") : "";
    cluster_ = std::make_unique<Cluster>();
    if (auto why = cluster_->missing(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(cluster_->startMaster());
  }
  void TearDown() override {
    cluster_.reset();
    if (!cgroupsRoot_.empty()) {
      for (const auto& h : {"cpu", "cpuacct", "memory", "freezer", "unified"}) {
        std::error_code ec;
        fs::remove(fs::path("/sys/fs/cgroup") / h / cgroupsRoot_, ec);
      }
    }
  }

  void startAgent(std::vector<std::string> extra = {}) {
    ASSERT_TRUE(cluster_->startAgent(std::move(extra))) << cluster_->agentLog();
  }

  // Runs one command task to its end; returns allot-execute's output.
  std::string run(const std::string& command, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--command", command, "--resources", "cpus:0.5;mem:64"};
    args.insert(args.end(), extra.begin(), extra.end());
    Child c = cluster_->execute(args);
    c.wait(40s);
    return c.out() + c.err();
  }

  std::unique_ptr<Cluster> cluster_;
  std::string impostor_;
  std::string cgroupsRoot_;
};

TEST_F(TrustRoot, TaskRunsAsNobodyByDefaultWithoutPrivileges) {
  startAgent();
  std::string out = run("echo uid=$(id -u) gid=$(id -g); grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' "
                        "/proc/self/status");
  ASSERT_NE(out.find("FINISHED"), std::string::npos) << out << cluster_->agentLog();
  std::string task = taskOutput(cluster_->workDir());
  EXPECT_NE(task.find("uid=" + std::to_string(uidOf("nobody")) + " "), std::string::npos) << task;
  EXPECT_EQ(task.find("uid=0 "), std::string::npos) << task;
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    EXPECT_NE(task.find(std::string(set) + ":\t0000000000000000"), std::string::npos) << set << " in\n" << task;
  }
  EXPECT_NE(task.find("NoNewPrivs:\t1"), std::string::npos) << task;
  EXPECT_NE(task.find("Seccomp:\t2"), std::string::npos) << "the default seccomp isolator is not on:\n" << task;
}

TEST_F(TrustRoot, TaskRunsAsTheUserItNames) {
  TestUser user;
  if (!user.ok()) GTEST_SKIP() << "useradd " << user.name() << " failed";
  startAgent();
  std::string out = run("id -un", {"--user", user.name()});
  ASSERT_NE(out.find("FINISHED"), std::string::npos) << out << cluster_->agentLog();
  EXPECT_NE(taskOutput(cluster_->workDir()).find(user.name() + "\n"), std::string::npos);
}

TEST_F(TrustRoot, RootAndUnknownUsersAreRefusedWithAReason) {
  startAgent();
  std::string root = run("id -u", {"--user", "root"});
  // Refused by the master's default ACL, or (had the master let it through
  // without RunTask.allow_root) by the agent.
  EXPECT_TRUE(root.find("FAILED (NOT_AUTHORIZED)") != std::string::npos ||
              root.find("may not run tasks as user 'root'") != std::string::npos)
      << root;
  EXPECT_EQ(root.find("FINISHED"), std::string::npos) << root;
  std::string unknown = run("id -u", {"--user", "no-such-user-allot"});
  EXPECT_NE(unknown.find("does not exist on this agent"), std::string::npos) << unknown;
  EXPECT_TRUE(waitFor([&] { return processesUnder(cluster_->workDir()).empty(); }, 10s));
}

TEST_F(TrustRoot, SandboxIsPrivateToTheRunAsUser) {
  TestUser other;
  if (!other.ok()) GTEST_SKIP() << "useradd " << other.name() << " failed";
  startAgent();
  std::string out = run("echo secret-output; echo secret-error >&2");
  ASSERT_NE(out.find("FINISHED"), std::string::npos) << out;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(cluster_->workDir() + "/sandboxes")) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) {
    struct stat st{};
    ASSERT_EQ(::stat(f.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07, 0u) << f << " is readable by other users";
    EXPECT_EQ(st.st_uid, uidOf("nobody")) << f;
    // Read it as another unprivileged user.
    pid_t pid = fork();
    if (pid == 0) {
      passwd* pw = getpwnam(other.name().c_str());
      if (!pw || setgroups(0, nullptr) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) _exit(3);
      _exit(::open(f.c_str(), O_RDONLY) >= 0 ? 0 : (errno == EACCES ? 1 : 2));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_EQ(exitStatus(status), 1) << other.name() << " could open " << f;
  }
}

TEST_F(TrustRoot, DefaultProfileRefusesMountModulesAndNamespacesWithEperm) {
  // Root with every capability: only the seccomp filter stands in the way.
  startAgent({"--default-user", "root"});
  std::string probe =
      "python3 -c 'import ctypes; l=ctypes.CDLL(None, use_errno=True)\n"
      "def t(n, *a):\n"
      "  r=l.syscall(*a); print(n, r, ctypes.get_errno())\n"
      "t(\"mount\", 165, b\"none\", b\"/mnt\", b\"tmpfs\", 0, 0)\n"
      "t(\"init_module\", 175, 0, 0, b\"\")\n"
      "t(\"finit_module\", 313, 0, b\"\", 0)\n"
      "t(\"unshare\", 272, 0x10000000)\n"
      "t(\"keyctl\", 250, 0, 0)\n"
      "t(\"bpf\", 321, 0, 0, 0)\n"
      "t(\"getpid\", 39)'";
  std::string out = run(probe);
  ASSERT_NE(out.find("FINISHED"), std::string::npos) << out << cluster_->agentLog();
  std::string task = taskOutput(cluster_->workDir());
  for (const char* call : {"mount", "init_module", "finit_module", "unshare", "keyctl", "bpf"}) {
    EXPECT_NE(task.find(std::string(call) + " -1 1\n"), std::string::npos) << call << " was not refused with EPERM:\n"
                                                                             << task;
  }
  EXPECT_EQ(task.find("getpid -1"), std::string::npos) << task;
}

TEST_F(TrustRoot, TaskCannotMoveItselfIntoAnyOtherCgroup) {
  cgroupsRoot_ = "allot-trust-test-" + std::to_string(getpid());
  startAgent({"--isolation", "seccomp,cgroups/cpu,cgroups/mem", "--cgroups-root", cgroupsRoot_});
  std::string out = run(
      "n=0; for f in $(find /sys/fs/cgroup -maxdepth 4 -name cgroup.procs); do n=$((n+1)); "
      "if (echo $$ > $f) 2>/dev/null; then echo ESCAPED $f; fi; done; echo tried $n");
  ASSERT_NE(out.find("FINISHED"), std::string::npos) << out << cluster_->agentLog();
  std::string task = taskOutput(cluster_->workDir());
  EXPECT_NE(task.find("tried "), std::string::npos) << task;
  EXPECT_EQ(task.find("tried 0\n"), std::string::npos) << task;
  EXPECT_EQ(task.find("ESCAPED"), std::string::npos) << task;
}

TEST_F(TrustRoot, TaskCannotRegisterAsAnotherExecutor) {
  if (impostor_.empty()) GTEST_SKIP() << "ALLOT_IMPOSTOR not set";
  startAgent();
  Child victim = cluster_->execute({"--command", "sleep 15", "--resources", "cpus:0.5;mem:64"});
  std::string victimFramework;
  ASSERT_TRUE(waitFor([&] {
    std::string o = victim.out();
    size_t at = o.find("registered as framework ");
    if (at == std::string::npos || o.find("RUNNING") == std::string::npos) return false;
    victimFramework = o.substr(at + 24, o.find('\n', at) - at - 24);
    return true;
  }, 20s)) << victim.out() << cluster_->agentLog();
  std::string out = run(impostor_ + " register " + victimFramework + " allot-command-executor; " + impostor_ +
                        " register $ALLOT_FRAMEWORK_ID $ALLOT_EXECUTOR_ID wrong-secret; " + impostor_ + " hold 8 1");
  ASSERT_NE(out.find("FINISHED"), std::string::npos) << out << cluster_->agentLog();
  std::string task = taskOutput(cluster_->workDir());
  EXPECT_NE(task.find("REFUSED: not authorized: the connecting process does not belong"), std::string::npos) << task;
  EXPECT_NE(task.find("REFUSED: not authorized: wrong executor secret"), std::string::npos) << task;
  EXPECT_NE(task.find("HELD 4 of 8"), std::string::npos) << task;
  // A process outside every executor is turned away at once.
  setenv("ALLOT_AGENT_ENDPOINT", ("unix:" + cluster_->workDir() + "/agent.sock").c_str(), 1);
  Child direct({impostor_, "register", victimFramework, "allot-command-executor"}, cluster_->dir() + "/imp.out",
               cluster_->dir() + "/imp.err");
  unsetenv("ALLOT_AGENT_ENDPOINT");
  direct.wait(15s);
  EXPECT_EQ(direct.out().rfind("CLOSED: ", 0), 0u) << direct.out() << direct.err();
  EXPECT_NE(cluster_->agentLog().find("not a process of any executor"), std::string::npos);
  // The victim's task still runs to its end and its executor stays registered.
  EXPECT_EQ(exitStatus(victim.wait(30s)), 0) << victim.out() << cluster_->agentLog();
}

}  // namespace
}  // namespace allot::testing
