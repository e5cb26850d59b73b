// Process-tree kill through pidfds (launcher/process_tree.h) and the
// launcher's kept pidfds.
#include "launcher/process_tree.h"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "base/asio.h"
#include "base/unique_fd.h"
#include "base/uring_poller.h"
#include "launcher/launcher.h"
#include "tests/common/test_util.h"

namespace allot {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  auto close = stat.rfind(')');
  return close != std::string::npos && stat[close + 2] != 'Z';
}

TEST(ProcessTree, KillsASessionLeaderAndEverythingUnderIt) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t leader = fork();
  ASSERT_GE(leader, 0);
  if (leader == 0) {
    setsid();
    // A grandchild in its own process group and a plain child.
    if (fork() == 0) {
      setpgid(0, 0);
      if (fork() == 0) pause();
      pause();
    }
    if (fork() == 0) pause();
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GE(killProcessTree(leader), 4u);
  int st = 0;
  ASSERT_EQ(waitpid(leader, &st, 0), leader);
  EXPECT_TRUE(WIFSIGNALED(st));
  // Nothing of that session is left.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream f(stat.substr(close + 2));
    char state;
    long ppid, pgrp, session;
    f >> state >> ppid >> pgrp >> session;
    if (session == leader) {
      EXPECT_EQ(state, 'Z') << "pid " << name << " survived";
    }
  }
  close(ready[0]);
  close(ready[1]);
}


TEST(ProcessTree, ARecycledPidIsNeverSignalled) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pause();
    _exit(0);
  }
  auto start = processStartTimeOf(pid);
  ASSERT_TRUE(start.has_value());
  // A start time other than the process's own stands for "this pid now
  // names another process": nothing is signalled.
  EXPECT_FALSE(signalIfSame(pid, *start + 1, SIGKILL));
  EXPECT_EQ(killProcessTree(pid, *start + 1), 0u);
  std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(alive(pid));
  EXPECT_TRUE(signalIfSame(pid, *start, SIGKILL));
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(st));
  // Reaped: its pid names nothing (or another process) now.
  EXPECT_FALSE(signalIfSame(pid, *start, SIGKILL));
  EXPECT_EQ(killProcessTree(1), 0u);
  EXPECT_EQ(killProcessTree(getpid()), 0u);
}

// An executor's tree as the agent kills it: through the pidfd the launcher
// kept since launch, with a child in a new session, a double-forked
// grandchild (re-parented, same session) and a plain child.
TEST(ProcessTree, KillsALaunchedTreeThroughTheLaunchersPidfd) {
  asio::io_context io;
  auto poller = UringPoller::createEpoll(io);
  ASSERT_TRUE(poller.ok());
  auto launcher = Launcher::create(io, **poller);
  ASSERT_TRUE(launcher.ok());
  fs::path dir = fs::temp_directory_path() / ("allot-tree-" + std::to_string(getpid()));
  fs::create_directories(dir);
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "setsid sleep 600 & echo $! > pids; (sleep 600 & echo $! >> pids); sleep 600 & echo $! >> pids; "
               "echo done >> pids; wait"};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.workDir = dir.string();
  std::optional<ExitInfo> exit;
  auto pid = (*launcher)->launch(spec, [&](const ExitInfo& e) { exit = e; });
  ASSERT_TRUE(pid.ok()) << pid.error().describe();
  std::vector<pid_t> tree;
  ASSERT_TRUE(testing::runUntil(io, [&] {
    std::ifstream in(dir / "pids");
    std::vector<pid_t> found;
    std::string line;
    while (std::getline(in, line)) {
      if (line == "done") {
        tree = found;
        return true;
      }
      found.push_back(std::stoi(line));
    }
    return false;
  }, 10s));
  ASSERT_EQ(tree.size(), 3u);
  EXPECT_FALSE((*launcher)->pidfdOf(getpid()).ok());
  auto pidfd = (*launcher)->pidfdOf(*pid);
  ASSERT_TRUE(pidfd.ok()) << pidfd.error().describe();
  EXPECT_GE(killProcessTree(pidfd->get(), *pid), 4u);
  ASSERT_TRUE(testing::runUntil(io, [&] { return exit.has_value(); }, 10s));
  EXPECT_EQ(exit->signal, SIGKILL);
  bool allGone = false;
  for (int i = 0; i < 100 && !allGone; ++i) {
    allGone = true;
    for (pid_t p : tree) allGone = allGone && !alive(p);
    if (!allGone) std::this_thread::sleep_for(20ms);
  }
  for (pid_t p : tree) EXPECT_FALSE(alive(p)) << "pid " << p << " survived";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace allot
