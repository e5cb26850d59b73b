// ExecutorManager unit tests without root: a FakeLauncher and a FakeIsolator
// (tests/agent/fakes.h) stand in for processes and cgroups; the executor is
// this test speaking the real protocol on the real executor socket. The
// fake launcher hands out the test's own pid, so the agent's process-tree
// check at accept sees the test as the executor.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "agent/checkpoint.h"
#include "agent/executor_manager.h"
#include "proto/connection.h"
#include "proto/state.pb.h"
#include "tests/agent/fakes.h"
#ifdef ALLOT_HAVE_ISOLATORS
#include "base/uring_poller.h"
#include "isolators/cgroupfs_twin.h"
#include "isolators/isolator_table.h"
#endif

namespace allot {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kFramework = "fw-1";
constexpr const char* kExecutor = "ex-1";

wire::FrameworkInfo framework() {
  wire::FrameworkInfo f;
  f.set_id(kFramework);
  f.set_name("test");
  return f;
}

wire::TaskInfo task(const std::string& id, double cpus, const std::string& executorId = kExecutor) {
  wire::TaskInfo t;
  t.set_task_id(id);
  t.set_name(id);
  auto* r = t.add_resources();
  r->set_name("cpus");
  r->set_scalar(cpus);
  t.mutable_executor()->set_executor_id(executorId);
  t.mutable_executor()->mutable_command()->set_shell("exec my-executor");
  return t;
}

// This test as an executor, on the agent's socket.
class TestExecutor {
 public:
  void connect(asio::io_context& io, const std::string& path, wire::RegisterExecutor reg) {
    asio::local::stream_protocol::socket socket(io);
    socket.connect(asio::local::stream_protocol::endpoint(path));
    Connection::Options o;
    o.localRole = wire::ROLE_EXECUTOR;
    o.localName = "test-executor";
    o.acceptRoles = {wire::ROLE_AGENT};
    conn_ = Connection::create(StreamSocket(std::move(socket)), o);
    Connection::Handlers h;
    h.onHello = [this, reg](const wire::Hello&) {
      wire::Envelope e;
      *e.mutable_register_executor() = reg;
      (void)conn_->send(e);
    };
    h.onMessage = [this](wire::Envelope& e) { received_.push_back(e); };
    h.onClose = [this](const std::string&) { closed_ = true; };
    conn_->start(std::move(h));
  }
  void send(const std::string& taskId, wire::TaskState state, const std::string& updateId) {
    wire::Envelope e;
    wire::TaskStatus* s = e.mutable_status_update()->mutable_status();
    s->set_task_id(taskId);
    s->set_state(state);
    s->set_update_id(updateId);
    (void)conn_->send(e);
  }
  void close() { conn_->close("test executor exits"); }

  size_t count(wire::Envelope::BodyCase body) const {
    size_t n = 0;
    for (const auto& e : received_) n += e.body_case() == body;
    return n;
  }
  bool launched(const std::string& taskId) const {
    for (const auto& e : received_) {
      if (e.has_launch_task() && e.launch_task().task().task_id() == taskId) return true;
    }
    return false;
  }
  bool closed() const { return closed_; }

