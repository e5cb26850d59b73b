// ExecutorManager without root (tests/agent/executor_manager_fixture.h):
// launches through the isolators, the launcher and the executor link;
// kills, OOMs, crashes and failures at each step; the loop's sections.
#include "tests/agent/executor_manager_fixture.h"

namespace allot {
namespace executor_manager_test {
namespace {

TEST_F(ExecutorManagerTest, LaunchGoesThroughTheIsolatorsTheLauncherAndTheExecutorLink) {
  TestExecutor exec;
  pid_t pid = launchRunning(exec, {task("t1", 0.5)});
  const FakeIsolator::Record& r = isolator_->record(name());
  EXPECT_TRUE(r.prepared);
  EXPECT_EQ(r.pid, pid);
  ASSERT_FALSE(r.limits.empty());
  EXPECT_DOUBLE_EQ(r.limits.front().scalar("cpus"), 0.5);
  const LaunchSpec& spec = launcher_->process(pid).spec;
  EXPECT_EQ(spec.argv, (std::vector<std::string>{"/bin/sh", "-c", "exec my-executor"}));
  EXPECT_EQ(launcher_->env(pid, "ALLOT_FRAMEWORK_ID"), kFramework);
  EXPECT_EQ(launcher_->env(pid, "ALLOT_EXECUTOR_ID"), kExecutor);
  EXPECT_EQ(launcher_->env(pid, "ALLOT_EXECUTOR_SECRET").size(), 32u);
  EXPECT_EQ(exec.count(wire::Envelope::kExecutorRegistered), 1u);
  EXPECT_EQ(phase(), "running");
  EXPECT_EQ(manager_->liveTaskCount(), 1u);
}

TEST_F(ExecutorManagerTest, AWrongSecretIsRefused) {
  launcher_->nextPid(::getpid());
  manager_->runTask(framework(), task("t1", 0.5));
  waitLaunched(1);
  TestExecutor exec;
  wire::RegisterExecutor reg;
  reg.set_framework_id(kFramework);
  reg.set_executor_id(kExecutor);
  reg.set_executor_secret(std::string(32, '0'));
  exec.connect(io_, manager_->socketPath(), reg);
  ASSERT_TRUE(runUntil([&] { return exec.closed(); }));
  EXPECT_EQ(exec.count(wire::Envelope::kExecutorRegistered), 0u);
  EXPECT_EQ(phase(), "registering");
}

TEST_F(ExecutorManagerTest, AKillTheExecutorHonoursEndsTheTaskWithoutSignals) {
  TestExecutor exec;
  pid_t pid = launchRunning(exec, {task("t1", 0.5)});
  wire::KillTask kill;
  kill.set_framework_id(kFramework);
  kill.set_task_id("t1");
  manager_->killTask(kill);
  ASSERT_TRUE(runUntil([&] { return exec.count(wire::Envelope::kKillTask) == 1; }));
  exec.send("t1", wire::TASK_KILLED, "u-killed");
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_KILLED); }));
  EXPECT_EQ(last("t1")->update_id(), "u-killed") << "the executor's own update";
  // Idle now: asked to exit; it does.
  ASSERT_TRUE(runUntil([&] { return exec.count(wire::Envelope::kShutdownExecutor) == 1; }));
  EXPECT_EQ(phase(), "shutting-down");
  launcher_->exitWith(pid, 0);
  exec.close();
  ASSERT_TRUE(runUntil([&] { return manager_->executorCount() == 0; }));
  EXPECT_TRUE(launcher_->process(pid).signals.empty());
  EXPECT_TRUE(isolator_->record(name()).cleanedUp);
}

TEST_F(ExecutorManagerTest, ATaskThatOutlivesItsKillGraceIsKilledWithItsExecutor) {
  TestExecutor exec;
  pid_t pid = launchRunning(exec, {task("t1", 0.5)});
  wire::KillTask kill;
  kill.set_framework_id(kFramework);
  kill.set_task_id("t1");
  kill.set_reason(wire::REASON_REVOKED);
  manager_->killTask(kill);
  // The executor ignores the KillTask: after grace + slack the agent SIGKILLs it.
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_KILLED); }));
  EXPECT_EQ(launcher_->process(pid).signals, std::vector<int>{SIGKILL});
  EXPECT_EQ(last("t1")->reason(), wire::REASON_REVOKED);
  EXPECT_NE(last("t1")->message().find("outlived its kill grace period"), std::string::npos);
  ASSERT_TRUE(runUntil([&] { return manager_->executorCount() == 0; }));
  EXPECT_TRUE(isolator_->record(name()).cleanedUp);
}

