#include <gtest/gtest.h>

#include <dirent.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include "base/asio.h"
#include "tests/common/test_util.h"
#include "base/unique_fd.h"
#include "base/uring_poller.h"
#include "launcher/launcher.h"

namespace allot {
namespace {

using testing::childrenInState;
using testing::readFile;
using testing::runUntil;

using namespace std::chrono_literals;

class LauncherTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto poller = GetParam() ? UringPoller::create(io_) : UringPoller::createEpoll(io_);
    ASSERT_TRUE(poller.ok());
    poller_ = std::move(*poller);
    if (GetParam() && poller_->backend() != "io_uring") {
      GTEST_SKIP() << "io_uring unavailable here: " << poller_->backend();
    }
    launcher_ = std::move(*Launcher::create(io_, *poller_));
    dir_ = std::filesystem::temp_directory_path() / ("allot-launcher-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    launcher_.reset();
    poller_.reset();
    std::filesystem::remove_all(dir_);
  }

  LaunchSpec shell(const std::string& command) {
    LaunchSpec spec;
    spec.argv = {"/bin/sh", "-c", command};
    spec.env = {"PATH=/usr/bin:/bin"};
    spec.workDir = dir_.string();
    spec.stdoutPath = (dir_ / "stdout").string();
    spec.stderrPath = (dir_ / "stderr").string();
    return spec;
  }

  // Launches and waits for the exit.
  ExitInfo runToExit(const LaunchSpec& spec) {
    std::optional<ExitInfo> exit;
    auto pid = launcher_->launch(spec, [&](const ExitInfo& e) { exit = e; });
    EXPECT_TRUE(pid.ok()) << (pid.ok() ? "" : pid.error().describe());
    if (!pid.ok()) return {};
    EXPECT_TRUE(runUntil(io_, [&] { return exit.has_value(); }, 10s));
    return exit.value_or(ExitInfo{});
  }

  asio::io_context io_;
  std::unique_ptr<UringPoller> poller_;
  std::unique_ptr<Launcher> launcher_;
  std::filesystem::path dir_;
};

TEST_P(LauncherTest, ExitCodeIsReported) {
  ExitInfo e = runToExit(shell("exit 3"));
  EXPECT_TRUE(e.statusKnown);
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(e.exitCode, 3);
}

TEST_P(LauncherTest, DeathBySignalIsReported) {
  ExitInfo e = runToExit(shell("kill -9 $$"));
  EXPECT_FALSE(e.exited);
  EXPECT_EQ(e.signal, SIGKILL);
}

TEST_P(LauncherTest, ExecFailureIsAnErrorNamingTheBinary) {
  LaunchSpec spec = shell("");
  spec.argv = {"/no/such/binary"};
  auto pid = launcher_->launch(spec, [](const ExitInfo&) { FAIL() << "no exit for a failed launch"; });
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.error().errnum, ENOENT);
  EXPECT_NE(pid.error().describe().find("exec /no/such/binary"), std::string::npos)
      << pid.error().describe();
  EXPECT_EQ(launcher_->supervisedCount(), 0u);
  EXPECT_EQ(childrenInState("Z"), 0);
}

TEST_P(LauncherTest, MissingWorkingDirectoryIsAnError) {
  LaunchSpec spec = shell("true");
  spec.workDir = "/no/such/dir";
  auto pid = launcher_->launch(spec, [](const ExitInfo&) {});
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.error().describe().find("chdir"), std::string::npos) << pid.error().describe();
}

TEST_P(LauncherTest, OutputGoesToFilesAndEnvironmentIsExactlyTheOneGiven) {
  LaunchSpec spec = shell("echo out:$GREETING; echo err >&2; env | grep -c =");
  spec.env = {"PATH=/usr/bin:/bin", "GREETING=hello"};
  ExitInfo e = runToExit(spec);
  EXPECT_EQ(e.exitCode, 0);
  // sh adds PWD (and SHLVL on some shells) on its own: at most 4 variables.
  std::string out = readFile(spec.stdoutPath);
  EXPECT_EQ(out.substr(0, 10), "out:hello\n");
  EXPECT_LE(std::stoi(out.substr(10)), 4);
  EXPECT_EQ(readFile(spec.stderrPath), "err\n");
}

