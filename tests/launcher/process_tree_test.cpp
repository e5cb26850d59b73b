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
    // Each of the four writes a byte once it is in place (a fixed wait
    // was too short on a loaded machine: the grandchild was not forked yet).
    if (fork() == 0) {
      setpgid(0, 0);
      if (fork() == 0) {
        (void)!write(ready[1], "g", 1);
        pause();
      }
      (void)!write(ready[1], "c", 1);
      pause();
    }
    if (fork() == 0) {
      (void)!write(ready[1], "c", 1);
      pause();
    }
    (void)!write(ready[1], "l", 1);
    pause();
    _exit(0);
  }
  char c[4];
  for (size_t got = 0; got < sizeof c;) {
    ssize_t n = read(ready[0], c + got, sizeof c - got);
    ASSERT_GT(n, 0);
    got += static_cast<size_t>(n);
  }
  EXPECT_GE(killProcessTree(leader), 4u);
  int st = 0;
  ASSERT_EQ(waitpid(leader, &st, 0), leader);
  EXPECT_TRUE(WIFSIGNALED(st));
  // Nothing of that session is left (killed ones are zombies or gone; a
  // loaded machine takes a while to run their exits).
  auto survivors = [&] {
    std::vector<std::string> left;
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
      if (session == leader && state != 'Z') left.push_back(name);
    }
    return left;
  };
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!survivors().empty() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  for (const auto& name : survivors()) ADD_FAILURE() << "pid " << name << " survived";
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
  auto allGone = [&] {
    for (pid_t p : tree) {
      if (alive(p)) return false;
    }
    return true;
  };
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!allGone() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  for (pid_t p : tree) EXPECT_FALSE(alive(p)) << "pid " << p << " survived";
  fs::remove_all(dir);
}

// A root that exits on its own as soon as one of its children dies (here:
// bash's `wait -n`, then `exit 3`) still dies by the kill: the root is
// signalled before any process under it, so it never sees a child die.
// Signalled last, the root would have the time the other kills take to
// exit 3 itself, and its exit would not say it was killed.
TEST(ProcessTree, KillsTheRootBeforeItCanSeeAChildDie) {
  asio::io_context io;
  auto poller = UringPoller::createEpoll(io);
  ASSERT_TRUE(poller.ok());
  auto launcher = Launcher::create(io, **poller);
  ASSERT_TRUE(launcher.ok());
  fs::path dir = fs::temp_directory_path() / ("allot-tree-first-" + std::to_string(getpid()));
  fs::create_directories(dir);
  constexpr int kChildren = 64;
  LaunchSpec spec;
  spec.argv = {"/bin/bash", "-c",
               "for i in $(seq " + std::to_string(kChildren) +
                   "); do sleep 600 & done; echo ready > ready; wait -n; exit 3"};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.workDir = dir.string();
  std::optional<ExitInfo> exit;
  auto pid = (*launcher)->launch(spec, [&](const ExitInfo& e) { exit = e; });
  ASSERT_TRUE(pid.ok()) << pid.error().describe();
  ASSERT_TRUE(testing::runUntil(io, [&] { return fs::exists(dir / "ready"); }, 20s));
  auto pidfd = (*launcher)->pidfdOf(*pid);
  ASSERT_TRUE(pidfd.ok()) << pidfd.error().describe();
  EXPECT_EQ(killProcessTree(pidfd->get(), *pid), size_t{kChildren + 1});
  ASSERT_TRUE(testing::runUntil(io, [&] { return exit.has_value(); }, 20s));
  EXPECT_EQ(exit->signal, SIGKILL) << "the root exited " << exit->exitCode << " on its own";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace allot