TEST_F(ExecutorManagerTest, AnOomEndsTheContainerWithTheMemoryReason) {
  TestExecutor exec;
  pid_t pid = launchRunning(exec, {task("t1", 0.5), task("t2", 0.5)});
  Limitation oom;
  oom.reason = wire::REASON_MEMORY_LIMIT;
  oom.message = "memory limit 64 MiB exceeded (OOM kill)";
  oom.usage.set_mem_bytes(64 << 20);
  isolator_->limit(name(), oom);
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_FAILED) && reached("t2", wire::TASK_FAILED); }));
  EXPECT_EQ(launcher_->process(pid).signals, std::vector<int>{SIGKILL});
  for (const char* id : {"t1", "t2"}) {
    EXPECT_EQ(last(id)->reason(), wire::REASON_MEMORY_LIMIT);
    EXPECT_EQ(last(id)->message(), oom.message);
    EXPECT_EQ(last(id)->usage().mem_bytes(), 64u << 20);
  }
  ASSERT_TRUE(runUntil([&] { return manager_->executorCount() == 0; }));
}

TEST_F(ExecutorManagerTest, AnExecutorCrashFailsItsTasksWithTheExitCode) {
  TestExecutor exec;
  pid_t pid = launchRunning(exec, {task("t1", 0.5)});
  launcher_->exitWith(pid, 3);
  exec.close();
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_FAILED); }));
  EXPECT_EQ(last("t1")->reason(), wire::REASON_EXECUTOR_EXITED);
  EXPECT_EQ(last("t1")->exit_code(), 3);
  EXPECT_EQ(last("t1")->message(), "executor exited with status 3");
  ASSERT_TRUE(runUntil([&] { return manager_->executorCount() == 0; }));
  EXPECT_TRUE(isolator_->record(name()).cleanedUp);
}

TEST_F(ExecutorManagerTest, AnExecutorThatNeverRegistersIsKilled) {
  options_.registerTimeout = 50ms;
  start();
  manager_->runTask(framework(), task("t1", 0.5));
  pid_t pid = waitLaunched(1);
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_FAILED); }));
  EXPECT_EQ(launcher_->process(pid).signals, std::vector<int>{SIGKILL});
  EXPECT_EQ(last("t1")->reason(), wire::REASON_EXECUTOR_EXITED);
  EXPECT_EQ(last("t1")->message(), "executor did not register within 0.05 s");
  ASSERT_TRUE(runUntil([&] { return manager_->executorCount() == 0; }));
}

TEST_F(ExecutorManagerTest, ALaunchFailureFailsTheTaskAndLeavesNothing) {
  launcher_->failNext("execve: no such file");
  manager_->runTask(framework(), task("t1", 0.5));
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_FAILED); }));
  EXPECT_EQ(last("t1")->reason(), wire::REASON_EXEC_FAILED);
  EXPECT_NE(last("t1")->message().find("no such file"), std::string::npos);
  ASSERT_TRUE(runUntil([&] { return manager_->executorCount() == 0; }));
  EXPECT_TRUE(isolator_->record(name()).cleanedUp);
}

// The agent starts executors without waiting for their exec
// (Launcher::start): a child that fails its setup after the launch
// returned still fails its tasks as an exec failure, and leaves nothing.
TEST_F(ExecutorManagerTest, ASetupFailureAfterStartFailsTheTaskAsAnExecFailure) {
  launcher_->failSetupNext("exec /no/such/executor: No such file or directory");
  manager_->runTask(framework(), task("t1", 0.5));
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_FAILED); }));
  EXPECT_EQ(last("t1")->reason(), wire::REASON_EXEC_FAILED);
  EXPECT_NE(last("t1")->message().find("could not start: exec /no/such/executor"), std::string::npos)
      << last("t1")->message();
  ASSERT_TRUE(runUntil([&] { return manager_->executorCount() == 0; }));
  EXPECT_TRUE(isolator_->record(name()).cleanedUp);
  EXPECT_FALSE(launcher_->alive(launcher_->launched().back()));
}

TEST_F(ExecutorManagerTest, APrepareFailureIsAnIsolationFailureAndCleansUp) {
  isolator_->failPrepare("memory.limit_in_bytes: EINVAL");
  manager_->runTask(framework(), task("t1", 0.5));
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_FAILED); }));
  EXPECT_EQ(last("t1")->reason(), wire::REASON_ISOLATION_FAILED);
  EXPECT_EQ(last("t1")->message(), "fake: memory.limit_in_bytes: EINVAL");
  EXPECT_TRUE(launcher_->launched().empty());
  ASSERT_TRUE(runUntil([&] { return manager_->executorCount() == 0; }));
  EXPECT_TRUE(isolator_->record(name()).cleanedUp);
}

