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

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

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
      // The executor's cgroup may outlive the stopped agent (an idle command
      // executor): remove the whole tree, deepest directories first (a
      // cgroup directory goes with rmdir only once it has no children).
      for (const auto& h : {"cpu", "cpuacct", "memory", "freezer", "unified"}) {
        fs::path root = fs::path("/sys/fs/cgroup") / h / cgroupsRoot_;
        std::error_code ec;
        std::vector<fs::path> dirs;
        for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
          if (it->is_directory(ec)) dirs.push_back(it->path());
        }
        for (auto d = dirs.rbegin(); d != dirs.rend(); ++d) fs::remove(*d, ec);
        fs::remove(root, ec);
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
  // An operator's root: confined (Docker's capabilities), and the seccomp
  // filter answers first, with EPERM even where the kernel would say
  // ENOSYS (no module support) or let keyctl through.
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

// What a task tries, to leave its limits or the machine's rules (the
// output lines are checked by expectConfined):
//   ESCAPED f      it wrote its pid into cgroup.procs f outside its cgroup
//   tried n        how many cgroup.procs files it tried
//   mount r e      mount(2) of a tmpfs: result and errno
//   remount r e    remount of the cpu hierarchy read-write
//   init_module r e / finit_module r e   module loading
//   PEEK ok|denied the agent's root directory through /proc/<agent>/root
// then its mount table and capability sets after "---", and its
// /proc/self/cgroup after "--- cgroup".
const char* kEscapeProbe =
    "echo uid=$(id -u); n=0; for f in $(find /sys/fs/cgroup -maxdepth 4 -name cgroup.procs); do n=$((n+1)); "
    "if (echo $$ > $f) 2>/dev/null; then echo ESCAPED $f; fi; done; echo tried $n; "
    "python3 -c 'import ctypes; l=ctypes.CDLL(None, use_errno=True)\n"
    "def t(n, *a):\n"
    "  r=l.syscall(*a); print(n, r, ctypes.get_errno())\n"
    "t(\"mount\", 165, b\"none\", b\"/mnt\", b\"tmpfs\", 0, 0)\n"
    "t(\"remount\", 165, b\"none\", b\"/sys/fs/cgroup/cpu\", 0, 32, 0)\n"
    "t(\"init_module\", 175, 0, 0, b\"\")\n"
    "t(\"finit_module\", 313, 0, b\"\", 0)'; "
    "agent=$(awk '/^PPid/{print $2}' /proc/$PPID/status); "
    "if ls /proc/$agent/root/ >/dev/null 2>&1; then echo PEEK ok; else echo PEEK denied; fi; "
    "echo ---; cat /proc/self/mountinfo; grep -E '^Cap(Prm|Eff|Bnd|Inh|Amb):' /proc/self/status; "
    "echo '--- cgroup'; cat /proc/self/cgroup";

