// ExecutorManager without root (tests/agent/executor_manager_fixture.h)
// while a container is being set up and taken down: kills, framework
// removal and stops while the sandbox or the clone is under way, sandbox
// GC, reaping, reconnects, agent restarts, and the real cgroup isolators on
// a hybrid host's twin.
#include <fstream>

#include "tests/agent/executor_manager_fixture.h"

namespace allot {
namespace executor_manager_test {
namespace {

TEST_F(ExecutorManagerTest, AKillOfOneOfTwoTasksWhileTheSandboxIsMadeStartsTheExecutorForTheOther) {
  manager_->runTask(framework(), task("t1", 0.5));
  manager_->runTask(framework(), task("t2", 0.25));
  wire::KillTask kill;
  kill.set_framework_id(kFramework);
  kill.set_task_id("t1");
  manager_->killTask(kill);
  waitLaunched(1);
  EXPECT_TRUE(reached("t1", wire::TASK_KILLED));
  EXPECT_EQ(manager_->liveTaskCount(), 1u);
  EXPECT_DOUBLE_EQ(isolator_->record(name()).limits.front().scalar("cpus"), 0.25);
}

// The framework is removed while its executors' sandboxes are made: every
// task it had there ends TASK_KILLED (framework removed) and nothing
// starts, whichever of the removal and the sandbox's completion runs
// first: ex-1's completion is queued on the loop before the removal (the
// test waits without running the loop), ex-2's comes after it.
TEST_F(ExecutorManagerTest, FrameworkRemovalWhileTheSandboxIsMadeKillsItsTasksAndStartsNothing) {
  manager_->runTask(framework(), task("t1", 0.5));
  manager_->runTask(framework(), task("t2", 0.5));
  std::this_thread::sleep_for(100ms);  // ex-1's sandbox made; its completion waits in the loop's queue
  manager_->runTask(framework(), task("t3", 0.5, "ex-2"));
  EXPECT_EQ(manager_->executorCount(), 2u);
  manager_->shutdownFramework(kFramework);
  ASSERT_TRUE(runUntil([&] {
    return reached("t1", wire::TASK_KILLED) && reached("t2", wire::TASK_KILLED) &&
           reached("t3", wire::TASK_KILLED) && manager_->executorCount() == 0;
  }));
  for (const char* id : {"t1", "t2", "t3"}) EXPECT_EQ(last(id)->reason(), wire::REASON_FRAMEWORK_REMOVED) << id;
  runFor(50ms);
  EXPECT_TRUE(launcher_->launched().empty()) << "an executor started after its framework was removed";
}

// The executor's clone runs off the loop (Launcher::startOffLoop). A kill
// (here: its framework's removal) while the clone is under way waits for
// it: the container stays until the launcher answers, then its new process
// is killed, and only its exit ends the tasks, once, with the kill's
// reason; the isolators clean up and nothing is left.
TEST_F(ExecutorManagerTest, AKillWhileTheCloneIsUnderWayKillsTheNewProcessAndLosesNothing) {
  launcher_->holdStarts(true);
  manager_->runTask(framework(), task("t1", 0.5));
  ASSERT_TRUE(runUntil([&] { return launcher_->heldStarts() == 1; }));
  EXPECT_EQ(phase(), "starting");
  manager_->shutdownFramework(kFramework);
  runFor(50ms);
  EXPECT_EQ(manager_->executorCount(), 1u) << "finalized while its process was being cloned";
  EXPECT_EQ(last("t1"), nullptr) << "the task ended before its executor's clone came back";
  launcher_->releaseStarts();
  pid_t pid = waitLaunched(1);
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_KILLED) && manager_->executorCount() == 0; }));
  EXPECT_EQ(last("t1")->reason(), wire::REASON_FRAMEWORK_REMOVED);
  EXPECT_FALSE(launcher_->alive(pid));
  EXPECT_EQ(launcher_->process(pid).signals, std::vector<int>{SIGKILL});
  EXPECT_TRUE(isolator_->record(name()).cleanedUp);
  size_t terminal = 0;
  for (const auto& u : updates_) terminal += u.task_id() == "t1";
  EXPECT_EQ(terminal, 1u) << "one terminal update, decided once";
}