 private:
  std::shared_ptr<Connection> conn_;
  std::vector<wire::Envelope> received_;
  bool closed_ = false;
};

class ExecutorManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot-em-XXXXXX";
    dir_ = mkdtemp(tmpl);
    checkpoints_ = std::make_unique<CheckpointStore>(dir_ + "/meta");
    ASSERT_TRUE(checkpoints_->init());
    options_.workDir = dir_;
    options_.executorPath = "/nonexistent/allot-executor";  // never started: the launcher is fake
    options_.defaultKillGrace = 50ms;
    options_.killSlack = 50ms;
    options_.idleShutdown = 50ms;
    options_.drainTimeout = 50ms;
    options_.shutdownTimeout = 1s;
    start();
  }
  void TearDown() override {
    manager_.reset();
    checkpoints_.reset();
    fs::remove_all(dir_);
  }

  // A new agent run: fresh launcher, isolators (a FakeIsolator unless
  // `real` are given) and manager over the same work dir and checkpoints.
  void start(std::vector<std::unique_ptr<Isolator>> real = {}) {
    manager_.reset();
    isolators_ = std::move(real);
    isolator_ = nullptr;
    if (isolators_.empty()) {
      auto iso = std::make_unique<FakeIsolator>();
      isolator_ = iso.get();
      isolators_.push_back(std::move(iso));
    }
    launcher_ = std::make_unique<FakeLauncher>(io_);
    ExecutorManager::Callbacks callbacks;
    callbacks.onUpdate = [this](const wire::TaskStatus& s, std::function<void(Status)> persisted) {
      updates_.push_back(s);
      asio::post(io_, [persisted] { persisted(okStatus()); });
    };
    manager_ = std::make_unique<ExecutorManager>(io_, *launcher_, isolators_, *checkpoints_, options_,
                                                 std::move(callbacks));
    ASSERT_TRUE(manager_->listen());
    manager_->setAgentId("agent-1");
  }

  bool runUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout = 5s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      if (io_.stopped()) io_.restart();
      io_.run_one_for(10ms);
    }
    return true;
  }
  void runFor(std::chrono::milliseconds d) {
    runUntil([] { return false; }, d);
  }

  // The last update of `taskId`, or nullptr.
  const wire::TaskStatus* last(const std::string& taskId) const {
    for (auto it = updates_.rbegin(); it != updates_.rend(); ++it) {
      if (it->task_id() == taskId) return &*it;
    }
    return nullptr;
  }
  bool reached(const std::string& taskId, wire::TaskState state) const {
    const wire::TaskStatus* s = last(taskId);
    return s && s->state() == state;
  }

  std::string name(const std::string& executorId = kExecutor) const {
    return ContainerId{kFramework, executorId}.name();
  }

  // Runs the loop until the launcher has started `n` executors in all (a
  // container's sandbox is made off the loop first); the last one's pid.
  pid_t waitLaunched(size_t n) {
    EXPECT_TRUE(runUntil([&] { return launcher_->launched().size() >= n; })) << "no launch";
    return launcher_->launched().empty() ? 0 : launcher_->launched().back();
  }

  // Launches `tasks` on executor kExecutor (pid: this test's) and registers
  // `exec` as it; every task reaches TASK_RUNNING.
  pid_t launchRunning(TestExecutor& exec, const std::vector<wire::TaskInfo>& tasks) {
    launcher_->nextPid(::getpid());
    for (const auto& t : tasks) manager_->runTask(framework(), t);
    pid_t pid = waitLaunched(launcher_->launched().size() + 1);
    wire::RegisterExecutor reg;
    reg.set_framework_id(kFramework);
    reg.set_executor_id(kExecutor);
    reg.set_executor_secret(launcher_->env(pid, "ALLOT_EXECUTOR_SECRET"));
    exec.connect(io_, manager_->socketPath(), reg);
    EXPECT_TRUE(runUntil([&] {
      for (const auto& t : tasks) {
        if (!exec.launched(t.task_id())) return false;
      }
      return true;
    }));
    int n = 0;
    for (const auto& t : tasks) exec.send(t.task_id(), wire::TASK_RUNNING, "u-running-" + std::to_string(n++));
    EXPECT_TRUE(runUntil([&] {
      for (const auto& t : tasks) {
        if (!reached(t.task_id(), wire::TASK_RUNNING)) return false;
      }
      return exec.count(wire::Envelope::kStatusAcknowledgement) >= tasks.size();
    }));
    return pid;
  }

  std::string phase() const {
    state::AgentState st;
    manager_->fillState(&st);
    return st.executors_size() ? st.executors(0).phase() : "";
  }

  asio::io_context io_;
  std::string dir_;
  ExecutorManagerOptions options_;
  std::unique_ptr<CheckpointStore> checkpoints_;
  std::vector<std::unique_ptr<Isolator>> isolators_;
  FakeIsolator* isolator_ = nullptr;
  std::unique_ptr<FakeLauncher> launcher_;
  std::unique_ptr<ExecutorManager> manager_;
  std::vector<wire::TaskStatus> updates_;
};

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
}  // namespace allot