// The task could not move itself, mount, load modules or look into the
// agent; `root` tasks also saw read-only /sys and /proc/sys and their own
// cgroup namespace.
void expectConfined(const std::string& task, bool root, const std::string& cgroupsRoot) {
  EXPECT_NE(task.find("tried "), std::string::npos) << task;
  EXPECT_EQ(task.find("tried 0\n"), std::string::npos) << task;
  EXPECT_EQ(task.find("ESCAPED"), std::string::npos) << task;
  for (const char* call : {"mount", "remount"}) {
    EXPECT_NE(task.find(std::string(call) + " -1 1\n"), std::string::npos) << call << " was not refused (EPERM):\n"
                                                                             << task;
  }
  // ENOSYS: a kernel built without module support.
  for (const char* call : {"init_module", "finit_module"}) {
    EXPECT_TRUE(task.find(std::string(call) + " -1 1\n") != std::string::npos ||
                task.find(std::string(call) + " -1 38\n") != std::string::npos)
        << call << " was not refused (EPERM or ENOSYS):\n" << task;
  }
  EXPECT_NE(task.find("PEEK denied"), std::string::npos) << task;
  if (!root) return;
  size_t tableAt = task.find("---\n");
  size_t cgroupAt = task.find("--- cgroup\n");
  ASSERT_NE(tableAt, std::string::npos) << task;
  ASSERT_NE(cgroupAt, std::string::npos) << task;
  std::string table = task.substr(tableAt, cgroupAt - tableAt);
  std::vector<std::string> readOnly = {" /sys ", " /proc/sys "};
  for (const char* hierarchy : {"/sys/fs/cgroup", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory"}) {
    struct stat st{};
    if (::stat(hierarchy, &st) == 0) readOnly.push_back(std::string(" ") + hierarchy + " ");
  }
  for (const std::string& mountPoint : readOnly) {
    size_t at = table.find(mountPoint);
    ASSERT_NE(at, std::string::npos) << mountPoint << " not in\n" << table;
    EXPECT_EQ(table.compare(at + mountPoint.size(), 3, "ro,"), 0) << mountPoint << " is not read-only:\n" << table;
  }
  // Docker's default capability set: CHOWN DAC_OVERRIDE FOWNER FSETID KILL
  // SETGID SETUID SETPCAP NET_BIND_SERVICE NET_RAW SYS_CHROOT MKNOD
  // AUDIT_WRITE SETFCAP.
  for (const char* set : {"CapPrm:\t00000000a80425fb", "CapEff:\t00000000a80425fb", "CapBnd:\t00000000a80425fb",
                          "CapInh:\t0000000000000000", "CapAmb:\t0000000000000000"}) {
    EXPECT_NE(table.find(set), std::string::npos) << set << " in\n" << table;
  }
  // A cgroup namespace rooted at the task's own cgroup: its cgroups read
  // "/", not the path under the agent's --cgroups-root.
  std::string cgroups = task.substr(cgroupAt);
  EXPECT_NE(cgroups.find(":/\n"), std::string::npos) << cgroups;
  EXPECT_EQ(cgroups.find(cgroupsRoot), std::string::npos) << cgroups;
}

// A separate master with this ACL file (the fixture's is replaced).
void restartWithAcls(std::unique_ptr<Cluster>& cluster, const std::string& acls) {
  cluster = std::make_unique<Cluster>();
  std::string file = cluster->dir() + "/acls";
  std::ofstream(file) << acls;
  ASSERT_TRUE(cluster->startMaster({"--acls", file}));
}

TEST_F(TrustRoot, RootRunsOnlyWhenTheAclNamesRoot) {
  restartWithAcls(cluster_, "register_framework * users=*\nregister_agent *\n");
  startAgent();
  std::string refused = run("id -u", {"--user", "root"});
  EXPECT_NE(refused.find("may not"), std::string::npos) << refused;
  EXPECT_EQ(refused.find("FINISHED"), std::string::npos) << refused;

  restartWithAcls(cluster_, "register_framework * users=*,root\nregister_agent *\n");
  startAgent();
  std::string out = run("echo uid=$(id -u)", {"--user", "root"});
  ASSERT_NE(out.find("FINISHED"), std::string::npos) << out << cluster_->agentLog();
  EXPECT_NE(taskOutput(cluster_->workDir()).find("uid=0\n"), std::string::npos) << taskOutput(cluster_->workDir());
}

TEST_F(TrustRoot, AllowedRootTaskStaysInsideItsContainer) {
  // No seccomp isolator: the capability sets and the read-only mounts alone
  // keep it in.
  restartWithAcls(cluster_, "register_framework * users=*,root\nregister_agent *\n");
  cgroupsRoot_ = "allot-trust-root-" + std::to_string(getpid());
  startAgent({"--isolation", "cgroups/cpu,cgroups/mem", "--cgroups-root", cgroupsRoot_});
  std::string out = run(kEscapeProbe, {"--user", "root"});
  ASSERT_NE(out.find("FINISHED"), std::string::npos) << out << cluster_->agentLog();
  std::string task = taskOutput(cluster_->workDir());
  EXPECT_NE(task.find("uid=0"), std::string::npos) << task;
  expectConfined(task, true, cgroupsRoot_);
  // The host's own mounts are untouched.
  std::string hostMounts = readAll("/proc/self/mountinfo");
  EXPECT_EQ(hostMounts.find(" /sys/fs/cgroup/cpu ro,"), std::string::npos) << hostMounts;
}

TEST_F(TrustRoot, DefaultTaskCannotLeaveItsContainerEither) {
  cgroupsRoot_ = "allot-trust-nobody-" + std::to_string(getpid());
  startAgent({"--isolation", "cgroups/cpu,cgroups/mem", "--cgroups-root", cgroupsRoot_});
  std::string out = run(kEscapeProbe);
  ASSERT_NE(out.find("FINISHED"), std::string::npos) << out << cluster_->agentLog();
  expectConfined(taskOutput(cluster_->workDir()), false, cgroupsRoot_);
}

// namespaces/pid: the task sees its executor (pid 1), the executor's log
// writer and its own shell only, and cannot kill the agent, even as root;
// the agent stays up.
void expectOwnPidNamespace(Cluster& cluster, const std::string& task) {
  EXPECT_NE(task.find("executor=allot-executor\n"), std::string::npos) << "pid 1 is not the executor:\n" << task;
  size_t at = task.find("procs=");
  ASSERT_NE(at, std::string::npos) << task;
  EXPECT_LE(std::atoi(task.c_str() + at + 6), 6) << "the task sees processes not its executor's:\n" << task;
  EXPECT_NE(task.find("agent-visible=no\n"), std::string::npos) << task;
  EXPECT_EQ(task.find("kill=0\n"), std::string::npos) << "the task killed the agent:\n" << task;
  EXPECT_EQ(::kill(cluster.agentProcess().pid(), 0), 0) << "the agent is gone";
}

std::string pidNamespaceProbe(pid_t agent) {
  std::string a = std::to_string(agent);
  return "echo executor=$(cat /proc/1/comm); echo procs=$(ls /proc | grep -c '^[0-9]*$'); "
         "if [ -d /proc/" + a + " ]; then echo agent-visible=yes; else echo agent-visible=no; fi; "
         "kill -9 " + a + " 2>/dev/null; echo kill=$?";
}

TEST_F(TrustRoot, PidNamespaceIsolatorHidesTheHostsProcesses) {
  startAgent({"--isolation", "seccomp,namespaces/pid"});
  std::string out = run(pidNamespaceProbe(cluster_->agentProcess().pid()));
  ASSERT_NE(out.find("FINISHED"), std::string::npos) << out << cluster_->agentLog();
  expectOwnPidNamespace(*cluster_, taskOutput(cluster_->workDir()));
}

TEST_F(TrustRoot, PidNamespaceAlwaysHoldsARootTask) {
  restartWithAcls(cluster_, "register_framework * users=*,root\nregister_agent *\n");
  startAgent();
  std::string out = run(pidNamespaceProbe(cluster_->agentProcess().pid()) + "; echo uid=$(id -u)", {"--user", "root"});
  ASSERT_NE(out.find("FINISHED"), std::string::npos) << out << cluster_->agentLog();
  std::string task = taskOutput(cluster_->workDir());
  EXPECT_NE(task.find("uid=0\n"), std::string::npos) << task;
  expectOwnPidNamespace(*cluster_, task);
}

// The NSpid line of /proc/<pid>/status (the pid in each PID namespace
// from the host's down), "" when there is no such process.
std::string nsPids(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("NSpid:", 0) == 0) return line.substr(6);
  }
  return "";
}

