// Launcher features that need root: born into a cgroup2 directory
// (CLONE_INTO_CGROUP), joining v1 cgroups by cgroup.procs, dropping to
// an unprivileged user with no_new_privs, a PID namespace of its own, and a
// confined root child that cannot write the host's files.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <cstdlib>
#include <cstring>
#include <signal.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include "base/asio.h"
#include "tests/common/test_util.h"
#include "base/unique_fd.h"
#include "base/uring_poller.h"
#include "launcher/launcher.h"
#include "launcher/process_tree.h"

namespace allot {
namespace {

using testing::readFile;
using testing::runUntil;

using namespace std::chrono_literals;
namespace fs = std::filesystem;


class LauncherRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    poller_ = std::move(*UringPoller::create(io_));
    launcher_ = std::move(*Launcher::create(io_, *poller_));
    dir_ = fs::temp_directory_path() / ("allot-launcher-root-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::all);
  }
  void TearDown() override {
    for (const auto& cg : cgroups_) rmdir(cg.c_str());
    fs::remove_all(dir_);
  }

  std::string makeCgroup(const std::string& hierarchy) {
    std::string path = hierarchy + "/allot-launcher-test-" + std::to_string(getpid());
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return "";
    cgroups_.push_back(path);
    return path;
  }

  ExitInfo run(LaunchSpec spec) {
    std::optional<ExitInfo> exit;
    auto pid = launcher_->launch(spec, [&](const ExitInfo& e) { exit = e; });
    EXPECT_TRUE(pid.ok()) << (pid.ok() ? "" : pid.error().describe());
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (pid.ok() && !exit && std::chrono::steady_clock::now() < deadline) {
      io_.restart();
      io_.run_for(5ms);
    }
    return exit.value_or(ExitInfo{});
  }

  LaunchSpec shell(const std::string& command) {
    LaunchSpec spec;
    spec.argv = {"/bin/sh", "-c", command};
    spec.env = {"PATH=/usr/bin:/bin"};
    spec.workDir = dir_.string();
    spec.stdoutPath = (dir_ / "stdout").string();
    return spec;
  }

