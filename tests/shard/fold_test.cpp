// AgentFold: what a link shard forwards to the leader, answers itself or
// drops, and the report it keeps per agent.
#include "shard/fold.h"

#include <gtest/gtest.h>

#include "proto/input_limits.h"
#include "proto/task_state.h"

namespace allot {
namespace {

wire::Envelope heartbeat(uint64_t sequence) {
  wire::Envelope e;
  e.mutable_heartbeat()->set_sequence(sequence);
  return e;
}

wire::Envelope usage(double cpuS) {
  wire::Envelope e;
  auto* u = e.mutable_usage_report()->add_executors();
  u->set_framework_id("F-1");
  u->set_executor_id("E-1");
  u->mutable_usage()->set_cpu_time_s(cpuS);
  return e;
}

wire::Envelope registration() {
  wire::Envelope e;
  auto* r = e.mutable_register_agent();
  r->mutable_info()->set_hostname("h1");
  auto* ex = r->add_executors();
  ex->mutable_info()->set_framework_id("F-1");
  ex->mutable_info()->set_executor_id("E-1");
  ex->add_tasks()->set_task_id("T-1");
  ex->add_tasks()->set_task_id("T-2");
  return e;
}

wire::Envelope status(const std::string& task, wire::TaskState state) {
  wire::Envelope e;
  auto* s = e.mutable_status_update()->mutable_status();
  s->set_framework_id("F-1");
  s->set_executor_id("E-1");
  s->set_task_id(task);
  s->set_state(state);
  return e;
}

TEST(AgentFold, HeartbeatsAreAnsweredAtTheShardAndSummarizedOncePerInterval) {
  AgentFold fold(10);
  ASSERT_TRUE(fold.attach(1).ok());
  ASSERT_TRUE(fold.attach(2).ok());
  wire::Envelope answer;
  EXPECT_EQ(fold.fold(1, heartbeat(7), &answer), FoldAction::kAnswer);
  EXPECT_EQ(answer.heartbeat_ack().sequence(), 7u);
  for (uint64_t i = 8; i < 20; ++i) {
    wire::Envelope again;
    EXPECT_EQ(fold.fold(1, heartbeat(i), &again), FoldAction::kAnswer);
  }
  EXPECT_EQ(fold.takeLiveness(), std::vector<Slot>{1});
  EXPECT_TRUE(fold.takeLiveness().empty());
  wire::Envelope ignored;
  (void)fold.fold(2, heartbeat(1), &ignored);
  (void)fold.fold(1, heartbeat(20), &ignored);
  EXPECT_EQ(fold.takeLiveness(), (std::vector<Slot>{2, 1}));
  EXPECT_EQ(fold.counts().answered, 15u);
  EXPECT_EQ(fold.counts().forwarded, 0u);
}

// The leader hears a forwarded message itself: only frames that end at the
// shard are summarized.
TEST(AgentFold, TheSummaryNamesOnlyAgentsWhoseFramesEndedAtTheShard) {
  AgentFold fold(10);
  ASSERT_TRUE(fold.attach(1).ok());
  ASSERT_TRUE(fold.attach(2).ok());
  ASSERT_TRUE(fold.attach(3).ok());
  wire::Envelope answer;
  EXPECT_EQ(fold.fold(1, registration(), &answer), FoldAction::kForward);
  EXPECT_EQ(fold.fold(1, status("t1", wire::TASK_RUNNING), &answer), FoldAction::kForward);
  EXPECT_EQ(fold.fold(2, usage(1.0), &answer), FoldAction::kForward);
  EXPECT_TRUE(fold.takeLiveness().empty());
  EXPECT_EQ(fold.fold(2, usage(1.0), &answer), FoldAction::kDrop);
  EXPECT_EQ(fold.fold(3, heartbeat(1), &answer), FoldAction::kAnswer);
  EXPECT_EQ(fold.takeLiveness(), (std::vector<Slot>{2, 3}));
  EXPECT_EQ(fold.counts().forwarded, 3u);
}

TEST(AgentFold, UsageGoesOnOnlyWhenItChanged) {
  AgentFold fold(10);
  ASSERT_TRUE(fold.attach(1).ok());
  wire::Envelope answer;
  EXPECT_EQ(fold.fold(1, usage(1.0), &answer), FoldAction::kForward);
  EXPECT_EQ(fold.fold(1, usage(1.0), &answer), FoldAction::kDrop);
  EXPECT_EQ(fold.fold(1, usage(2.0), &answer), FoldAction::kForward);
  EXPECT_EQ(fold.counts().dropped, 1u);
  // A new registration (a new leader's) gets the next report whatever it is.
  EXPECT_EQ(fold.fold(1, registration(), &answer), FoldAction::kForward);
  EXPECT_EQ(fold.fold(1, usage(2.0), &answer), FoldAction::kForward);
  // So does a new leader the shard hands the agent to, unasked.
  EXPECT_EQ(fold.fold(1, usage(2.0), &answer), FoldAction::kDrop);
  fold.leaderLost();
  EXPECT_EQ(fold.fold(1, usage(2.0), &answer), FoldAction::kForward);
  // Any message counts as hearing from the agent.
  EXPECT_EQ(fold.takeLiveness(), std::vector<Slot>{1});
}

TEST(AgentFold, KeepsTheLastFullReportWithEveryStatusApplied) {
  AgentFold fold(10);
  ASSERT_TRUE(fold.attach(1).ok());
  EXPECT_EQ(fold.report(1), nullptr);
  wire::Envelope answer;
  EXPECT_EQ(fold.fold(1, registration(), &answer), FoldAction::kForward);
  EXPECT_EQ(fold.fold(1, status("T-1", wire::TASK_RUNNING), &answer), FoldAction::kForward);
  EXPECT_EQ(fold.fold(1, status("T-2", wire::TASK_STARTING), &answer), FoldAction::kForward);
  EXPECT_EQ(fold.fold(1, status("T-2", wire::TASK_RUNNING), &answer), FoldAction::kForward);
  // A task the report does not hold changes nothing.
  EXPECT_EQ(fold.fold(1, status("T-9", wire::TASK_RUNNING), &answer), FoldAction::kForward);
  const wire::RegisterAgent* report = fold.report(1);
  ASSERT_NE(report, nullptr);
  ASSERT_EQ(report->executors(0).tasks_size(), 2);
  ASSERT_EQ(report->executors(0).latest_size(), 2);
  EXPECT_EQ(report->executors(0).latest(0).task_id(), "T-1");
  EXPECT_EQ(report->executors(0).latest(0).state(), wire::TASK_RUNNING);
  EXPECT_EQ(report->executors(0).latest(1).task_id(), "T-2");
  EXPECT_EQ(report->executors(0).latest(1).state(), wire::TASK_RUNNING);
}

wire::RunTask runTask(const std::string& framework, const std::string& task, const std::string& user = "") {
  wire::RunTask m;
  m.mutable_framework()->set_id(framework);
  m.mutable_framework()->set_name("execute");
  m.mutable_task()->set_task_id(task);
  m.mutable_task()->mutable_command()->set_shell("sleep 60");
  m.mutable_task()->mutable_command()->set_user(user);
  auto* cpus = m.mutable_task()->add_resources();
  cpus->set_name("cpus");
  cpus->set_scalar(0.5);
  return m;
}

const wire::ExecutorState* executorOf(const wire::RegisterAgent& report, const std::string& framework,
                                      const std::string& executor) {
  for (const auto& ex : report.executors()) {
    if (ex.info().framework_id() == framework && ex.info().executor_id() == executor) return &ex;
  }
  return nullptr;
}

// A task the leader launches after the agent registered is in the report a
// new leader gets, before the agent re-sends its own.
TEST(AgentFold, TheKeptReportTakesTheTasksTheLeaderLaunches) {
  AgentFold fold(10);
  ASSERT_TRUE(fold.attach(1).ok());
  fold.launched(1, runTask("F-2", "T-0"));  // before any report: nothing to keep
  EXPECT_EQ(fold.report(1), nullptr);
  wire::Envelope answer;
  ASSERT_EQ(fold.fold(1, registration(), &answer), FoldAction::kForward);
  fold.launched(1, runTask("F-2", "T-3"));
  fold.launched(1, runTask("F-2", "T-3"));  // again: the agent ignores it too
  fold.launched(7, runTask("F-2", "T-4"));  // a slot not held
  const wire::RegisterAgent* report = fold.report(1);
  ASSERT_NE(report, nullptr);
  ASSERT_EQ(report->frameworks_size(), 1);
  EXPECT_EQ(report->frameworks(0).id(), "F-2");
  const wire::ExecutorState* ex = executorOf(*report, "F-2", kCommandExecutorId);
  ASSERT_NE(ex, nullptr);
  ASSERT_EQ(ex->tasks_size(), 1);
  ASSERT_EQ(ex->latest_size(), 1);
  EXPECT_EQ(ex->tasks(0).task_id(), "T-3");
  EXPECT_EQ(ex->tasks(0).resources(0).scalar(), 0.5);
  EXPECT_EQ(ex->latest(0).state(), wire::TASK_STAGING);
  wire::Envelope running = status("T-3", wire::TASK_RUNNING);
  running.mutable_status_update()->mutable_status()->set_framework_id("F-2");
  running.mutable_status_update()->mutable_status()->set_executor_id(kCommandExecutorId);
  ASSERT_EQ(fold.fold(1, running, &answer), FoldAction::kForward);
  ex = executorOf(*fold.report(1), "F-2", kCommandExecutorId);
  ASSERT_NE(ex, nullptr);
  EXPECT_EQ(ex->latest(0).state(), wire::TASK_RUNNING);
  EXPECT_EQ(fold.report(1)->executors(0).tasks_size(), 2) << "the registration's tasks stay";
}

// The executor of a command task with a user of its own depends on the
// agent's default user: the task's first status names it.
TEST(AgentFold, ALaunchedTaskMovesToTheExecutorItsStatusNames) {
  AgentFold fold(10);
  ASSERT_TRUE(fold.attach(1).ok());
  wire::Envelope answer;
  ASSERT_EQ(fold.fold(1, registration(), &answer), FoldAction::kForward);
  fold.launched(1, runTask("F-2", "T-3", "bob"));
  std::string bobs = std::string(kCommandExecutorId) + ".bob";
  wire::Envelope running = status("T-3", wire::TASK_RUNNING);
  running.mutable_status_update()->mutable_status()->set_framework_id("F-2");
  running.mutable_status_update()->mutable_status()->set_executor_id(bobs);
  ASSERT_EQ(fold.fold(1, running, &answer), FoldAction::kForward);
  const wire::RegisterAgent* report = fold.report(1);
  const wire::ExecutorState* ex = executorOf(*report, "F-2", bobs);
  ASSERT_NE(ex, nullptr);
  ASSERT_EQ(ex->tasks_size(), 1);
  EXPECT_EQ(ex->tasks(0).resources(0).scalar(), 0.5);
  EXPECT_EQ(ex->latest(0).state(), wire::TASK_RUNNING);
  const wire::ExecutorState* guessed = executorOf(*report, "F-2", kCommandExecutorId);
  ASSERT_NE(guessed, nullptr);
  EXPECT_EQ(guessed->tasks_size(), 0);
  EXPECT_EQ(guessed->latest_size(), 0);
}

// As the agent reports it: an ended task runs, holding nothing, until its
// terminal update is acknowledged; a new report keeps that.
TEST(AgentFold, AnEndedTaskStaysUntilItsTerminalUpdateIsAcknowledged) {
  AgentFold fold(10);
  ASSERT_TRUE(fold.attach(1).ok());
  wire::Envelope answer;
  ASSERT_EQ(fold.fold(1, registration(), &answer), FoldAction::kForward);
  fold.launched(1, runTask("F-1", "T-3"));
  wire::Envelope finished = status("T-3", wire::TASK_FINISHED);
  finished.mutable_status_update()->mutable_status()->set_executor_id(kCommandExecutorId);
  finished.mutable_status_update()->mutable_status()->set_update_id("U-7");
  ASSERT_EQ(fold.fold(1, finished, &answer), FoldAction::kForward);
  // Anything after the end is ignored, as the agent does.
  wire::Envelope late = status("T-3", wire::TASK_RUNNING);
  late.mutable_status_update()->mutable_status()->set_executor_id(kCommandExecutorId);
  ASSERT_EQ(fold.fold(1, late, &answer), FoldAction::kForward);
  auto ended = [&]() -> const wire::ExecutorState* { return executorOf(*fold.report(1), "F-1", kCommandExecutorId); };
  ASSERT_NE(ended(), nullptr);
  ASSERT_EQ(ended()->tasks_size(), 1);
  EXPECT_EQ(ended()->tasks(0).task_id(), "T-3");
  EXPECT_EQ(ended()->tasks(0).resources_size(), 0);
  EXPECT_EQ(ended()->latest(0).state(), wire::TASK_RUNNING);
  wire::StatusAcknowledgement ack;
  ack.set_framework_id("F-1");
  ack.set_task_id("T-3");
  ack.set_update_id("U-6");  // not the terminal update
  fold.acknowledged(1, ack);
  ASSERT_EQ(ended()->tasks_size(), 1);
  // The agent's own report (a new leader) holds it too: still ended.
  wire::Envelope again = registration();
  *again.mutable_register_agent()->add_executors() = *ended();
  ASSERT_EQ(fold.fold(1, again, &answer), FoldAction::kForward);
  ack.set_update_id("U-7");
  fold.acknowledged(1, ack);
  ASSERT_NE(ended(), nullptr);
  EXPECT_EQ(ended()->tasks_size(), 0);
  EXPECT_EQ(ended()->latest_size(), 0);
  // A terminal update nobody acknowledges (none asked) ends it at once.
  ASSERT_EQ(fold.fold(1, status("T-1", wire::TASK_FAILED), &answer), FoldAction::kForward);
  ASSERT_EQ(fold.report(1)->executors(0).tasks_size(), 1);
  EXPECT_EQ(fold.report(1)->executors(0).tasks(0).task_id(), "T-2");
}

// Thousands of tasks under one executor, ended, acknowledged and moved to
// another executor in no particular order: tasks leave their executor by
// swapping with its last, and every task keeps its own latest status and
// its place in the index (a later update for it still finds it).
TEST(AgentFold, ManyTasksEndAndMoveInAnyOrderEachKeepingItsOwnStatus) {
  constexpr int kTasks = 3000;
  AgentFold fold(10);
  ASSERT_TRUE(fold.attach(1).ok());
  wire::Envelope answer;
  ASSERT_EQ(fold.fold(1, registration(), &answer), FoldAction::kForward);
  auto id = [](int i) { return "T-" + std::to_string(1000 + i); };
  auto update = [&](int i, wire::TaskState state, const std::string& executor) {
    wire::Envelope e = status(id(i), state);
    e.mutable_status_update()->mutable_status()->set_executor_id(executor);
    e.mutable_status_update()->mutable_status()->set_update_id("U-" + std::to_string(i));
    ASSERT_EQ(fold.fold(1, e, &answer), FoldAction::kForward);
  };
  for (int i = 0; i < kTasks; ++i) fold.launched(1, runTask("F-1", id(i)));
  for (int i = 0; i < kTasks; ++i) update(i, wire::TASK_RUNNING, kCommandExecutorId);
  // i % 3: 0 ends and is acknowledged, 1 moves to executor E-2, 2 stays;
  // each step walks the tasks in a different order.
  for (int k = 0; k < kTasks; ++k) {
    int i = (k * 7919) % kTasks;
    if (i % 3 == 0) update(i, wire::TASK_FINISHED, kCommandExecutorId);
    if (i % 3 == 1) update(i, wire::TASK_RUNNING, "E-2");
  }
  for (int k = kTasks - 1; k >= 0; --k) {
    if (k % 3 != 0) continue;
    wire::StatusAcknowledgement ack;
    ack.set_framework_id("F-1");
    ack.set_task_id(id(k));
    ack.set_update_id("U-" + std::to_string(k));
    fold.acknowledged(1, ack);
  }
  for (int i = 2; i < kTasks; i += 3) update(i, wire::TASK_STARTING, kCommandExecutorId);
  const wire::ExecutorState* command = executorOf(*fold.report(1), "F-1", kCommandExecutorId);
  const wire::ExecutorState* moved = executorOf(*fold.report(1), "F-1", "E-2");
  ASSERT_NE(command, nullptr);
  ASSERT_NE(moved, nullptr);
  EXPECT_EQ(command->tasks_size(), kTasks / 3);
  EXPECT_EQ(moved->tasks_size(), kTasks / 3);
  for (const auto* ex : {command, moved}) {
    ASSERT_EQ(ex->latest_size(), ex->tasks_size());
    for (int t = 0; t < ex->tasks_size(); ++t) {
      int i = std::stoi(ex->tasks(t).task_id().substr(2)) - 1000;
      EXPECT_EQ(ex->latest(t).task_id(), ex->tasks(t).task_id());
      EXPECT_EQ(ex->tasks(t).resources(0).scalar(), 0.5);
      EXPECT_EQ(i % 3, ex == command ? 2 : 1) << ex->tasks(t).task_id();
      EXPECT_EQ(ex->latest(t).state(), ex == command ? wire::TASK_STARTING : wire::TASK_RUNNING);
    }
  }
}

TEST(AgentFold, ALaunchPastTheTaskLimitIsLeftToTheAgentsOwnReport) {
  AgentFold fold(10);
  ASSERT_TRUE(fold.attach(1).ok());
  wire::Envelope full = registration();
  auto* ex = full.mutable_register_agent()->mutable_executors(0);
  for (size_t i = ex->tasks_size(); i < limits::kTasksPerAgentMax; ++i) {
    ex->add_tasks()->set_task_id("T-x" + std::to_string(i));
  }
  wire::Envelope answer;
  ASSERT_EQ(fold.fold(1, full, &answer), FoldAction::kForward);
  fold.launched(1, runTask("F-2", "T-over"));
  EXPECT_EQ(executorOf(*fold.report(1), "F-2", kCommandExecutorId), nullptr);
  EXPECT_EQ(fold.report(1)->frameworks_size(), 0);
  // Room again once a task ends.
  ASSERT_EQ(fold.fold(1, status("T-1", wire::TASK_KILLED), &answer), FoldAction::kForward);
  fold.launched(1, runTask("F-2", "T-over"));
  EXPECT_NE(executorOf(*fold.report(1), "F-2", kCommandExecutorId), nullptr);
}

// A new leader gets the kept report: it must name the agent by the id and
// secret the previous leader gave it, not the empty id of a first
// registration.
TEST(AgentFold, TheKeptReportTakesTheIdAndSecretTheLeaderGave) {
  AgentFold fold(10);
  ASSERT_TRUE(fold.attach(1).ok());
  wire::AgentRegistered registered;
  registered.set_agent_id("A-1");
  registered.set_agent_secret("s3cret");
  EXPECT_TRUE(fold.registered(1, registered));  // before any report: nothing to keep
  EXPECT_EQ(fold.report(1), nullptr);
  wire::Envelope answer;
  ASSERT_EQ(fold.fold(1, registration(), &answer), FoldAction::kForward);
  (void)fold.registered(1, registered);
  (void)fold.registered(7, registered);  // a slot not held
  const wire::RegisterAgent* report = fold.report(1);
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->info().id(), "A-1");
  EXPECT_EQ(report->agent_secret(), "s3cret");
  EXPECT_EQ(report->info().hostname(), "h1");
}

// An agent that sends its full report again (after a handover): when it is the
// one the linked leader registered (handed over, changes applied), that
// leader's AgentRegistered answers it at the shard; any difference, or a
// leader that has not registered it (yet, or any more), sends it on.
TEST(AgentFold, AReportTheLinkedLeaderHoldsIsAnsweredWithItsRegistration) {
  AgentFold fold(10);
  ASSERT_TRUE(fold.attach(1).ok());
  wire::Envelope answer;
  ASSERT_EQ(fold.fold(1, registration(), &answer), FoldAction::kForward);
  wire::Envelope same = registration();
  same.mutable_register_agent()->mutable_info()->set_id("A-1");
  same.mutable_register_agent()->set_agent_secret("s3cret");
  EXPECT_EQ(fold.fold(1, same, &answer), FoldAction::kForward);  // no leader's answer yet

  wire::AgentRegistered registered;
  registered.set_agent_id("A-1");
  registered.set_agent_secret("s3cret");
  registered.set_master_id("M-2");
  (void)fold.registered(1, registered);
  ASSERT_EQ(fold.fold(1, status("T-1", wire::TASK_RUNNING), &answer), FoldAction::kForward);
  *same.mutable_register_agent()->mutable_executors(0)->add_latest() =
      status("T-1", wire::TASK_RUNNING).status_update().status();
  same.mutable_register_agent()->mutable_executors(0)->add_latest();
  answer.Clear();
  ASSERT_EQ(fold.fold(1, same, &answer), FoldAction::kAnswer);
  EXPECT_EQ(answer.agent_registered().master_id(), "M-2");
  EXPECT_EQ(answer.agent_registered().agent_id(), "A-1");
  EXPECT_EQ(fold.counts().confirmed, 1u);

  wire::Envelope more = same;
  more.mutable_register_agent()->mutable_executors(0)->add_tasks()->set_task_id("T-3");
  more.mutable_register_agent()->mutable_executors(0)->add_latest();
  EXPECT_EQ(fold.fold(1, more, &answer), FoldAction::kForward);
  EXPECT_EQ(fold.fold(1, more, &answer), FoldAction::kForward);  // the leader has not answered it
  (void)fold.registered(1, registered);
  fold.leaderLost();
  EXPECT_EQ(fold.fold(1, more, &answer), FoldAction::kForward);
}

// A new leader's AgentRegistered for the report handed over goes on to
// the agent only when the agent needs it: it waits for an answer, it would
// learn something new, or it has updates no leader acknowledged (it sends
// them again on hearing it). Otherwise nothing the agent knows changed.
TEST(AgentFold, ANewLeadersRegistrationGoesOnOnlyWhenTheAgentNeedsIt) {
  AgentFold fold(10);
  ASSERT_TRUE(fold.attach(1).ok());
  wire::Envelope answer;
  ASSERT_EQ(fold.fold(1, registration(), &answer), FoldAction::kForward);
  wire::AgentRegistered registered;
  registered.set_agent_id("A-1");
  registered.set_agent_secret("s3cret");
  registered.set_heartbeat_interval_s(5);
  registered.add_operate_principals("ops");
  registered.set_master_id("M-1");
  EXPECT_TRUE(fold.registered(1, registered));  // the answer it waits for

  auto leader = [&](const std::string& masterId) {
    wire::AgentRegistered m = registered;
    m.set_master_id(masterId);
    m.set_leader_epoch(m.leader_epoch() + 1);
    return m;
  };
  fold.leaderLost();
  EXPECT_FALSE(fold.registered(1, leader("M-2")));
  EXPECT_EQ(fold.counts().unchanged, 1u);
  EXPECT_EQ(fold.report(1)->info().id(), "A-1");

  wire::Envelope update = status("T-1", wire::TASK_RUNNING);
  update.mutable_status_update()->mutable_status()->set_update_id("U-1");
  ASSERT_EQ(fold.fold(1, update, &answer), FoldAction::kForward);
  EXPECT_TRUE(fold.registered(1, leader("M-3")));
  wire::StatusAcknowledgement ack;
  ack.set_framework_id("F-1");
  ack.set_task_id("T-1");
  ack.set_update_id("U-1");
  fold.acknowledged(1, ack);
  EXPECT_FALSE(fold.registered(1, leader("M-4")));

  registered.set_heartbeat_interval_s(10);
  EXPECT_TRUE(fold.registered(1, leader("M-5")));
  EXPECT_FALSE(fold.registered(1, leader("M-6")));
  registered.add_operate_principals("auditor");
  EXPECT_TRUE(fold.registered(1, leader("M-7")));
  registered.set_agent_secret("other");
  EXPECT_TRUE(fold.registered(1, leader("M-8")));

  wire::Envelope changed = registration();
  changed.mutable_register_agent()->mutable_info()->set_hostname("h2");
  ASSERT_EQ(fold.fold(1, changed, &answer), FoldAction::kForward);
  EXPECT_TRUE(fold.registered(1, leader("M-8")));
  EXPECT_FALSE(fold.registered(1, leader("M-9")));

  // Past the bound the shard stops tracking and tells the agent: even
  // with every tracked update acknowledged, one untracked may be pending.
  for (size_t i = 0; i <= kUnacknowledgedPerAgentMax; ++i) {
    update.mutable_status_update()->mutable_status()->set_update_id("V-" + std::to_string(i));
    ASSERT_EQ(fold.fold(1, update, &answer), FoldAction::kForward);
  }
  for (size_t i = 0; i <= kUnacknowledgedPerAgentMax; ++i) {
    ack.set_update_id("V-" + std::to_string(i));
    fold.acknowledged(1, ack);
  }
  EXPECT_TRUE(fold.registered(1, leader("M-10")));
  EXPECT_FALSE(fold.registered(1, leader("M-11")));
}

TEST(AgentFold, BoundedAndDetachedSlotsAreForgotten) {
  AgentFold fold(2);
  ASSERT_TRUE(fold.attach(1).ok());
  EXPECT_FALSE(fold.attach(1).ok());
  ASSERT_TRUE(fold.attach(2).ok());
  EXPECT_FALSE(fold.attach(3).ok());
  wire::Envelope answer;
  (void)fold.fold(1, heartbeat(1), &answer);
  fold.detach(1);
  EXPECT_TRUE(fold.takeLiveness().empty());
  EXPECT_EQ(fold.fold(1, registration(), &answer), FoldAction::kDrop);
  EXPECT_TRUE(fold.attach(3).ok());
  EXPECT_EQ(fold.size(), 2u);
}

}  // namespace
}  // namespace allot