TEST_P(LauncherTest, SignalsIgnoredByTheAgentAreDefaultInTheChild) {
  auto previous = signal(SIGPIPE, SIG_IGN);
  ExitInfo e = runToExit(shell("grep SigIgn /proc/self/status"));
  signal(SIGPIPE, previous);
  EXPECT_EQ(e.exitCode, 0);
  EXPECT_EQ(readFile((dir_ / "stdout").string()), "SigIgn:\t0000000000000000\n");
}

TEST_P(LauncherTest, ManyChildrenAreEachReportedOnceAndNoneIsLeftAZombie) {
  constexpr int kChildren = 200;
  std::map<pid_t, int> reports;
  for (int i = 0; i < kChildren; ++i) {
    LaunchSpec spec = shell("exit " + std::to_string(i % 7));
    auto pid = launcher_->launch(spec, [&](const ExitInfo& e) { ++reports[e.pid]; });
    ASSERT_TRUE(pid.ok()) << pid.error().describe();
  }
  ASSERT_TRUE(runUntil(io_, [&] { return reports.size() == kChildren; }, 20s));
  runUntil(io_, [] { return false; }, 100ms);
  for (const auto& [pid, count] : reports) EXPECT_EQ(count, 1) << "pid " << pid;
  EXPECT_EQ(launcher_->supervisedCount(), 0u);
  EXPECT_EQ(childrenInState("Z"), 0);
}

TEST_P(LauncherTest, SignalGoesThroughThePidfd) {
  std::optional<ExitInfo> exit;
  auto pid = launcher_->launch(shell("exec sleep 100"), [&](const ExitInfo& e) { exit = e; });
  ASSERT_TRUE(pid.ok());
  ASSERT_TRUE(launcher_->signal(*pid, SIGTERM).ok());
  ASSERT_TRUE(runUntil(io_, [&] { return exit.has_value(); }, 5s));
  EXPECT_EQ(exit->signal, SIGTERM);
  EXPECT_FALSE(launcher_->signal(*pid, SIGTERM).ok()) << "a reaped pid must not be signalled";
}

TEST_P(LauncherTest, WatchesAProcessItDidNotStart) {
  // The shell backgrounds a sleeper and exits: the sleeper is an orphan,
  // re-parented away from us (this test process is no subreaper).
  ExitInfo shellExit = runToExit(shell("sleep 100 >/dev/null 2>&1 & echo $!"));
  ASSERT_EQ(shellExit.exitCode, 0);
  pid_t orphan = std::stoi(readFile((dir_ / "stdout").string()));
  std::optional<ExitInfo> exit;
  ASSERT_TRUE(launcher_->watch(orphan, [&](const ExitInfo& e) { exit = e; }).ok());
  EXPECT_FALSE(runUntil(io_, [&] { return exit.has_value(); }, 200ms));
  ::kill(orphan, SIGKILL);
  ASSERT_TRUE(runUntil(io_, [&] { return exit.has_value(); }, 5s));
  EXPECT_EQ(exit->pid, orphan);
  EXPECT_FALSE(exit->statusKnown);
}

TEST_P(LauncherTest, PollerOneShotMultishotAndCancel) {
  UniqueFd efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  int oneShot = 0, multi = 0;
  auto drain = [&] {
    uint64_t v;
    while (read(efd.get(), &v, sizeof v) > 0) {
    }
  };
  ASSERT_TRUE(poller_->watch(efd.get(), POLLIN, false, [&](uint32_t) { ++oneShot; }).ok());
  auto multiId = poller_->watch(efd.get(), POLLIN, true, [&](uint32_t) {
    ++multi;
    drain();
  });
  ASSERT_TRUE(multiId.ok());
  for (int i = 0; i < 3; ++i) {
    uint64_t one = 1;
    ASSERT_EQ(write(efd.get(), &one, sizeof one), 8);
    int before = multi;
    ASSERT_TRUE(runUntil(io_, [&] { return multi == before + 1; }, 2s)) << "write " << i;
  }
  EXPECT_EQ(oneShot, 1);
  poller_->cancel(*multiId);
  uint64_t one = 1;
  ASSERT_EQ(write(efd.get(), &one, sizeof one), 8);
  runUntil(io_, [] { return false; }, 100ms);
  EXPECT_EQ(multi, 3) << "a cancelled watch fired";
  EXPECT_EQ(poller_->watchCount(), 0u);
}

