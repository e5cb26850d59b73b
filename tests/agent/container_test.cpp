// Unit tests of ContainerLifecycle (agent/container.h): every transition,
// every refused event, and the precedence of terminal reasons; and of
// Container's invariants: a task id once, limits that follow the tasks,
// timers that a state makes moot cancelled, none firing once it is gone.
#include <chrono>
#include <map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "agent/container.h"

namespace allot {
namespace {

using S = ContainerState;
using E = ContainerEvent;

const std::vector<S> kStates = {S::kPreparing,   S::kStarting, S::kIsolating,  S::kRegistering,
                                S::kRecovering,  S::kRunning,  S::kShuttingDown, S::kExited,
                                S::kDestroying,  S::kGone};
const std::vector<E> kEvents = {E::kCloning,      E::kLaunched, E::kAdopted,    E::kIsolated, E::kRegistered,
                                E::kShutdownSent, E::kExited,   E::kFinalized,  E::kReaped};

// The diagram of container.h, written out again: every legal move.
const std::map<std::pair<S, E>, S> kLegal = {
    {{S::kPreparing, E::kCloning}, S::kStarting},
    {{S::kStarting, E::kLaunched}, S::kIsolating},
    {{S::kStarting, E::kFinalized}, S::kDestroying},
    {{S::kPreparing, E::kAdopted}, S::kRecovering},
    {{S::kPreparing, E::kFinalized}, S::kDestroying},
    {{S::kIsolating, E::kIsolated}, S::kRegistering},
    {{S::kIsolating, E::kExited}, S::kExited},
    {{S::kRegistering, E::kRegistered}, S::kRunning},
    {{S::kRegistering, E::kExited}, S::kExited},
    {{S::kRecovering, E::kRegistered}, S::kRunning},
    {{S::kRecovering, E::kExited}, S::kExited},
    {{S::kRunning, E::kRegistered}, S::kRunning},
    {{S::kRunning, E::kShutdownSent}, S::kShuttingDown},
    {{S::kRunning, E::kExited}, S::kExited},
    {{S::kShuttingDown, E::kRegistered}, S::kShuttingDown},
    {{S::kShuttingDown, E::kExited}, S::kExited},
    {{S::kExited, E::kFinalized}, S::kDestroying},
    {{S::kDestroying, E::kReaped}, S::kGone},
};

// A lifecycle brought to `state` by legal events.
ContainerLifecycle reach(S state) {
  static const std::map<S, std::vector<E>> kPaths = {
      {S::kPreparing, {}},
      {S::kStarting, {E::kCloning}},
      {S::kIsolating, {E::kCloning, E::kLaunched}},
      {S::kRegistering, {E::kCloning, E::kLaunched, E::kIsolated}},
      {S::kRecovering, {E::kAdopted}},
      {S::kRunning, {E::kCloning, E::kLaunched, E::kIsolated, E::kRegistered}},
      {S::kShuttingDown, {E::kCloning, E::kLaunched, E::kIsolated, E::kRegistered, E::kShutdownSent}},
      {S::kExited, {E::kCloning, E::kLaunched, E::kIsolated, E::kExited}},
      {S::kDestroying, {E::kCloning, E::kLaunched, E::kIsolated, E::kExited, E::kFinalized}},
      {S::kGone, {E::kCloning, E::kLaunched, E::kIsolated, E::kExited, E::kFinalized, E::kReaped}},
  };
  ContainerLifecycle life;
  for (E e : kPaths.at(state)) EXPECT_TRUE(life.on(e)) << containerEventName(e);
  EXPECT_EQ(life.state(), state);
  return life;
}

ExitInfo exitedWith(int code) {
  ExitInfo e;
  e.statusKnown = e.exited = true;
  e.exitCode = code;
  return e;
}

ExitInfo killedBy(int signal) {
  ExitInfo e;
  e.statusKnown = true;
  e.signal = signal;
  return e;
}

// A registered container whose executor then ended with `exit`.
ContainerLifecycle endedRunning(const ExitInfo& exit) {
  ContainerLifecycle life = reach(S::kRunning);
  EXPECT_TRUE(life.on(E::kExited, exit));
  return life;
}

wire::TaskStatus terminal(ContainerLifecycle& life, bool killing = false,
                          wire::Reason killReason = wire::REASON_KILLED_BY_FRAMEWORK) {
  if (life.state() != S::kDestroying) {
    EXPECT_TRUE(life.on(E::kFinalized));
  }
  wire::TaskStatus s;
  EXPECT_TRUE(life.fillTerminal(killing, killReason, &s));
  return s;
}

Limitation limit(wire::Reason reason, const std::string& message) {
  Limitation l;
  l.reason = reason;
  l.message = message;
  l.usage.set_mem_bytes(64 << 20);
  return l;
}

TEST(ContainerLifecycle, EveryLegalEventMovesAlongTheDiagram) {
  for (const auto& [from, event] : kLegal) {
    ContainerLifecycle life = reach(from.first);
    ASSERT_TRUE(life.on(from.second)) << containerStateName(from.first) << " + "
                                      << containerEventName(from.second);
    EXPECT_EQ(life.state(), event) << containerStateName(from.first) << " + "
                                   << containerEventName(from.second);
  }
}

TEST(ContainerLifecycle, EveryOtherEventIsRefusedAndChangesNothing) {
  size_t refused = 0;
  for (S state : kStates) {
    for (E event : kEvents) {
      if (kLegal.count({state, event})) continue;
      ContainerLifecycle life = reach(state);
      Status st = life.on(event);
      ASSERT_FALSE(st) << containerStateName(state) << " + " << containerEventName(event);
      EXPECT_NE(st.error().message.find(containerStateName(state)), std::string::npos);
      EXPECT_NE(st.error().message.find(containerEventName(event)), std::string::npos);
      EXPECT_EQ(life.state(), state);
      ++refused;
    }
  }
  EXPECT_EQ(refused, kStates.size() * kEvents.size() - kLegal.size());
}

TEST(ContainerLifecycle, ProcessAndTaskPredicatesFollowTheState) {
  const std::map<S, std::pair<bool, bool>> expected = {  // hasProcess, acceptsTasks
      {S::kPreparing, {false, true}},   {S::kStarting, {false, true}},   {S::kIsolating, {true, true}},
      {S::kRegistering, {true, true}},  {S::kRecovering, {true, true}},
      {S::kRunning, {true, true}},      {S::kShuttingDown, {true, false}},
      {S::kExited, {false, false}},     {S::kDestroying, {false, false}},
      {S::kGone, {false, false}},
  };
  for (const auto& [state, flags] : expected) {
    ContainerLifecycle life = reach(state);
    EXPECT_EQ(life.hasProcess(), flags.first) << containerStateName(state);
    EXPECT_EQ(life.acceptsTasks(), flags.second) << containerStateName(state);
  }
}

TEST(ContainerLifecycle, KillSignalsARunningProcessAndFinalizesOneThatIsNot) {
  ContainerLifecycle running = reach(S::kRunning);
  EXPECT_EQ(running.requestKill("first"), KillAction::kSignal);
  EXPECT_EQ(running.requestKill("second"), KillAction::kSignal);
  ContainerLifecycle preparing = reach(S::kPreparing);
  EXPECT_FALSE(preparing.killRequested());
  EXPECT_EQ(preparing.requestKill("could not start"), KillAction::kFinalize);
  EXPECT_TRUE(preparing.killRequested());  // its launch must not go on
  ContainerLifecycle exited = reach(S::kExited);
  EXPECT_EQ(exited.requestKill("late"), KillAction::kFinalize);
  ContainerLifecycle destroying = reach(S::kDestroying);
  EXPECT_EQ(destroying.requestKill("too late"), KillAction::kNone);
  EXPECT_EQ(reach(S::kGone).requestKill("gone"), KillAction::kNone);

  // The first reason is the one the update gives.
  ASSERT_TRUE(running.on(E::kExited, killedBy(SIGKILL)));
  wire::TaskStatus s = terminal(running);
  EXPECT_EQ(s.reason(), wire::REASON_EXECUTOR_SIGNALED);
  EXPECT_EQ(s.signal(), SIGKILL);
  EXPECT_EQ(s.message(), "executor killed by signal 9 (first)");
}

TEST(ContainerLifecycle, NoTerminalReasonBeforeFinalized) {
  ContainerLifecycle life = reach(S::kExited);
  wire::TaskStatus s;
  EXPECT_FALSE(life.fillTerminal(false, wire::REASON_NONE, &s));
}

TEST(ContainerLifecycle, ExecutorExitCodeAndSignalEndItsTasks) {
  ContainerLifecycle code = endedRunning(exitedWith(3));
  wire::TaskStatus s = terminal(code);
  EXPECT_EQ(s.state(), wire::TASK_FAILED);
  EXPECT_EQ(s.reason(), wire::REASON_EXECUTOR_EXITED);
  EXPECT_EQ(s.exit_code(), 3);
  EXPECT_EQ(s.message(), "executor exited with status 3");

  ContainerLifecycle signaled = endedRunning(killedBy(SIGSEGV));
  s = terminal(signaled);
  EXPECT_EQ(s.reason(), wire::REASON_EXECUTOR_SIGNALED);
  EXPECT_EQ(s.signal(), SIGSEGV);

  ContainerLifecycle early = reach(S::kRegistering);
  ASSERT_TRUE(early.on(E::kExited, exitedWith(1)));
  EXPECT_EQ(terminal(early).message(), "executor exited with status 1 before registering");
}

TEST(ContainerLifecycle, OomBeatsAKillInProgress) {
  ContainerLifecycle life = reach(S::kRunning);
  EXPECT_EQ(life.requestKill("task t1 outlived its kill grace period"), KillAction::kSignal);
  EXPECT_TRUE(life.recordLimitation(limit(wire::REASON_MEMORY_LIMIT, "memory limit 64 MiB exceeded")));
  ASSERT_TRUE(life.on(E::kExited, killedBy(SIGKILL)));
  wire::TaskStatus s = terminal(life, true, wire::REASON_KILLED_BY_FRAMEWORK);
  EXPECT_EQ(s.state(), wire::TASK_FAILED);
  EXPECT_EQ(s.reason(), wire::REASON_MEMORY_LIMIT);
  EXPECT_EQ(s.message(), "memory limit 64 MiB exceeded");
  EXPECT_EQ(s.usage().mem_bytes(), 64u << 20);
}

TEST(ContainerLifecycle, ALimitBeatsAnAgentFailureWhicheverCameFirst) {
  ContainerLifecycle life = reach(S::kRunning);
  EXPECT_TRUE(life.recordFailure(wire::TASK_FAILED, wire::REASON_ISOLATION_FAILED, "isolation failed"));
  EXPECT_TRUE(life.recordLimitation(limit(wire::REASON_PIDS_LIMIT, "pids limit")));
  ASSERT_TRUE(life.on(E::kExited, killedBy(SIGKILL)));
  EXPECT_EQ(terminal(life).reason(), wire::REASON_PIDS_LIMIT);
}

TEST(ContainerLifecycle, TheFirstLimitIsTheOneReported) {
  ContainerLifecycle life = reach(S::kRunning);
  EXPECT_TRUE(life.recordLimitation(limit(wire::REASON_DISK_LIMIT, "disk 10 MiB exceeded")));
  EXPECT_TRUE(life.recordLimitation(limit(wire::REASON_MEMORY_LIMIT, "memory")));
  ASSERT_TRUE(life.on(E::kExited, killedBy(SIGKILL)));
  wire::TaskStatus s = terminal(life, true, wire::REASON_REVOKED);
  EXPECT_EQ(s.reason(), wire::REASON_DISK_LIMIT);
  EXPECT_EQ(s.message(), "disk 10 MiB exceeded");
}

TEST(ContainerLifecycle, AnAgentFailureBeatsKillsAndTheExit) {
  ContainerLifecycle life = reach(S::kRegistering);
  EXPECT_TRUE(life.recordFailure(wire::TASK_FAILED, wire::REASON_EXECUTOR_EXITED,
                                 "executor did not register within 30 s"));
  EXPECT_TRUE(life.recordFailure(wire::TASK_LOST, wire::REASON_AGENT_RESTARTED, "second"));
  EXPECT_EQ(life.requestKill("executor did not register"), KillAction::kSignal);
  ASSERT_TRUE(life.on(E::kExited, killedBy(SIGKILL)));
  wire::TaskStatus s = terminal(life, true, wire::REASON_REVOKED);
  EXPECT_EQ(s.state(), wire::TASK_FAILED);
  EXPECT_EQ(s.reason(), wire::REASON_EXECUTOR_EXITED);
  EXPECT_EQ(s.message(), "executor did not register within 30 s");
  EXPECT_EQ(life.failureMessage(), "executor did not register within 30 s");
}

TEST(ContainerLifecycle, AKilledTaskGetsItsKillReasonOthersTheFrameworkRemoval) {
  ContainerLifecycle life = reach(S::kRunning);
  EXPECT_TRUE(life.recordFrameworkRemoved());
  EXPECT_EQ(life.requestKill("framework f was removed"), KillAction::kSignal);
  ASSERT_TRUE(life.on(E::kExited, killedBy(SIGKILL)));
  ASSERT_TRUE(life.on(E::kFinalized));
  wire::TaskStatus revoked, maxDuration, other;
  ASSERT_TRUE(life.fillTerminal(true, wire::REASON_REVOKED, &revoked));
  ASSERT_TRUE(life.fillTerminal(true, wire::REASON_MAX_DURATION, &maxDuration));
  ASSERT_TRUE(life.fillTerminal(false, wire::REASON_NONE, &other));
  EXPECT_EQ(revoked.state(), wire::TASK_KILLED);
  EXPECT_EQ(revoked.reason(), wire::REASON_REVOKED);
  EXPECT_EQ(revoked.message(), "task killed with its executor: framework f was removed");
  EXPECT_EQ(maxDuration.reason(), wire::REASON_MAX_DURATION);
  EXPECT_EQ(other.state(), wire::TASK_KILLED);
  EXPECT_EQ(other.reason(), wire::REASON_FRAMEWORK_REMOVED);
}

TEST(ContainerLifecycle, AKillWithoutAnAgentReasonSaysHowTheExecutorEnded) {
  ContainerLifecycle life = endedRunning(exitedWith(0));
  wire::TaskStatus s = terminal(life, true, wire::REASON_KILLED_BY_FRAMEWORK);
  EXPECT_EQ(s.state(), wire::TASK_KILLED);
  EXPECT_EQ(s.reason(), wire::REASON_KILLED_BY_FRAMEWORK);
  EXPECT_EQ(s.message(), "task killed with its executor: executor exited with status 0");
}

TEST(ContainerLifecycle, TheReasonIsDecidedOnceAtFinalized) {
  ContainerLifecycle life = endedRunning(exitedWith(2));
  ASSERT_TRUE(life.on(E::kFinalized));
  EXPECT_FALSE(life.recordLimitation(limit(wire::REASON_MEMORY_LIMIT, "late OOM")));
  EXPECT_FALSE(life.recordFailure(wire::TASK_LOST, wire::REASON_AGENT_RESTARTED, "late"));
  EXPECT_FALSE(life.recordFrameworkRemoved());
  EXPECT_EQ(life.requestKill("late"), KillAction::kNone);
  wire::TaskStatus s = terminal(life);
  EXPECT_EQ(s.reason(), wire::REASON_EXECUTOR_EXITED);
  EXPECT_EQ(s.exit_code(), 2);
  EXPECT_EQ(s.message(), "executor exited with status 2");
}

TEST(ContainerLifecycle, AFailureBeforeAnyProcessFinalizesFromPreparing) {
  ContainerLifecycle life;
  EXPECT_TRUE(life.recordFailure(wire::TASK_FAILED, wire::REASON_ISOLATION_FAILED, "cgroups/mem: EACCES"));
  EXPECT_EQ(life.requestKill("isolation failed"), KillAction::kFinalize);
  wire::TaskStatus s = terminal(life);
  EXPECT_EQ(s.reason(), wire::REASON_ISOLATION_FAILED);
  EXPECT_EQ(s.message(), "cgroups/mem: EACCES");
}

TEST(ContainerLifecycle, AnAdoptedExecutorThatEndsHasAnUnknownStatus) {
  ContainerLifecycle life = reach(S::kRecovering);
  ASSERT_TRUE(life.on(E::kExited, ExitInfo{}));
  wire::TaskStatus s = terminal(life);
  EXPECT_EQ(s.reason(), wire::REASON_EXECUTOR_EXITED);
  EXPECT_FALSE(s.has_exit_code());
  EXPECT_EQ(s.message(), "executor exited (status unknown: it was adopted after an agent restart)");

  ContainerLifecycle lost = reach(S::kRecovering);
  EXPECT_TRUE(lost.recordFailure(wire::TASK_LOST, wire::REASON_AGENT_RESTARTED,
                                 "executor did not reconnect after the agent restarted"));
  ASSERT_TRUE(lost.on(E::kExited, ExitInfo{}));
  EXPECT_EQ(terminal(lost).state(), wire::TASK_LOST);
}

TEST(ContainerLifecycle, AKillWhileTheCloneIsUnderWayWaitsForItsAnswer) {
  ContainerLifecycle life = reach(S::kStarting);
  EXPECT_FALSE(life.hasProcess()) << "no pid before the clone answers";
  EXPECT_EQ(life.requestKill("framework f was removed"), KillAction::kAwaitStart);
  EXPECT_TRUE(life.killRequested());
  EXPECT_EQ(life.state(), S::kStarting) << "a kill does not move the state";
  // The clone came back with a process: now it is signalled.
  ASSERT_TRUE(life.on(E::kLaunched));
  EXPECT_EQ(life.requestKill("killed while its executor was starting"), KillAction::kSignal);
  ASSERT_TRUE(life.on(E::kExited, killedBy(SIGKILL)));
  wire::TaskStatus s = terminal(life);
  EXPECT_EQ(s.reason(), wire::REASON_EXECUTOR_SIGNALED);
  EXPECT_EQ(s.message(), "executor killed by signal 9 before registering (framework f was removed)");
}

TEST(ContainerLifecycle, ACloneThatFailedFinalizesFromStartingWithItsFailure) {
  ContainerLifecycle life = reach(S::kStarting);
  EXPECT_TRUE(life.recordFailure(wire::TASK_FAILED, wire::REASON_EXEC_FAILED,
                                 "executor /x could not start: clone3: EAGAIN"));
  wire::TaskStatus s = terminal(life);
  EXPECT_EQ(life.state(), S::kDestroying);
  EXPECT_EQ(s.reason(), wire::REASON_EXEC_FAILED);
  EXPECT_EQ(s.message(), "executor /x could not start: clone3: EAGAIN");
}

TEST(ContainerLifecycle, TakeAcceptsWhatTheStateTakes) {
  ContainerLifecycle life;
  life.take(E::kCloning);
  life.take(E::kLaunched);
  EXPECT_EQ(life.state(), S::kIsolating);
}

TEST(ContainerLifecycleDeathTest, TakingARefusedEventIsAProgrammerError) {
  ContainerLifecycle life = reach(S::kRunning);
  EXPECT_DEATH(life.take(E::kCloning), "running cannot take event cloning");
}

// --- Container ---

wire::TaskInfo taskWith(const std::string& id, double cpus) {
  wire::TaskInfo t;
  t.set_task_id(id);
  auto* r = t.add_resources();
  r->set_name("cpus");
  r->set_scalar(cpus);
  return t;
}

class ContainerTest : public ::testing::Test {
 protected:
  ContainerTest() {
    wire::FrameworkInfo framework;
    framework.set_id("f1");
    wire::ExecutorInfo executor;
    executor.set_executor_id("e1");
    auto* r = executor.add_resources();
    r->set_name("cpus");
    r->set_scalar(0.1);
    c_ = std::make_unique<Container>(io_, "f1.e1", 7, framework, executor);
  }

