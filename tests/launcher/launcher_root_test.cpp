// Launcher features that need root: born into a cgroup2 directory
// (CLONE_INTO_CGROUP), joining v1 cgroups by cgroup.procs, and dropping to
// an unprivileged user with no_new_privs.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <fstream>
#include <functional>

#include "base/asio.h"
#include "tests/common/test_util.h"
#include "base/unique_fd.h"
#include "base/uring_poller.h"
#include "launcher/launcher.h"

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
  // clone3 (CLONE_INTO_CGROUP) does not share memory: the error comes
  // through the close-on-exec pipe.
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

// start() returns once clone has: here the child's setup blocks opening
// its stdout (a FIFO nobody reads yet) while the test, on the same thread,
// goes on; launch() would wait for the exec and never return.
TEST_F(LauncherRootTest, StartDoesNotWaitForTheChildsSetupOrExec) {
  LaunchSpec spec = shell("echo started-then-exec");
  spec.stdoutPath = (dir_ / "fifo").string();
  ASSERT_EQ(mkfifo(spec.stdoutPath.c_str(), 0600), 0);
  std::optional<ExitInfo> exit;
  auto pid = launcher_->start(spec, [&](const ExitInfo& e) { exit = e; });
  ASSERT_TRUE(pid.ok()) << pid.error().describe();
  UniqueFd reader(open(spec.stdoutPath.c_str(), O_RDONLY | O_CLOEXEC));  // unblocks the child
  ASSERT_TRUE(reader.valid());
  std::string out;
  char buf[64];
  for (ssize_t n; (n = read(reader.get(), buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(out, "started-then-exec\n");
  ASSERT_TRUE(runUntil(io_, [&] { return exit.has_value(); }, 10s));
  EXPECT_EQ(exit->exitCode, 0);
  EXPECT_TRUE(exit->setupError.empty()) << exit->setupError;
}

// A child started by start() that cannot exec exits 127, and its exit says
// why (the step and errno it wrote to the close-on-exec pipe), after it
// joined its v1 cgroup.
TEST_F(LauncherRootTest, StartReportsASetupFailureWithTheExit) {
  LaunchSpec spec = shell("true");
  spec.argv = {"/no/such/binary"};
  if (fs::exists("/sys/fs/cgroup/pids/cgroup.procs")) {
    spec.setup.cgroupProcsFiles = {makeCgroup("/sys/fs/cgroup/pids") + "/cgroup.procs"};
  }
  std::optional<ExitInfo> exit;
  auto pid = launcher_->start(spec, [&](const ExitInfo& e) { exit = e; });
  ASSERT_TRUE(pid.ok()) << pid.error().describe();
  ASSERT_TRUE(runUntil(io_, [&] { return exit.has_value(); }, 10s));
  EXPECT_EQ(exit->pid, *pid);
  EXPECT_TRUE(exit->exited);
  EXPECT_EQ(exit->exitCode, 127);
  EXPECT_NE(exit->setupError.find("exec /no/such/binary"), std::string::npos) << exit->setupError;
  EXPECT_NE(exit->setupError.find(std::strerror(ENOENT)), std::string::npos) << exit->setupError;
  EXPECT_EQ(launcher_->supervisedCount(), 0u);
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

}  // namespace
}  // namespace allot