// A filter answering EPERM to mkdir/mkdirat, allowing everything else.
std::vector<char> denyMkdirFilter() {
  std::vector<sock_filter> prog = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mkdir, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mkdirat, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  const char* bytes = reinterpret_cast<const char*>(prog.data());
  return std::vector<char>(bytes, bytes + prog.size() * sizeof(sock_filter));
}

TEST_P(LauncherTest, SeccompFilterAppliesToTheExecutedProgram) {
  LaunchSpec spec = shell("mkdir denied; grep -E 'NoNewPrivs|Seccomp:' /proc/self/status");
  spec.setup.seccompBpf = denyMkdirFilter();
  ExitInfo e = runToExit(spec);
  EXPECT_TRUE(e.exited);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "denied"));
  EXPECT_NE(readFile(spec.stderrPath).find("Operation not permitted"), std::string::npos)
      << readFile(spec.stderrPath);
  std::string out = readFile(spec.stdoutPath);
  EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos) << out;
  EXPECT_NE(out.find("Seccomp:\t2"), std::string::npos) << out;
  // Without the filter the same command succeeds.
  spec.setup.seccompBpf.clear();
  EXPECT_EQ(runToExit(spec).exitCode, 0);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "denied"));
}

TEST_P(LauncherTest, AnInvalidSeccompProgramIsAnError) {
  LaunchSpec spec = shell("true");
  spec.setup.seccompBpf = std::vector<char>(3, 0);  // not even one instruction
  auto pid = launcher_->launch(spec, [](const ExitInfo&) {});
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.error().errnum, EINVAL);
  EXPECT_NE(pid.error().describe().find("seccomp"), std::string::npos) << pid.error().describe();
  EXPECT_EQ(childrenInState("Z"), 0);
}

TEST_P(LauncherTest, CancelledWatchWithACompletionAlreadyQueuedNeverFires) {
  UniqueFd efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  int fired = 0;
  auto id = poller_->watch(efd.get(), POLLIN, false, [&](uint32_t) { ++fired; });
  ASSERT_TRUE(id.ok());
  uint64_t one = 1;
  ASSERT_EQ(write(efd.get(), &one, sizeof one), 8);
  // The poll has completed (its completion waits in the ring or the
  // reactor) but the loop has not run: cancelling now must still win.
  std::this_thread::sleep_for(20ms);
  poller_->cancel(*id);
  EXPECT_EQ(poller_->watchCount(), 0u);
  runUntil(io_, [] { return false; }, 100ms);
  EXPECT_EQ(fired, 0);
  // The poller still works after that.
  ASSERT_TRUE(poller_->watch(efd.get(), POLLIN, false, [&](uint32_t) { ++fired; }).ok());
  ASSERT_TRUE(runUntil(io_, [&] { return fired == 1; }, 2s));
}

TEST_P(LauncherTest, FailedLaunchesLeakNoDescriptors) {
  auto countFds = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                         std::filesystem::directory_iterator());
  };
  auto before = countFds();
  LaunchSpec spec = shell("");
  spec.argv = {"/no/such/binary"};
  for (int i = 0; i < 20; ++i) ASSERT_FALSE(launcher_->launch(spec, [](const ExitInfo&) {}).ok());
  ExitInfo e = runToExit(shell("exit 0"));
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(countFds(), before);
}

INSTANTIATE_TEST_SUITE_P(Backends, LauncherTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "IoUring" : "Epoll"; });

}  // namespace
}  // namespace allot