  // Runs the loop until nothing is left to run (timers of 0 s included).
  void drain() {
    io_.restart();
    io_.run_for(std::chrono::milliseconds(50));
  }

  asio::io_context io_;
  std::unique_ptr<Container> c_;
};

TEST_F(ContainerTest, ATaskIdIsOnceAmongItsTasksAndTheWaitingOnes) {
  c_->addTask(taskWith("t1", 0.5));
  c_->addWaiting(taskWith("t2", 0.5));
  EXPECT_TRUE(c_->hasTask("t1"));
  EXPECT_TRUE(c_->hasTask("t2"));
  EXPECT_FALSE(c_->hasTask("t3"));
  EXPECT_DEATH(c_->addTask(taskWith("t2", 0.5)), "hasTask");
  EXPECT_DEATH(c_->addWaiting(taskWith("t1", 0.5)), "hasTask");
  ASSERT_TRUE(c_->removeWaiting("t2"));
  EXPECT_FALSE(c_->removeWaiting("t2"));
  EXPECT_FALSE(c_->hasTask("t2"));
  EXPECT_TRUE(c_->endTask("t1"));
  EXPECT_FALSE(c_->endTask("t1"));
  EXPECT_FALSE(c_->hasTask("t1"));
}

TEST_F(ContainerTest, ItsLimitsAreTheExecutorsAndItsTasks) {
  EXPECT_EQ(c_->limits().scalarMillis("cpus"), 100);
  c_->addTask(taskWith("t1", 0.5));
  c_->addTask(taskWith("t2", 0.25));
  c_->addWaiting(taskWith("t3", 4));
  EXPECT_EQ(c_->limits().scalarMillis("cpus"), 850) << "a waiting task is the replacement's";
  c_->endTask("t1");
  EXPECT_EQ(c_->limits().scalarMillis("cpus"), 350);
}

TEST_F(ContainerTest, TheWaitingTasksGoTogetherInOrder) {
  c_->addWaiting(taskWith("t1", 1));
  c_->addWaiting(taskWith("t2", 1));
  auto waiting = c_->takeWaiting();
  ASSERT_EQ(waiting.size(), 2u);
  EXPECT_EQ(waiting[0].task_id(), "t1");
  EXPECT_EQ(waiting[1].task_id(), "t2");
  EXPECT_TRUE(c_->waiting().empty());
}

TEST_F(ContainerTest, ItsExitCancelsTheTimersItMakesMoot) {
  std::vector<std::string> fired;
  auto note = [&](const char* what) { return [&fired, what](Container&) { fired.push_back(what); }; };
  c_->take(E::kCloning);
  c_->take(E::kLaunched);
  c_->take(E::kIsolated);
  ContainerTask& t = c_->addTask(taskWith("t1", 0.5));
  t.killTimer = std::make_unique<asio::steady_timer>(io_);
  t.durationTimer = std::make_unique<asio::steady_timer>(io_);
  c_->arm(Container::Timer::kRegister, std::chrono::milliseconds(1), note("register"));
  c_->arm(Container::Timer::kIdle, std::chrono::milliseconds(1), note("idle"));
  c_->arm(Container::Timer::kShutdown, std::chrono::milliseconds(1), note("shutdown"));
  c_->arm(*t.killTimer, std::chrono::milliseconds(1), note("kill"));
  c_->arm(*t.durationTimer, std::chrono::milliseconds(1), note("duration"));
  c_->arm(Container::Timer::kReap, std::chrono::milliseconds(1), note("reap"));
  ASSERT_TRUE(c_->on(E::kExited, exitedWith(0)));
  drain();
  EXPECT_EQ(fired, std::vector<std::string>{"reap"}) << "only the reap timer outlives the exit";
}

TEST_F(ContainerTest, RegisteringCancelsTheRegisterTimerAndFinalizingTheDrainTimer) {
  std::vector<std::string> fired;
  c_->take(E::kCloning);
  c_->take(E::kLaunched);
  c_->take(E::kIsolated);
  c_->arm(Container::Timer::kRegister, std::chrono::milliseconds(1), [&](Container&) { fired.push_back("register"); });
  c_->take(E::kRegistered);
  drain();
  EXPECT_TRUE(fired.empty());
  c_->take(E::kExited);
  c_->arm(Container::Timer::kDrain, std::chrono::milliseconds(1), [&](Container&) { fired.push_back("drain"); });
  c_->take(E::kFinalized);
  drain();
  EXPECT_TRUE(fired.empty());
}

TEST_F(ContainerTest, ANewTaskEndsTheIdleWait) {
  bool idle = false;
  c_->arm(Container::Timer::kIdle, std::chrono::milliseconds(1), [&](Container&) { idle = true; });
  c_->addTask(taskWith("t1", 0.5));
  drain();
  EXPECT_FALSE(idle);
}

TEST_F(ContainerTest, ATimerRunsOnceAndNeverOnceTheContainerIsGone) {
  int runs = 0;
  c_->arm(Container::Timer::kIdle, std::chrono::milliseconds(0), [&](Container& c) {
    EXPECT_EQ(&c, c_.get());
    ++runs;
  });
  drain();
  EXPECT_EQ(runs, 1);
  c_->arm(Container::Timer::kIdle, std::chrono::milliseconds(0), [&](Container&) { ++runs; });
  c_.reset();
  drain();
  EXPECT_EQ(runs, 1) << "a callback ran for a container that is gone";
}

TEST_F(ContainerTest, AnExecutorsUpdateCarriesTheAgentsKillReasonAndTheLimit) {
  ContainerTask& t = c_->addTask(taskWith("t1", 0.5));
  t.killing = true;
  t.killReason = wire::REASON_REVOKED;
  wire::TaskStatus killed;
  killed.set_task_id("t1");
  killed.set_state(wire::TASK_KILLED);
  killed.set_message("SIGTERM");
  c_->explainUpdate(&killed);
  EXPECT_EQ(killed.reason(), wire::REASON_REVOKED);
  EXPECT_EQ(killed.message(), "revoked by the allocation module");

  EXPECT_TRUE(c_->recordLimitation(limit(wire::REASON_MEMORY_LIMIT, "memory limit 64 MiB exceeded")));
  wire::TaskStatus oom;
  oom.set_task_id("t2");
  oom.set_state(wire::TASK_FAILED);
  oom.set_message("killed by signal 9");
  c_->explainUpdate(&oom);
  EXPECT_EQ(oom.reason(), wire::REASON_MEMORY_LIMIT);
  EXPECT_EQ(oom.message(), "memory limit 64 MiB exceeded (executor: killed by signal 9)");
  EXPECT_EQ(oom.usage().mem_bytes(), 64u << 20);
  wire::TaskStatus finished;
  finished.set_task_id("t3");
  finished.set_state(wire::TASK_FINISHED);
  c_->explainUpdate(&finished);
  EXPECT_EQ(finished.state(), wire::TASK_FINISHED) << "a task that finished keeps FINISHED";
}

TEST_F(ContainerTest, ItsCheckpointHasItsProcessAndItsTasks) {
  c_->pid = 4242;
  c_->startTime = 99;
  c_->sandbox = "/w/sandboxes/f1.e1.1";
  c_->secret = "s3cret";
  ContainerTask& t = c_->addTask(taskWith("t1", 0.5));
  t.latest = wire::TaskStatus();
  t.latest->set_state(wire::TASK_RUNNING);
  c_->addWaiting(taskWith("t2", 1));
  ExecutorCheckpoint ck = c_->checkpointRecord();
  EXPECT_EQ(ck.container, "f1.e1");
  EXPECT_EQ(ck.pid, 4242);
  EXPECT_EQ(ck.startTime, 99u);
  EXPECT_EQ(ck.sandbox, "/w/sandboxes/f1.e1.1");
  EXPECT_EQ(ck.secret, "s3cret");
  ASSERT_EQ(ck.tasks.size(), 1u) << "waiting tasks are not this executor's";
  EXPECT_EQ(ck.tasks[0].task_id(), "t1");
  EXPECT_EQ(ck.latest.at("t1").state(), wire::TASK_RUNNING);
}

}  // namespace
}  // namespace allot
