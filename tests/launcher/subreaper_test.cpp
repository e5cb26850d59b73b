// The Launcher in a subreaper process (becomeSubreaper is process-wide, so
// these tests have their own binary): orphaned grandchildren come back and
// are reaped, and the orphan reaping never takes a supervised child's
// status from its pidfd watch.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "base/asio.h"
#include "tests/common/test_util.h"
#include "base/uring_poller.h"
#include "launcher/launcher.h"

namespace allot {
namespace {

using testing::childrenInState;
using testing::readFile;
using testing::runUntil;

using namespace std::chrono_literals;

class SubreaperTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(becomeSubreaper().ok());
    int subreaper = 0;
    ASSERT_EQ(prctl(PR_GET_CHILD_SUBREAPER, &subreaper, 0, 0, 0), 0);
    ASSERT_EQ(subreaper, 1);
    auto poller = GetParam() ? UringPoller::create(io_) : UringPoller::createEpoll(io_);
    ASSERT_TRUE(poller.ok());
    poller_ = std::move(*poller);
    launcher_ = std::move(*Launcher::create(io_, *poller_));
    dir_ = std::filesystem::temp_directory_path() / ("allot-subreaper-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    launcher_.reset();
    poller_.reset();
    std::filesystem::remove_all(dir_);
  }

  LaunchSpec shell(const std::string& command, const std::string& out = "stdout") {
    LaunchSpec spec;
    spec.argv = {"/bin/sh", "-c", command};
    spec.env = {"PATH=/usr/bin:/bin"};
    spec.workDir = dir_.string();
    spec.stdoutPath = (dir_ / out).string();
    return spec;
  }

  asio::io_context io_;
  std::unique_ptr<UringPoller> poller_;
  std::unique_ptr<Launcher> launcher_;
  std::filesystem::path dir_;
};

TEST_P(SubreaperTest, OrphanedGrandchildrenAreReaped) {
  constexpr int kShells = 20;
  int exits = 0;
  for (int i = 0; i < kShells; ++i) {
    // Each shell leaves a short-lived grandchild behind and exits first.
    auto pid = launcher_->launch(shell("sleep 0.2 & exit 0"), [&](const ExitInfo&) { ++exits; });
    ASSERT_TRUE(pid.ok()) << pid.error().describe();
  }
  ASSERT_TRUE(runUntil(io_, [&] { return exits == kShells; }, 10s));
  // The sleepers are now ours; once they die they are reaped, not left as zombies.
  ASSERT_TRUE(runUntil(io_, [&] { return launcher_->orphansReaped() >= kShells; }, 10s))
      << "reaped " << launcher_->orphansReaped();
  EXPECT_EQ(childrenInState(""), 0);
}

TEST_P(SubreaperTest, SupervisedStatusesAreNotTakenByOrphanReaping) {
  constexpr int kShells = 100;
  std::map<pid_t, ExitInfo> exits;
  std::map<pid_t, int> expected;
  for (int i = 0; i < kShells; ++i) {
    // Orphans and supervised shells die at about the same time.
    std::string cmd = "sleep 0.0" + std::to_string(i % 3) + " & sleep 0.0" +
                      std::to_string(i % 5) + "; exit " + std::to_string(i % 11);
    auto pid = launcher_->launch(shell(cmd), [&](const ExitInfo& e) { exits[e.pid] = e; });
    ASSERT_TRUE(pid.ok()) << pid.error().describe();
    expected[*pid] = i % 11;
  }
  ASSERT_TRUE(runUntil(io_, [&] { return exits.size() == expected.size(); }, 20s));
  for (const auto& [pid, code] : expected) {
    EXPECT_TRUE(exits[pid].statusKnown) << "pid " << pid;
    EXPECT_EQ(exits[pid].exitCode, code) << "pid " << pid;
  }
  ASSERT_TRUE(runUntil(io_, [&] { return childrenInState("") == 0; }, 10s))
      << childrenInState("Z") << " zombies left";
  EXPECT_EQ(launcher_->supervisedCount(), 0u);
}

TEST_P(SubreaperTest, WatchedOrphanHasAKnownStatus) {
  // The grandchild is re-parented to us, so watch() can reap it for a status.
  std::optional<ExitInfo> shellExit;
  ASSERT_TRUE(launcher_->launch(shell("sleep 100 >/dev/null & echo $!", "pid"),
                                [&](const ExitInfo& e) { shellExit = e; }).ok());
  ASSERT_TRUE(runUntil(io_, [&] { return shellExit.has_value(); }, 5s));
  pid_t orphan = std::stoi(readFile((dir_ / "pid").string()));
  std::optional<ExitInfo> exit;
  ASSERT_TRUE(launcher_->watch(orphan, [&](const ExitInfo& e) { exit = e; }).ok());
  ASSERT_EQ(::kill(orphan, SIGTERM), 0);
  ASSERT_TRUE(runUntil(io_, [&] { return exit.has_value(); }, 5s));
  EXPECT_TRUE(exit->statusKnown);
  EXPECT_EQ(exit->signal, SIGTERM);
  EXPECT_EQ(launcher_->orphansReaped(), 0u) << "the watched orphan is reported, not reaped silently";
}

// Children cloned off the loop (startOffLoop) that exit at once, while
// orphans come back too (SIGCHLD, reapOrphans): none is taken for an orphan
// before it is supervised; each exit keeps its status.
TEST_P(SubreaperTest, ChildrenClonedOffTheLoopKeepTheirStatusFromOrphanReaping) {
  constexpr int kChildren = 40;
  std::map<int, ExitInfo> exits;
  int started = 0;
  for (int i = 0; i < kChildren; ++i) {
    std::string command = i % 2 ? "(sleep 0.01 &) ; exit " + std::to_string(i % 100) : "exit " + std::to_string(i % 100);
    launcher_->startOffLoop(shell(command), [&exits, i](const ExitInfo& e) { exits[i] = e; },
                            [&started](Result<pid_t> pid) { started += pid.ok(); });
  }
  ASSERT_TRUE(runUntil(io_, [&] { return exits.size() == static_cast<size_t>(kChildren); }, 20s));
  EXPECT_EQ(started, kChildren);
  for (const auto& [i, e] : exits) {
    EXPECT_TRUE(e.statusKnown) << "child " << i << " was reaped as an orphan";
    EXPECT_EQ(e.exitCode, i % 100) << i;
  }
  // Every child and orphan gone (none can come after): nothing left a zombie.
  EXPECT_TRUE(runUntil(io_, [&] { return childrenInState("") == 0; }, 10s)) << "children or zombies left";
}

INSTANTIATE_TEST_SUITE_P(Backends, SubreaperTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "IoUring" : "Epoll"; });

}  // namespace
}  // namespace allot