// The executor's clone runs off the loop, so the new executor can connect
// before its pid is back on the loop (an executor that connects at once,
// as agent_robustness_integration's hostile ones do): its connection
// waits for the clone's answer instead of being refused as a stranger's,
// then registers and gets its task.
TEST_F(ExecutorManagerTest, AnExecutorThatConnectsBeforeItsPidIsBackWaitsAndRegisters) {
  launcher_->holdStarts(true);
  launcher_->nextPid(::getpid());
  manager_->runTask(framework(), task("t1", 0.5));
  ASSERT_TRUE(runUntil([&] { return launcher_->heldStarts() == 1; }));
  TestExecutor exec;
  wire::RegisterExecutor reg;
  reg.set_framework_id(kFramework);
  reg.set_executor_id(kExecutor);
  reg.set_executor_secret(launcher_->heldEnv(0, "ALLOT_EXECUTOR_SECRET"));
  exec.connect(io_, manager_->socketPath(), reg);
  runFor(50ms);
  EXPECT_FALSE(exec.closed()) << "refused while its clone was under way";
  EXPECT_EQ(exec.count(wire::Envelope::kExecutorRegistered), 0u);
  launcher_->releaseStarts();
  ASSERT_TRUE(runUntil([&] { return exec.launched("t1"); }));
  EXPECT_EQ(exec.count(wire::Envelope::kExecutorRegistered), 1u);
  EXPECT_EQ(phase(), "running");
}

// A process of no executor that connects while a clone is under way waits
// only for that clone: once no start is under way it is closed. Past
// kAwaitingStartMax waiting, one more is closed at once.
TEST_F(ExecutorManagerTest, AStrangerConnectingDuringACloneIsClosedWhenTheCloneComesBack) {
  launcher_->holdStarts(true);
  manager_->runTask(framework(), task("t1", 0.5));  // a fake pid: not this test's
  ASSERT_TRUE(runUntil([&] { return launcher_->heldStarts() == 1; }));
  std::vector<TestExecutor> strangers(ExecutorListener::kAwaitingStartMax + 1);
  wire::RegisterExecutor reg;
  reg.set_framework_id(kFramework);
  reg.set_executor_id(kExecutor);
  for (size_t i = 0; i + 1 < strangers.size(); ++i) strangers[i].connect(io_, manager_->socketPath(), reg);
  runFor(50ms);
  for (const auto& s : strangers) ASSERT_FALSE(s.closed());
  strangers.back().connect(io_, manager_->socketPath(), reg);
  ASSERT_TRUE(runUntil([&] { return strangers.back().closed(); })) << "a waiting connection past the bound";
  for (size_t i = 0; i + 1 < strangers.size(); ++i) EXPECT_FALSE(strangers[i].closed());
  launcher_->releaseStarts();
  ASSERT_TRUE(runUntil([&] {
    for (const auto& s : strangers) {
      if (!s.closed()) return false;
    }
    return true;
  }));
  for (const auto& s : strangers) EXPECT_EQ(s.count(wire::Envelope::kExecutorRegistered), 0u);
}

// A clone that fails off the loop fails the task as an exec failure, with
// the launcher's error, and leaves nothing; a kill that came meanwhile
// does not make it a second end.
TEST_F(ExecutorManagerTest, ACloneThatFailsOffTheLoopFailsTheTaskAndLeavesNothing) {
  for (bool killedMeanwhile : {false, true}) {
    SCOPED_TRACE(killedMeanwhile ? "killed meanwhile" : "not killed");
    updates_.clear();
    launcher_->holdStarts(true);
    std::string id = killedMeanwhile ? "t2" : "t1";
    manager_->runTask(framework(), task(id, 0.5));
    ASSERT_TRUE(runUntil([&] { return launcher_->heldStarts() == 1; }));
    if (killedMeanwhile) manager_->shutdownFramework(kFramework);
    launcher_->failNext("clone3/fork for /bin/sh: Resource temporarily unavailable");
    launcher_->releaseStarts();
    ASSERT_TRUE(runUntil([&] { return reached(id, wire::TASK_FAILED) && manager_->executorCount() == 0; }));
    EXPECT_EQ(last(id)->reason(), wire::REASON_EXEC_FAILED);
    EXPECT_NE(last(id)->message().find("could not start: clone3/fork for /bin/sh"), std::string::npos)
        << last(id)->message();
    EXPECT_TRUE(isolator_->record(name()).cleanedUp);
    EXPECT_EQ(updates_.size(), 1u);
    EXPECT_TRUE(launcher_->launched().empty());
  }
}