// The sandbox and its files are made off the loop, so a kill can arrive
// while they are (here: before the loop runs again after the RunTask): the
// task ends as killed before its executor started, no executor starts, the
// container goes, and the executor's next task starts a new one.
TEST_F(ExecutorManagerTest, AKillWhileTheSandboxIsMadeEndsTheTaskAndStartsNothing) {
  manager_->runTask(framework(), task("t1", 0.5));
  EXPECT_EQ(phase(), "preparing");
  EXPECT_TRUE(launcher_->launched().empty()) << "the launch waited for the sandbox on the loop";
  wire::KillTask kill;
  kill.set_framework_id(kFramework);
  kill.set_task_id("t1");
  manager_->killTask(kill);
  ASSERT_TRUE(runUntil([&] { return reached("t1", wire::TASK_KILLED) && manager_->executorCount() == 0; }));
  EXPECT_EQ(last("t1")->reason(), wire::REASON_KILLED_BY_FRAMEWORK);
  EXPECT_EQ(last("t1")->message(), "killed before its executor started");
  runFor(50ms);
  EXPECT_TRUE(launcher_->launched().empty());
  EXPECT_FALSE(isolator_->record(name()).prepared);
  EXPECT_TRUE(isolator_->record(name()).cleanedUp);

  manager_->runTask(framework(), task("t2", 0.5));
  waitLaunched(1);
  EXPECT_EQ(phase(), "registering");
}

// The loop's time is charged to what took it: an isolator whose prepare()
// blocks is named as the biggest section, by isolator (the agent's late
// ticks are attributed this way); the launch handler around it keeps only
// its own part.
TEST_F(ExecutorManagerTest, TheLoopSectionsNameTheIsolatorCallThatBlocked) {
  AgentSections sections(isolators_);
  manager_->setLoopSections(&sections);
  isolator_->slowPrepare(30ms);
  sections.sections().reset();
  manager_->runTask(framework(), task("t1", 0.5));
  waitLaunched(1);
  LoopSections::Taken taken = sections.sections().take();
  ASSERT_FALSE(taken.sections.empty());
  EXPECT_EQ(taken.sections[0].first, "prepare fake") << taken.describe(5);
  EXPECT_GE(taken.sections[0].second.longestNs, 30'000'000u) << taken.describe(5);
  bool launchTimed = false;
  for (const auto& [name, spent] : taken.sections) {
    if (name != "launch") continue;
    launchTimed = true;
    EXPECT_LT(spent.ns, taken.sections[0].second.ns) << taken.describe(5);
  }
  EXPECT_TRUE(launchTimed) << taken.describe(5);
}

// A burst of launches does not keep the loop from its timers: executors
// whose sandboxes are ready start for at most kStartSliceBudget per turn of
// the loop (before, ten ready executors whose prepare() took 5 ms each all
// started before an expired timer ran: 50 ms).
TEST_F(ExecutorManagerTest, ABurstOfLaunchesLetsTheLoopRunBetweenStarts) {
  isolator_->slowPrepare(5ms);
  for (int i = 0; i < 10; ++i) {
    manager_->runTask(framework(), task("t" + std::to_string(i), 0.1, "ex-" + std::to_string(i)));
  }
  // Every sandbox is made; their results wait in the loop's queue.
  std::this_thread::sleep_for(300ms);
  // A timer re-armed every ms, as the agent's stall meter: how many
  // executors started between two of its runs.
  asio::steady_timer tick(io_);
  size_t seen = 0, mostBetweenTicks = 0;
  std::function<void()> arm = [&] {
    tick.expires_after(1ms);
    tick.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      size_t now = launcher_->launched().size();
      mostBetweenTicks = std::max(mostBetweenTicks, now - seen);
      seen = now;
      if (now < 10) arm();
    });
  };
  arm();
  ASSERT_TRUE(runUntil([&] { return seen == 10; }));
  EXPECT_LE(mostBetweenTicks, 2u) << "the executors started in one pass of the loop";
}

// Two tasks wait in a container that is preparing; one is killed: the
// executor still starts, for the other.

}  // namespace
}  // namespace executor_manager_test
}  // namespace allot