  asio::io_context io_;
  std::unique_ptr<UringPoller> poller_;
  std::unique_ptr<Launcher> launcher_;
  fs::path dir_;
  std::vector<std::string> cgroups_;
};

TEST_F(LauncherRootTest, ChildIsBornInsideACgroup2Directory) {
  if (!fs::exists("/sys/fs/cgroup/unified/cgroup.procs") &&
      !fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
    GTEST_SKIP() << "no cgroup2 hierarchy mounted";
  }
  std::string root = fs::exists("/sys/fs/cgroup/unified/cgroup.procs") ? "/sys/fs/cgroup/unified"
                                                                      : "/sys/fs/cgroup";
  std::string cg = makeCgroup(root);
  ASSERT_FALSE(cg.empty());
  UniqueFd dirFd(open(cg.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  LaunchSpec spec = shell("cat /proc/self/cgroup");
  spec.setup.cgroupDirFd = dirFd.get();
  ASSERT_EQ(run(spec).exitCode, 0);
  std::string name = fs::path(cg).filename().string();
  EXPECT_NE(readFile(spec.stdoutPath).find("0::/" + name), std::string::npos) << readFile(spec.stdoutPath);
}

TEST_F(LauncherRootTest, ExecFailureInsideACgroup2DirectoryIsAnError) {
  // launch() clones vfork-style into the directory too (clone3 with
  // CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP): the child reports the
  // failed exec in the memory it shares with the launcher.
  std::string root = fs::exists("/sys/fs/cgroup/unified/cgroup.procs") ? "/sys/fs/cgroup/unified"
                     : fs::exists("/sys/fs/cgroup/cgroup.controllers") ? "/sys/fs/cgroup"
                                                                        : "";
  if (root.empty()) GTEST_SKIP() << "no cgroup2 hierarchy mounted";
  std::string cg = makeCgroup(root);
  ASSERT_FALSE(cg.empty());
  UniqueFd dirFd(open(cg.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  LaunchSpec spec = shell("true");
  spec.argv = {"/no/such/binary"};
  spec.setup.cgroupDirFd = dirFd.get();
  auto pid = launcher_->launch(spec, [](const ExitInfo&) {});
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.error().errnum, ENOENT);
  EXPECT_NE(pid.error().describe().find("exec /no/such/binary"), std::string::npos)
      << pid.error().describe();
  EXPECT_EQ(readFile(cg + "/cgroup.procs"), "") << "the failed child was reaped";
}

TEST_F(LauncherRootTest, ChildJoinsV1CgroupsBeforeExec) {
  if (!fs::exists("/sys/fs/cgroup/pids/cgroup.procs")) GTEST_SKIP() << "no v1 pids hierarchy";
  std::string cg = makeCgroup("/sys/fs/cgroup/pids");
  LaunchSpec spec = shell("cat /proc/self/cgroup");
  spec.setup.cgroupProcsFiles = {cg + "/cgroup.procs"};
  ASSERT_EQ(run(spec).exitCode, 0);
  std::string name = fs::path(cg).filename().string();
  EXPECT_NE(readFile(spec.stdoutPath).find("pids:/" + name), std::string::npos) << readFile(spec.stdoutPath);
}

// startOffLoop() returns before the clone has: here the child's setup
// blocks opening its stdout (a FIFO nobody reads yet) while the test, on
// the loop's thread, goes on; launch() would wait for the exec and never
// return.
TEST_F(LauncherRootTest, StartOffLoopDoesNotWaitForTheChildsSetupOrExec) {
  LaunchSpec spec = shell("echo started-then-exec");
  spec.stdoutPath = (dir_ / "fifo").string();
  ASSERT_EQ(mkfifo(spec.stdoutPath.c_str(), 0600), 0);
  std::optional<ExitInfo> exit;
  std::optional<Result<pid_t>> started;
  launcher_->startOffLoop(spec, [&](const ExitInfo& e) { exit = e; },
                          [&](Result<pid_t> pid) { started = std::move(pid); });
  UniqueFd reader(open(spec.stdoutPath.c_str(), O_RDONLY | O_CLOEXEC));  // unblocks the child
  ASSERT_TRUE(reader.valid());
  std::string out;
  char buf[64];
  for (ssize_t n; (n = read(reader.get(), buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(out, "started-then-exec\n");
  ASSERT_TRUE(runUntil(io_, [&] { return exit.has_value(); }, 10s));
  ASSERT_TRUE(started && started->ok()) << (started ? started->error().describe() : "no answer");
  EXPECT_EQ(exit->exitCode, 0);
  EXPECT_TRUE(exit->setupError.empty()) << exit->setupError;
}

// startOffLoop(): the clone on the launcher's own thread, the pid back on
// the loop (never before startOffLoop returns); the child is born in its
// cgroup2 directory and joins its v1 cgroup although the caller closed its
// directory descriptor right after the call (the launcher keeps its own).
TEST_F(LauncherRootTest, StartOffLoopBringsThePidBackOnTheLoopAndTheChildIntoItsCgroups) {
  std::string unified = fs::exists("/sys/fs/cgroup/unified/cgroup.procs") ? "/sys/fs/cgroup/unified"
                        : fs::exists("/sys/fs/cgroup/cgroup.controllers") ? "/sys/fs/cgroup"
                                                                           : "";
  if (unified.empty()) GTEST_SKIP() << "no cgroup2 hierarchy mounted";
  std::string cg = makeCgroup(unified);
  ASSERT_FALSE(cg.empty());
  LaunchSpec spec = shell("cat /proc/self/cgroup");
  UniqueFd dirFd(open(cg.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  spec.setup.cgroupDirFd = dirFd.get();
  std::string pids;
  if (fs::exists("/sys/fs/cgroup/pids/cgroup.procs")) {
    pids = makeCgroup("/sys/fs/cgroup/pids");
    spec.setup.cgroupProcsFiles = {pids + "/cgroup.procs"};
  }
  std::optional<Result<pid_t>> started;
  std::optional<ExitInfo> exit;
  launcher_->startOffLoop(spec, [&](const ExitInfo& e) { exit = e; },
                          [&](Result<pid_t> pid) { started = std::move(pid); });
  dirFd.reset();
  EXPECT_FALSE(started.has_value()) << "the start came back before the loop ran";
  ASSERT_TRUE(runUntil(io_, [&] { return exit.has_value(); }, 10s));
  ASSERT_TRUE(started.has_value() && started->ok()) << (started && !started->ok() ? started->error().describe() : "");
  EXPECT_EQ(exit->pid, **started);
  EXPECT_EQ(exit->exitCode, 0);
  EXPECT_TRUE(exit->statusKnown);
  std::string out = readFile(spec.stdoutPath);
  EXPECT_NE(out.find("0::/" + fs::path(cg).filename().string()), std::string::npos) << out;
  if (!pids.empty()) {
    EXPECT_NE(out.find("pids:/" + fs::path(pids).filename().string()), std::string::npos) << out;
  }
  EXPECT_EQ(launcher_->supervisedCount(), 0u);
}

// startOffLoop()'s process comes back with its start time, read on the
// clone thread (a read of /proc/<pid>/stat on the loop waited for a new
// process's exec locks under the hog): the same as /proc says.
TEST_F(LauncherRootTest, StartOffLoopKnowsTheProcessStartTime) {
  std::optional<Result<pid_t>> started;
  bool exited = false;
  launcher_->startOffLoop(shell("exec sleep 30"), [&](const ExitInfo&) { exited = true; },
                          [&](Result<pid_t> pid) { started = std::move(pid); });
  ASSERT_TRUE(runUntil(io_, [&] { return started.has_value(); }, 10s));
  ASSERT_TRUE(started->ok()) << started->error().describe();
  pid_t pid = **started;
  std::optional<uint64_t> known = launcher_->startTimeOf(pid);
  ASSERT_TRUE(known.has_value());
  EXPECT_EQ(known, processStartTimeOf(pid));
  ASSERT_TRUE(launcher_->signal(pid, SIGKILL).ok());
  ASSERT_TRUE(runUntil(io_, [&] { return exited; }, 10s));
}

// A child cloned off the loop that cannot exec: the clone thread waited
// for it (vfork-style), so the start itself fails, naming the step, and no
// exit follows; the child is reaped.
TEST_F(LauncherRootTest, StartOffLoopReportsASetupFailureAsTheStartsError) {
  LaunchSpec spec = shell("true");
  spec.argv = {"/no/such/binary"};
  std::optional<Result<pid_t>> started;
  bool exited = false;
  launcher_->startOffLoop(spec, [&](const ExitInfo&) { exited = true; },
                          [&](Result<pid_t> pid) { started = std::move(pid); });
  ASSERT_TRUE(runUntil(io_, [&] { return started.has_value(); }, 10s));
  ASSERT_FALSE(started->ok());
  EXPECT_NE(started->error().describe().find("exec /no/such/binary"), std::string::npos)
      << started->error().describe();
  EXPECT_EQ(started->error().errnum, ENOENT);
  runUntil(io_, [] { return false; }, 50ms);
  EXPECT_FALSE(exited);
  EXPECT_EQ(launcher_->supervisedCount(), 0u);
  EXPECT_EQ(testing::childrenInState(""), 0) << "the failed child was not reaped";
}

// The clone thread runs niced (so that it never preempts the loop), and a
// child inherits its cloning thread's nice value: every executor, and so
// every task, ran at nice 10. Each child takes the loop's back before its
// setup, whichever way it was cloned.
TEST_F(LauncherRootTest, EveryChildRunsAtTheLoopsNiceValueNotTheCloneThreads) {
  errno = 0;
  int loopNice = getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  std::optional<Result<pid_t>> started;
  std::optional<ExitInfo> exit;
  launcher_->startOffLoop(shell("nice > " + (dir_ / "off-loop").string()), [&](const ExitInfo& e) { exit = e; },
                          [&](Result<pid_t> pid) { started = std::move(pid); });
  ASSERT_TRUE(runUntil(io_, [&] { return exit.has_value(); }, 10s));
  ASSERT_TRUE(started && started->ok());
  EXPECT_EQ(exit->exitCode, 0);
  EXPECT_EQ(readFile(dir_ / "off-loop"), std::to_string(loopNice) + "\n") << "started off the loop";
  EXPECT_EQ(run(shell("nice > " + (dir_ / "launched").string())).exitCode, 0);
  EXPECT_EQ(readFile(dir_ / "launched"), std::to_string(loopNice) + "\n") << "launch() on the loop";
}

// The launcher goes while a child it cloned off the loop has not been
// handed back: nothing would supervise it, so it is killed (its cgroup
// empties) and neither callback runs.
TEST_F(LauncherRootTest, ALauncherDestroyedBeforeItsCloneComesBackKillsTheChild) {
  if (!fs::exists("/sys/fs/cgroup/pids/cgroup.procs")) GTEST_SKIP() << "no v1 pids hierarchy";
  std::string cg = makeCgroup("/sys/fs/cgroup/pids");
  ASSERT_FALSE(cg.empty());
  LaunchSpec spec = shell("exec sleep 30");
  spec.setup.cgroupProcsFiles = {cg + "/cgroup.procs"};
  bool called = false;
  launcher_->startOffLoop(spec, [&](const ExitInfo&) { called = true; }, [&](Result<pid_t>) { called = true; });
  // The clone thread does not need the loop: the child joins its cgroup.
  std::string procs;
  for (int i = 0; i < 500 && (procs = readFile(cg + "/cgroup.procs")).empty(); ++i) usleep(10000);
  ASSERT_FALSE(procs.empty()) << "the child never joined its cgroup";
  pid_t pid = std::stoi(procs);
  launcher_.reset();
  io_.restart();
  io_.poll();  // the result, posted before the launcher went, is dropped
  for (int i = 0; i < 500 && !readFile(cg + "/cgroup.procs").empty(); ++i) usleep(10000);
  EXPECT_EQ(readFile(cg + "/cgroup.procs"), "") << "the child outlived its launcher";
  EXPECT_FALSE(called);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED), 0);
  EXPECT_EQ(info.si_status, SIGKILL);
}

TEST_F(LauncherRootTest, ChildRunsUnprivilegedWithNoNewPrivs) {
  LaunchSpec spec = shell("id -u; id -g; grep NoNewPrivs /proc/self/status");
  spec.setup.uid = 65534;
  spec.setup.gid = 65534;
  spec.setup.noNewPrivs = true;
  ASSERT_EQ(run(spec).exitCode, 0);
  std::string out = readFile(spec.stdoutPath);
  EXPECT_NE(out.find("65534\n65534\n"), std::string::npos) << out;
  EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos) << out;
}

TEST_F(LauncherRootTest, AFailedCgroupJoinIsAnErrorNamingTheFile) {
  LaunchSpec spec = shell("true");
  spec.setup.cgroupProcsFiles = {"/sys/fs/cgroup/pids/no-such-group/cgroup.procs"};
  auto pid = launcher_->launch(spec, [](const ExitInfo&) {});
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.error().describe().find("no-such-group/cgroup.procs"), std::string::npos)
      << pid.error().describe();
}

// The cgroup2 hierarchy of this host ("" if none): a child launched with
// its directory fd goes through clone3 instead of the vfork-style clone.
std::string cgroup2Root() {
  if (fs::exists("/sys/fs/cgroup/unified/cgroup.procs")) return "/sys/fs/cgroup/unified";
  if (fs::exists("/sys/fs/cgroup/cgroup.controllers")) return "/sys/fs/cgroup";
  return "";
}

// Host pids of the processes whose command line is exactly "sleep <word>"
// (not the shell that starts one).
std::vector<pid_t> sleepsOf(const std::string& word) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = readFile(e.path() / "cmdline");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (cmdline == "sleep " + word + " ") out.push_back(std::stoi(name));
  }
  return out;
}

// Alive and not a zombie.
bool running(pid_t pid) {
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z' && stat[paren + 2] != 'X';
}

class PidNamespaceTest : public LauncherRootTest, public ::testing::WithParamInterface<bool> {
 protected:
  // With GetParam(): born in a cgroup2 directory (clone3), else the
  // vfork-style clone.
  void bornInCgroup2(LaunchSpec& spec) {
    if (!GetParam()) return;
    std::string root = cgroup2Root();
    if (root.empty()) GTEST_SKIP() << "no cgroup2 hierarchy mounted";
    std::string cg = makeCgroup(root);
    ASSERT_FALSE(cg.empty());
    cgroupFd_ = UniqueFd(open(cg.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
    spec.setup.cgroupDirFd = cgroupFd_.get();
  }
  UniqueFd cgroupFd_;
};

TEST_P(PidNamespaceTest, ChildSeesAndSignalsOnlyItsOwnProcesses) {
  // Host pid 1 and this test are visible to any child of the host's PID
  // namespace, and root may signal them (kill -0 checks without harm).
  LaunchSpec spec = shell("echo pid=$$; echo procs=$(ls /proc | grep -c '^[0-9]*$'); "
                          "echo ps=$(ps -e -o pid= | wc -l); "
                          "kill -0 " + std::to_string(getpid()) + " 2>/dev/null; echo kill=$?");
  spec.setup.newPidNamespace = true;
  bornInCgroup2(spec);
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_EQ(run(spec).exitCode, 0);
  std::string out = readFile(spec.stdoutPath);
  EXPECT_NE(out.find("pid=1\n"), std::string::npos) << out;
  // sh, the command substitution's subshell and the commands of its pipe.
  for (const char* key : {"procs=", "ps="}) {
    size_t at = out.find(key);
    ASSERT_NE(at, std::string::npos) << out;
    int count = std::atoi(out.c_str() + at + std::strlen(key));
    EXPECT_GE(count, 2) << key << " in\n" << out;
    EXPECT_LE(count, 4) << key << " the child sees processes not its own:\n" << out;
  }
  EXPECT_NE(out.find("kill=1\n"), std::string::npos) << "the child signalled a host process:\n" << out;
}

TEST_P(PidNamespaceTest, EveryProcessDiesWithTheNamespacesPidOne) {
  std::string marker = "10" + std::to_string(getpid());
  LaunchSpec spec = shell("sleep " + marker + " & exec sleep 2" + marker);
  spec.setup.newPidNamespace = true;
  bornInCgroup2(spec);
  if (HasFatalFailure() || IsSkipped()) return;
  std::optional<ExitInfo> exit;
  auto pid = launcher_->launch(spec, [&](const ExitInfo& e) { exit = e; });
  ASSERT_TRUE(pid.ok()) << pid.error().describe();
  std::vector<pid_t> left;
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while ((left = sleepsOf(marker)).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(left.size(), 1u) << "the background sleep did not start";
  ASSERT_NE(left[0], *pid);
  ASSERT_TRUE(launcher_->signal(*pid, SIGKILL).ok());
  deadline = std::chrono::steady_clock::now() + 10s;
  while ((!exit || running(left[0])) && std::chrono::steady_clock::now() < deadline) {
    io_.restart();
    io_.run_for(5ms);
  }
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, SIGKILL);
  bool survived = running(left[0]);
  if (survived) kill(left[0], SIGKILL);
  EXPECT_FALSE(survived) << "pid " << left[0] << " outlived its namespace's pid 1";
}

INSTANTIATE_TEST_SUITE_P(Clone, PidNamespaceTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Clone3IntoCgroup2" : "VforkStyle"; });

TEST_F(LauncherRootTest, ConfinedRootChildCannotWriteHostFiles) {
  // DAC_OVERRIDE stays (Docker's set): only the read-only mounts keep it
  // off the host's files. Its working directory and private /tmp are
  // writable, nodev: a device node it makes there does not open.
  std::string tag = std::to_string(getpid());
  std::string etc = "/etc/allot-probe-" + tag, rootHome = "/root/allot-probe-" + tag;
  fs::path sandbox = dir_ / "sandbox";
  fs::create_directories(sandbox);
  LaunchSpec spec = shell("w() { if (echo x > \"$1\") 2>/dev/null; then echo \"wrote $2\"; else echo \"refused $2\"; fi; }; "
                          "w " + etc + " etc; w " + rootHome + " root; w ./in-sandbox sandbox; w /tmp/in-tmp tmp; "
                          "w /var/tmp/allot-probe-" + tag + " vartmp; w /dev/shm/allot-probe-" + tag + " shm; "
                          "mknod ./null c 1 3 && echo made-node; w ./null node; echo pid=$$; id -u");
  spec.workDir = sandbox.string();
  spec.setup.uid = 0;
  spec.setup.gid = 0;
  spec.setup.confineRoot = true;
  spec.setup.privateTmpDir = (sandbox / "tmp").string();
  ASSERT_EQ(run(spec).exitCode, 0);
  std::string out = readFile(spec.stdoutPath);
  bool etcLeft = fs::exists(etc), rootLeft = fs::exists(rootHome);
  fs::remove(etc);
  fs::remove(rootHome);
  fs::remove("/var/tmp/allot-probe-" + tag);
  fs::remove("/dev/shm/allot-probe-" + tag);
  for (const char* refused : {"refused etc", "refused root", "refused vartmp", "refused node"}) {
    EXPECT_NE(out.find(std::string(refused) + "\n"), std::string::npos) << refused << " in\n" << out;
  }
  for (const char* wrote : {"wrote sandbox", "wrote tmp", "wrote shm", "made-node"}) {
    EXPECT_NE(out.find(std::string(wrote) + "\n"), std::string::npos) << wrote << " in\n" << out;
  }
  EXPECT_FALSE(etcLeft);
  EXPECT_FALSE(rootLeft);
  EXPECT_FALSE(fs::exists("/dev/shm/allot-probe-" + tag)) << "/dev/shm is the host's";
  EXPECT_TRUE(fs::exists(sandbox / "in-sandbox"));
  EXPECT_TRUE(fs::exists(sandbox / "tmp" / "in-tmp")) << "/tmp is not the private directory";
  EXPECT_NE(out.find("pid=1\n"), std::string::npos) << "a root child gets its own PID namespace:\n" << out;
  EXPECT_NE(out.find("\n0\n"), std::string::npos) << out;
}

// A program installed (or built) under /tmp stays reachable for a confined
// root child, whose /tmp is its private directory: bound back read-only at
// its own path, a script as well as a binary.
TEST_F(LauncherRootTest, ConfinedRootChildExecsAProgramThatLivesUnderTmp) {
  if (dir_.string().rfind("/tmp/", 0) != 0) GTEST_SKIP() << dir_ << " is not under /tmp (TMPDIR)";
  fs::path program = dir_ / "installed" / "probe";
  fs::create_directories(program.parent_path());
  std::ofstream(program) << "#!/bin/sh\necho reached\n"
                            "if (echo x >> \"$0\") 2>/dev/null; then echo wrote-program; else echo program-read-only; fi\n";
  fs::permissions(program, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::path sandbox = dir_ / "sandbox";
  fs::create_directories(sandbox);
  LaunchSpec spec = shell("");
  spec.argv = {program.string()};
  spec.workDir = sandbox.string();
  spec.setup.uid = 0;
  spec.setup.gid = 0;
  spec.setup.confineRoot = true;
  spec.setup.privateTmpDir = (sandbox / "tmp").string();
  ExitInfo exit = run(spec);
  EXPECT_EQ(exit.setupError, "");
  ASSERT_EQ(exit.exitCode, 0);
  EXPECT_EQ(readFile(spec.stdoutPath), "reached\nprogram-read-only\n");
}

// Where clone3 is refused (Docker's default seccomp profile answers it
// with ENOSYS; kernels before 5.3 have none, 5.3-5.6 no CLONE_INTO_CGROUP),
// launch() and startOffLoop() fall back to glibc's vfork-style clone():
// the child then joins its cgroup2 directory by writing its pid into the
// directory's cgroup.procs, so it is still tracked. Run in a forked process
// that installs such a filter (the test's own process stays unfiltered).
class Clone3RefusedTest : public LauncherRootTest, public ::testing::WithParamInterface<bool> {};

// Exit codes of the forked process: 0 the child ran and exited 0.
int launchWithClone3Refused(const std::string& cgroup, LaunchSpec spec, bool offLoop) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(filter)), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    return 10;
  }
  clone_args probe{};
  probe.exit_signal = SIGCHLD;
  if (syscall(SYS_clone3, &probe, sizeof probe) != -1 || errno != ENOSYS) return 11;
  asio::io_context io;
  auto poller = UringPoller::create(io);
  if (!poller) return 12;
  auto launcher = Launcher::create(io, **poller);
  if (!launcher) return 13;
  UniqueFd dirFd(open(cgroup.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  spec.setup.cgroupDirFd = dirFd.get();
  std::optional<ExitInfo> exit;
  auto onExit = [&](const ExitInfo& e) { exit = e; };
  std::optional<Result<pid_t>> pid;
  if (offLoop) {
    (*launcher)->startOffLoop(spec, onExit, [&](Result<pid_t> started) { pid = std::move(started); });
    if (!runUntil(io, [&] { return pid.has_value(); }, 10s)) return 15;
  } else {
    pid = (*launcher)->launch(spec, onExit);
  }
  if (!pid->ok()) return 14;
  if (!runUntil(io, [&] { return exit.has_value(); }, 10s)) return 15;
  return exit->exited && exit->exitCode == 0 && exit->setupError.empty() ? 0 : 16;
}

TEST_P(Clone3RefusedTest, ChildStillJoinsItsCgroup2Directory) {
  std::string root = cgroup2Root();
  if (root.empty()) GTEST_SKIP() << "no cgroup2 hierarchy mounted";
  std::string cg = makeCgroup(root);
  ASSERT_FALSE(cg.empty());
  LaunchSpec spec = shell("cat /proc/self/cgroup");
  pid_t forked = fork();
  ASSERT_GE(forked, 0);
  if (forked == 0) _exit(launchWithClone3Refused(cg, spec, GetParam()));
  int status = 0;
  ASSERT_EQ(waitpid(forked, &status, 0), forked);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 0) << "see launchWithClone3Refused for the step";
  std::string name = fs::path(cg).filename().string();
  EXPECT_NE(readFile(spec.stdoutPath).find("0::/" + name + "\n"), std::string::npos) << readFile(spec.stdoutPath);
}

INSTANTIATE_TEST_SUITE_P(Clone, Clone3RefusedTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "StartOffLoop" : "Launch"; });

}  // namespace
}  // namespace allot