// The agent stops while an executor's clone is under way: the process the
// launcher hands back afterwards has nobody to supervise it, and is killed.
TEST_F(ExecutorManagerTest, StoppingWhileTheCloneIsUnderWayKillsTheProcessItGets) {
  launcher_->holdStarts(true);
  manager_->runTask(framework(), task("t1", 0.5));
  ASSERT_TRUE(runUntil([&] { return launcher_->heldStarts() == 1; }));
  manager_.reset();
  launcher_->releaseStarts();
  runFor(50ms);
  ASSERT_EQ(launcher_->launched().size(), 1u);
  pid_t pid = launcher_->launched().back();
  EXPECT_FALSE(launcher_->alive(pid));
  EXPECT_EQ(launcher_->process(pid).signals, std::vector<int>{SIGKILL});
}

// A sandbox that cannot be made fails the task as an exec failure and
// leaves no container.
TEST_F(ExecutorManagerTest, ASandboxThatCannotBeMadeFailsTheTaskAndLeavesNothing) {
  std::ofstream(dir_ + "/sandboxes") << "a file where the sandboxes go";
  manager_->runTask(framework(), task("t1", 0.5));
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_FAILED) && manager_->executorCount() == 0; }));
  EXPECT_EQ(last("t1")->reason(), wire::REASON_EXEC_FAILED);
  EXPECT_NE(last("t1")->message().find("cannot create sandbox " + dir_ + "/sandboxes/"), std::string::npos)
      << last("t1")->message();
  EXPECT_TRUE(launcher_->launched().empty());
}

// The agent stops while a sandbox is being made: nothing runs after the
// manager is gone, nothing starts.
TEST_F(ExecutorManagerTest, StoppingWhileASandboxIsMadeStartsNothing) {
  manager_->runTask(framework(), task("t1", 0.5));
  manager_.reset();
  runFor(50ms);
  EXPECT_TRUE(launcher_->launched().empty());
}

// The sandbox GC runs off the loop and keeps the sandboxes in use, however
// old; it removes old ones no container uses.
TEST_F(ExecutorManagerTest, TheSandboxGcKeepsSandboxesInUseAndRemovesOldUnusedOnes) {
  TestExecutor exec;
  pid_t pid = launchRunning(exec, {task("t1", 0.5)});
  std::string used = launcher_->env(pid, "ALLOT_SANDBOX_DIR");
  std::string old = dir_ + "/sandboxes/ended.1";
  fs::create_directories(old);
  auto weekAgo = fs::file_time_type::clock::now() - std::chrono::hours(24 * 7);
  fs::last_write_time(old, weekAgo);
  fs::last_write_time(used, weekAgo);
  manager_->collectSandboxes(std::chrono::hours(1));
  ASSERT_TRUE(runUntil([&] { return !fs::exists(old); }));
  EXPECT_TRUE(fs::exists(used));
}

// A reap that fails (a process the kill did not end) is retried on the
// worker pool, never done on the loop; the isolators' cleanup and the
// record wait for a reap that succeeded.
TEST_F(ExecutorManagerTest, AFailedReapIsRetriedOffTheLoopUntilItSucceeds) {
  options_.reapRetry = 20ms;
  options_.reapRetryMax = 40ms;
  start();
  TestExecutor exec;
  pid_t pid = launchRunning(exec, {task("t1", 0.5)});
  isolator_->failReaps(2);
  launcher_->exitWith(pid, 3);
  exec.close();
  ASSERT_TRUE(runUntil([&] { return isolator_->reaps() >= 1; }));
  EXPECT_EQ(manager_->executorCount(), 1u);
  EXPECT_FALSE(isolator_->record(name()).cleanedUp) << "cleanup before a reap that succeeded";
  ASSERT_TRUE(runUntil([&] { return manager_->executorCount() == 0; }));
  EXPECT_EQ(isolator_->reaps(), 3);
  EXPECT_FALSE(isolator_->reapedOnThread(std::this_thread::get_id())) << "a reap ran on the loop";
  EXPECT_TRUE(isolator_->record(name()).cleanedUp);
  EXPECT_TRUE(reached("t1", wire::TASK_FAILED));
}