// An agent restart re-attaches an executor that lives in its own PID
// namespace: recovery finds it by its host pid (what the agent recorded and
// what /proc of the host shows), not by the 1 it has inside.
TEST_F(TrustRoot, RestartedAgentReattachesAnExecutorInItsOwnPidNamespace) {
  std::vector<std::string> flags = {"--isolation", "namespaces/pid"};
  startAgent(flags);
  Child task = cluster_->execute({"--command", "sleep 3; echo done", "--resources", "cpus:0.5;mem:64"});
  ASSERT_TRUE(waitFor([&] { return task.out().find("RUNNING") != std::string::npos; }, 30s))
      << task.out() << cluster_->agentLog();
  auto before = cluster_->executors();
  ASSERT_EQ(before.size(), 1u);
  pid_t executor = before[0];
  std::istringstream ids(nsPids(executor));
  pid_t hostPid = 0, innerPid = 0;
  ids >> hostPid >> innerPid;
  ASSERT_EQ(hostPid, executor) << nsPids(executor);
  ASSERT_EQ(innerPid, 1) << "the executor is not pid 1 of its own namespace: " << nsPids(executor);

  cluster_->agentProcess().killOnly(SIGKILL);
  ASSERT_EQ(cluster_->executors(), before) << "the executor died with the agent";
  startAgent(flags);
  std::string log = cluster_->agentLog();
  EXPECT_NE(log.find("(pid " + std::to_string(executor) + ") with"), std::string::npos)
      << "not re-attached by its host pid " << executor << ":\n" << log;
  ASSERT_NE(task.wait(40s), -1) << task.out() << cluster_->agentLog();
  EXPECT_NE(task.out().find("FINISHED"), std::string::npos) << task.out() << cluster_->agentLog();
  EXPECT_NE(cluster_->agentLog().find(" re-attached with "), std::string::npos) << cluster_->agentLog();
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
