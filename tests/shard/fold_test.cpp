// AgentFold: what a link shard forwards to the leader, answers itself or
// drops, and the report it keeps per agent.
#include "shard/fold.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(fold.fold(1, status("T-1", wire::TASK_FINISHED), &answer), FoldAction::kForward);
  EXPECT_EQ(fold.fold(1, status("T-2", wire::TASK_RUNNING), &answer), FoldAction::kForward);
  // A task the report does not hold changes nothing.
  EXPECT_EQ(fold.fold(1, status("T-9", wire::TASK_RUNNING), &answer), FoldAction::kForward);
  const wire::RegisterAgent* report = fold.report(1);
  ASSERT_NE(report, nullptr);
  ASSERT_EQ(report->executors(0).latest_size(), 2);
  EXPECT_EQ(report->executors(0).latest(0).task_id(), "T-1");
  EXPECT_EQ(report->executors(0).latest(0).state(), wire::TASK_FINISHED);
  EXPECT_EQ(report->executors(0).latest(1).task_id(), "T-2");
  EXPECT_EQ(report->executors(0).latest(1).state(), wire::TASK_RUNNING);
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
  fold.registered(1, registered);  // before any report: nothing to keep
  EXPECT_EQ(fold.report(1), nullptr);
  wire::Envelope answer;
  ASSERT_EQ(fold.fold(1, registration(), &answer), FoldAction::kForward);
  fold.registered(1, registered);
  fold.registered(7, registered);  // a slot not held
  const wire::RegisterAgent* report = fold.report(1);
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->info().id(), "A-1");
  EXPECT_EQ(report->agent_secret(), "s3cret");
  EXPECT_EQ(report->info().hostname(), "h1");
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