// A container that cannot be reaped (a process in uninterruptible sleep)
// keeps its name: tasks waiting for its executor's replacement fail once
// the failures reach the bound, new ones are refused, and the reap goes on
// being retried until it succeeds; then the executor starts again.
TEST_F(ExecutorManagerTest, TasksWaitingForAnUnreapableContainerFailAndNewOnesAreRefused) {
  options_.reapRetry = 10ms;
  options_.reapRetryMax = 20ms;
  options_.reapFailuresBeforeRefusing = 3;
  start();
  TestExecutor exec;
  pid_t pid = launchRunning(exec, {task("t1", 0.5)});
  isolator_->failReaps(1000);
  launcher_->exitWith(pid, 0);
  exec.close();
  ASSERT_TRUE(runUntil([&] { return isolator_->reaps() >= 1; }));
  manager_->runTask(framework(), task("t2", 0.5));  // waits for the replacement
  ASSERT_TRUE(runUntil([&] { return reached("t2", wire::TASK_FAILED); }));
  EXPECT_EQ(last("t2")->reason(), wire::REASON_ISOLATION_FAILED);
  EXPECT_NE(last("t2")->message().find("previous container could not be removed (3 attempts)"), std::string::npos)
      << last("t2")->message();
  EXPECT_NE(last("t2")->message().find("still has processes"), std::string::npos) << last("t2")->message();
  manager_->runTask(framework(), task("t3", 0.5));
  ASSERT_TRUE(runUntil([&] { return reached("t3", wire::TASK_FAILED); }));
  EXPECT_EQ(last("t3")->reason(), wire::REASON_ISOLATION_FAILED);
  EXPECT_EQ(launcher_->launched().size(), 1u);
  int reapsThen = isolator_->reaps();
  runFor(100ms);
  EXPECT_GT(isolator_->reaps(), reapsThen) << "the reap is retried";
  EXPECT_EQ(manager_->executorCount(), 1u);
  isolator_->failReaps(0);  // the process finally dies
  ASSERT_TRUE(runUntil([&] { return manager_->executorCount() == 0; }));
  manager_->runTask(framework(), task("t4", 0.5));
  waitLaunched(2);
  EXPECT_EQ(launcher_->launched().size(), 2u);
}

TEST_F(ExecutorManagerTest, FrameworkRemovalShutsTheExecutorDownAndKillsItsTasks) {
  TestExecutor exec;
  pid_t pid = launchRunning(exec, {task("t1", 0.5)});
  manager_->shutdownFramework(kFramework);
  ASSERT_TRUE(runUntil([&] { return exec.count(wire::Envelope::kShutdownExecutor) == 1; }));
  launcher_->exitWith(pid, 0);
  exec.close();
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_KILLED); }));
  EXPECT_EQ(last("t1")->reason(), wire::REASON_FRAMEWORK_REMOVED);
  ASSERT_TRUE(runUntil([&] { return manager_->executorCount() == 0; }));
}

// Limits follow the tasks of a running executor (the agent's side of
// isolator update(): each isolator sees executor + every live task).
TEST_F(ExecutorManagerTest, LimitsFollowTasksAddedToAndRemovedFromARunningExecutor) {
  TestExecutor exec;
  launchRunning(exec, {task("t1", 1.0)});
  manager_->runTask(framework(), task("t2", 2.0));
  ASSERT_TRUE(runUntil([&] { return exec.launched("t2"); }));
  const FakeIsolator::Record& r = isolator_->record(name());
  EXPECT_DOUBLE_EQ(r.limits.back().scalar("cpus"), 3.0);
  exec.send("t1", wire::TASK_FINISHED, "u-t1-done");
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_FINISHED); }));
  EXPECT_DOUBLE_EQ(r.limits.back().scalar("cpus"), 2.0);
  manager_->runTask(framework(), task("t3", 0.25));
  ASSERT_TRUE(runUntil([&] { return exec.launched("t3"); }));
  EXPECT_DOUBLE_EQ(r.limits.back().scalar("cpus"), 2.25);
  std::vector<double> seen;
  for (const auto& l : r.limits) seen.push_back(l.scalar("cpus"));
  EXPECT_EQ(seen, (std::vector<double>{1.0, 3.0, 2.0, 2.25}));
}

// An executor reconnecting while the agent runs on: a task launched while
// it had no link reaches it on its new link; a task put on the old link that
// it does not report was lost with that link (TASK_LOST, never run twice);
// the tasks it reports are not sent again.
TEST_F(ExecutorManagerTest, AReconnectingExecutorGetsTasksLaunchedMeanwhileAndLostOnesAreLost) {
  TestExecutor exec;
  pid_t pid = launchRunning(exec, {task("t1", 0.5)});
  manager_->runTask(framework(), task("t2", 0.25));
  ASSERT_TRUE(runUntil([&] { return exec.launched("t2"); }));
  exec.close();
  runFor(50ms);  // the agent sees the link go
  manager_->runTask(framework(), task("t3", 0.25));
  wire::RegisterExecutor reg;
  reg.set_framework_id(kFramework);
  reg.set_executor_id(kExecutor);
  reg.set_executor_secret(launcher_->env(pid, "ALLOT_EXECUTOR_SECRET"));
  *reg.add_tasks() = task("t1", 0.5);
  TestExecutor again;
  again.connect(io_, manager_->socketPath(), reg);
  ASSERT_TRUE(runUntil([&] { return again.launched("t3") && reached("t2", wire::TASK_LOST); }));
  EXPECT_FALSE(again.launched("t1"));
  EXPECT_FALSE(again.launched("t2"));
  EXPECT_EQ(manager_->liveTaskCount(), 2u);
}

TEST_F(ExecutorManagerTest, AfterAnAgentRestartALiveExecutorReattachesAndADeadOneIsLost) {
  TestExecutor exec;
  pid_t pid = launchRunning(exec, {task("t1", 0.5)});
  std::string secret = launcher_->env(pid, "ALLOT_EXECUTOR_SECRET");
  // A second executor whose process will not survive (a fake pid: no such process).
  manager_->runTask(framework(), task("t9", 0.5, "ex-dead"));
  waitLaunched(2);
  runFor(50ms);  // checkpoints are written after the handler
  checkpoints_->flush();

  start();  // the agent restarts; the executors' processes live on
  manager_->recover(checkpoints_->loadExecutors());
  EXPECT_EQ(isolator_->recovered().size(), 2u);
  EXPECT_EQ(launcher_->watched(), std::vector<pid_t>{::getpid()});
  ASSERT_TRUE(runUntil([&] { return reached("t9", wire::TASK_LOST); }));
  EXPECT_NE(last("t9")->message().find("exited while the agent was down"), std::string::npos);
  EXPECT_EQ(phase(), "recovering");

  TestExecutor again;
  wire::RegisterExecutor reg;
  reg.set_framework_id(kFramework);
  reg.set_executor_id(kExecutor);
  reg.set_executor_secret(secret);
  *reg.add_tasks() = task("t1", 0.5);
  again.connect(io_, manager_->socketPath(), reg);
  ASSERT_TRUE(runUntil([&] { return again.count(wire::Envelope::kExecutorRegistered) == 1; }));
  EXPECT_EQ(phase(), "running");
  again.send("t1", wire::TASK_FINISHED, "u-after-restart");
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_FINISHED); }));
  EXPECT_EQ(manager_->liveTaskCount(), 0u);
}

#ifdef ALLOT_HAVE_ISOLATORS
std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

wire::TaskInfo taskWithMem(const std::string& id, double cpus, double memMiB) {
  wire::TaskInfo t = task(id, cpus);
  auto* r = t.add_resources();
  r->set_name("mem");
  r->set_scalar(memMiB);
  return t;
}

// The real cgroup isolators on a hybrid host's twin (v1 cpu and memory,
// pids on the cgroup2 hierarchy, containment in cgroup2): the agent keeps
// each controller's limits in step with the executor's tasks, an OOM the
// kernel reports on v1 (the twin fires memory.oom_control's eventfd) ends
// the container with the memory reason, and every hierarchy is reaped.
TEST_F(ExecutorManagerTest, OnAHybridHostLimitsFollowTasksAnOomEndsItAndAllCgroupsGo) {
  char tmpl[] = "/tmp/allot-em-cgroup-XXXXXX";
  std::string cg = mkdtemp(tmpl);
  auto fsTwin = std::make_shared<DirCgroupFs>(cg);
  CgroupHost host = twinCgroupHost(fsTwin, CgroupMode::kHybrid);
  host.v1.erase("pids");
  host.v2Usable = {"pids"};
  auto poller = UringPoller::create(io_);
  ASSERT_TRUE(poller.ok());
  IsolatorOptions options;
  options.poller = poller->get();
  auto made = createIsolatorsOn(host, "cgroups/cpu,cgroups/mem,cgroups/pids", options);
  ASSERT_TRUE(made.ok()) << made.error().describe();
  start(std::move(*made));

  TestExecutor exec;
  pid_t pid = launchRunning(exec, {taskWithMem("t1", 1.0, 64)});
  ASSERT_TRUE(reached("t1", wire::TASK_RUNNING)) << last("t1")->message();
  std::string c = "/allot/" + name() + "/";
  EXPECT_EQ(readFile(cg + "/cpu" + c + "cpu.shares"), "1024");
  EXPECT_EQ(readFile(cg + "/memory" + c + "memory.limit_in_bytes"), std::to_string(64 << 20));
  EXPECT_EQ(readFile(cg + "/unified" + c + "pids.max"), "1024");
  EXPECT_FALSE(fs::exists(cg + "/unified" + c + "cpu.weight")) << "cpu stays on v1";
  EXPECT_FALSE(fs::exists(cg + "/unified" + c + "memory.max")) << "memory stays on v1";

  manager_->runTask(framework(), taskWithMem("t2", 1.0, 32));
  ASSERT_TRUE(runUntil([&] { return exec.launched("t2"); }));
  EXPECT_EQ(readFile(cg + "/cpu" + c + "cpu.shares"), "2048");
  EXPECT_EQ(readFile(cg + "/memory" + c + "memory.limit_in_bytes"), std::to_string(96 << 20));
  EXPECT_EQ(readFile(cg + "/unified" + c + "pids.max"), "2048");

  exec.send("t1", wire::TASK_FINISHED, "u-t1-done");
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_FINISHED); }));
  EXPECT_EQ(readFile(cg + "/cpu" + c + "cpu.shares"), "1024");
  EXPECT_EQ(readFile(cg + "/memory" + c + "memory.limit_in_bytes"), std::to_string(32 << 20));
  EXPECT_EQ(readFile(cg + "/unified" + c + "pids.max"), "1024");

  std::string oomControl = cg + "/memory" + c + "memory.oom_control";
  ASSERT_TRUE(fsTwin->writeFile(oomControl, "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n").ok());
  ASSERT_TRUE(fsTwin->fireEvent(oomControl).ok()) << "cgroups/mem registered no OOM eventfd";
  ASSERT_TRUE(runUntil([&] { return reached("t2", wire::TASK_FAILED); }));
  EXPECT_EQ(last("t2")->reason(), wire::REASON_MEMORY_LIMIT);
  EXPECT_EQ(last("t2")->message(), "memory limit 32 MiB exceeded (OOM kill)");
  EXPECT_EQ(launcher_->process(pid).signals, std::vector<int>{SIGKILL});

  exec.close();
  ASSERT_TRUE(runUntil([&] { return manager_->executorCount() == 0; }));
  for (const char* h : {"/cpu", "/memory", "/unified"}) EXPECT_FALSE(fs::exists(cg + h + c)) << h;
  manager_.reset();
  isolators_.clear();
  fs::remove_all(cg);
}
#endif

}  // namespace
}  // namespace executor_manager_test
}  // namespace allot
