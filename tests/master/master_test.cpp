// The master on a fake clock: offers, launches, updates, timeouts, failover.
#include <gtest/gtest.h>

#include "tests/master/master_fixture.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::MasterTest;
using testing::kAgentPeer;
using testing::kFrameworkPeer;
using testing::kOtherFrameworkPeer;
using testing::tlsPeer;

// An agent's registration with the id a previous master gave it (on a
// node of 4 cpus and 4096 MB), for a test to add what it runs.
wire::Envelope reregistration(const std::string& agentId) {
  wire::Envelope e;
  auto* info = e.mutable_register_agent()->mutable_info();
  info->set_id(agentId);
  info->set_hostname("node");
  Resources::parse("cpus:4;mem:4096")->toWire(info->mutable_resources());
  return e;
}

wire::Envelope heartbeat() {
  wire::Envelope e;
  e.mutable_heartbeat()->set_sequence(1);
  return e;
}

TEST_F(MasterTest, RegisteredFrameworkReceivesTheAgentsResources) {
  std::string agentId = registerAgent();
  registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(offers[0].agent_id(), agentId);
  EXPECT_EQ(*Resources::fromWire(offers[0].resources()), *Resources::parse("cpus:4;mem:4096"));
  EXPECT_EQ(master_->offerCount(), 1u);
}

TEST_F(MasterTest, AcceptSendsTheTaskToTheAgentAndReturnsTheRest) {
  registerAgent();
  registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  accept(kFrameworkPeer, offers[0].offer_id(), {task("t1", "cpus:1;mem:1024")}, 0);
  auto runs = outbox_.take(kAgentPeer, wire::Envelope::kRunTask);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_task().task().task_id(), "t1");
  EXPECT_EQ(master_->taskCount(), 1u);
  master_->allocate();
  offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(*Resources::fromWire(offers[0].resources()), *Resources::parse("cpus:3;mem:3072"));
}

TEST_F(MasterTest, LaunchesThatExceedTheOfferOrNameAnUnknownOneGetTaskError) {
  registerAgent();
  registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  accept(kFrameworkPeer, offers[0].offer_id(),
         {task("big", "cpus:5;mem:10"), task("ok", "cpus:1;mem:10"), task("ok", "cpus:1;mem:10"),
          task("", "cpus:1")});
  auto updates = updatesTo(kFrameworkPeer);
  ASSERT_EQ(updates.size(), 3u);
  for (const auto& u : updates) {
    EXPECT_EQ(u.state(), wire::TASK_ERROR);
    EXPECT_EQ(u.reason(), wire::REASON_INVALID_LAUNCH);
    EXPECT_FALSE(u.message().empty());
  }
  EXPECT_NE(updates[0].message().find("needs"), std::string::npos);
  EXPECT_EQ(outbox_.take(kAgentPeer, wire::Envelope::kRunTask).size(), 1u);

  accept(kFrameworkPeer, offers[0].offer_id(), {task("late", "cpus:1;mem:10")});
  updates = updatesTo(kFrameworkPeer);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].reason(), wire::REASON_INVALID_OFFER);
  EXPECT_EQ(master_->taskCount(), 1u);
}

TEST_F(MasterTest, DeclinedResourcesReturnAfterTheRefusalTime) {
  registerAgent();
  registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  wire::Envelope decline;
  decline.mutable_decline_offers()->add_offer_ids(offers[0].offer_id());
  master_->peerMessage(kFrameworkPeer, decline);
  master_->allocate();
  clock_.advance(4s);
  master_->tick();
  EXPECT_TRUE(offersTo(kFrameworkPeer).empty());
  clock_.advance(1100ms);
  master_->tick();
  master_->allocate();
  EXPECT_EQ(offersTo(kFrameworkPeer).size(), 1u);
}

TEST_F(MasterTest, UnansweredOfferIsRescindedAndReoffered) {
  registerAgent();
  registerFramework();
  master_->allocate();
  ASSERT_EQ(offersTo(kFrameworkPeer).size(), 1u);
  clock_.advance(31s);
  wire::Envelope hb;
  hb.mutable_heartbeat()->set_sequence(1);
  master_->peerMessage(kAgentPeer, hb);
  master_->tick();
  EXPECT_EQ(outbox_.take(kFrameworkPeer, wire::Envelope::kOfferRescinded).size(), 1u);
  master_->allocate();
  EXPECT_EQ(offersTo(kFrameworkPeer).size(), 1u);
}

TEST_F(MasterTest, AnAgentIsNotChargedForSilenceTheMasterHasNotReadYet) {
  registerAgent();
  // The master stopped reading the agent's link (its shard's summaries wait
  // unread) 5 s after the agent was last heard.
  outbox_.heard[kAgentPeer] = clock_.now() + 5s;
  clock_.advance(20s);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 1u);
  // At most one agent timeout of lateness is forgiven.
  clock_.advance(11s);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 0u);
}

// Agents heartbeat only on a quiet link: any message shows the agent lives.
TEST_F(MasterTest, ABusyAgentThatSendsNoHeartbeatIsKeptPastSeveralTimeouts) {
  registerAgent();
  wire::Envelope usage;
  usage.mutable_usage_report();
  for (int i = 0; i < 20; ++i) {  // 100 s: over six agent timeouts (15 s)
    clock_.advance(5s);
    master_->peerMessage(kAgentPeer, usage);
    master_->tick();
  }
  EXPECT_EQ(master_->agentCount(), 1u);
  clock_.advance(16s);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 0u);
}

TEST_F(MasterTest, ATickRemovesABoundedNumberOfSilentAgentsAndTheRestNext) {
  constexpr size_t kAgents = kAgentRemovalsPerTickMax * 2 + 7;
  for (size_t i = 0; i < kAgents; ++i) registerAgent(100 + i);
  ASSERT_EQ(master_->agentCount(), kAgents);
  clock_.advance(16s);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), kAgents - kAgentRemovalsPerTickMax);
  clock_.advance(100ms);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 7u);
  clock_.advance(100ms);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 0u);
}

// Each tick looks at the agents whose deadline passed: one heard since is
// kept, and goes at the first tick more than a timeout after its last
// message.
TEST_F(MasterTest, AnAgentHeardJustBeforeItsDeadlineGoesOneTimeoutAfterItsLastMessage) {
  registerAgent();
  master_->tick();
  clock_.advance(14900ms);
  master_->peerMessage(kAgentPeer, heartbeat());  // its last message
  clock_.advance(200ms);                           // past its registration's deadline
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 1u);
  clock_.advance(14800ms);  // exactly one timeout after its last message
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 1u);
  clock_.advance(100ms);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 0u);
}

// An agent is judged by its latest registration and messages, never by a
// deadline an earlier registration set; reconnecting agents leave one
// silence-watch entry each, however often they come back.
TEST_F(MasterTest, AReregisteredAgentIsNotRemovedByAnEarlierDeadline) {
  std::string id = registerAgent();
  std::string secret = agentSecret_;
  constexpr PeerId kFirstLink = 40;
  constexpr int kReconnects = 30;
  for (int i = 0; i < kReconnects; ++i) {
    clock_.advance(100ms);
    hello(kFirstLink + i, wire::ROLE_AGENT);
    wire::Envelope again = reregistration(id);
    again.mutable_register_agent()->set_agent_secret(secret);
    master_->peerMessage(kFirstLink + i, again);
    ASSERT_EQ(outbox_.take(kFirstLink + i, wire::Envelope::kAgentRegistered).size(), 1u);
  }
  EXPECT_EQ(master_->agents().rechecksQueued(), 1u);
  clock_.advance(12s);  // 15.1 s: past the first registration's deadline
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 1u);
  clock_.advance(3100ms);  // past the latest one's
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 0u);
  EXPECT_EQ(master_->agents().rechecksQueued(), 0u);
  // Registered again after its removal: a new deadline, the old one gone.
  registerAgent(kFirstLink + kReconnects, "cpus:4;mem:4096", id);
  clock_.advance(15s);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 1u);
  clock_.advance(100ms);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 0u);
}

TEST_F(MasterTest, SilentAgentsAmongLiveOnesAllGoOverSuccessiveTicksAndOnlyThey) {
  constexpr size_t kSilent = kAgentRemovalsPerTickMax * 2 + 7;
  constexpr PeerId kLiveFirst = 1000;
  constexpr size_t kLive = 60;
  for (size_t i = 0; i < kSilent; ++i) registerAgent(100 + i);
  for (size_t i = 0; i < kLive; ++i) registerAgent(kLiveFirst + i);
  clock_.advance(10s);
  for (size_t i = 0; i < kLive; ++i) master_->peerMessage(kLiveFirst + i, heartbeat());
  clock_.advance(5100ms);
  for (size_t tick = 0; tick < 3; ++tick) {
    master_->tick();
    size_t removed = std::min(kSilent, (tick + 1) * kAgentRemovalsPerTickMax);
    size_t left = kSilent - removed;
    EXPECT_EQ(master_->agentCount(), kLive + left) << "after tick " << tick;
    clock_.advance(100ms);
  }
  EXPECT_EQ(master_->agentCount(), kLive);
  EXPECT_EQ(master_->agents().rechecksQueued(), kLive);
}

TEST_F(MasterTest, AmongManyAgentsHeardFromOnlyTheSilentOneGoes) {
  constexpr PeerId kFirst = 100;
  constexpr size_t kAgents = 2000;
  constexpr PeerId kSilentPeer = kFirst + kAgents / 2;
  std::string silent;
  for (size_t i = 0; i < kAgents; ++i) {
    std::string id = registerAgent(kFirst + i);
    if (kFirst + i == kSilentPeer) silent = id;
  }
  for (int second = 1; second <= 60; ++second) {
    clock_.advance(1s);
    for (size_t i = 0; second % 5 == 0 && i < kAgents; ++i) {
      if (kFirst + i != kSilentPeer) master_->peerMessage(kFirst + i, heartbeat());
    }
    master_->tick();
    bool gone = second > 15;
    ASSERT_EQ(master_->agentCount(), gone ? kAgents - 1 : kAgents) << "at " << second << " s";
  }
  EXPECT_EQ(master_->agents().find(silent), nullptr);
}

// Forgiven while its link waits unread, then heard once the link is read:
// it goes a timeout after that message, not at the end of the forgiveness.
TEST_F(MasterTest, AForgivenAgentHeardOnceItsLinkIsReadGoesATimeoutAfterThat) {
  registerAgent();
  outbox_.heard[kAgentPeer] = clock_.now() + 5s;
  clock_.advance(20s);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 1u);
  clock_.advance(1s);
  outbox_.heard.erase(kAgentPeer);
  master_->peerMessage(kAgentPeer, heartbeat());  // 21 s
  clock_.advance(10s);  // past the end of its forgiveness (30 s)
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 1u);
  clock_.advance(5s);  // 36 s: one timeout after the message
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 1u);
  clock_.advance(100ms);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 0u);
}

// A tick looks at a bounded number of due agents; the rest wait for the
// next tick, a silent one among them too.
TEST_F(MasterTest, ATickLooksAtABoundedNumberOfDueAgents) {
  constexpr PeerId kFirst = 100;
  constexpr size_t kHeard = kAgentSilenceLooksPerTickMax;
  for (size_t i = 0; i < kHeard; ++i) registerAgent(kFirst + i);
  constexpr PeerId kSilentPeer = kFirst + kHeard;  // due last: registered last
  registerAgent(kSilentPeer);
  clock_.advance(10s);
  for (size_t i = 0; i < kHeard; ++i) master_->peerMessage(kFirst + i, heartbeat());
  clock_.advance(5100ms);  // every one due
  master_->tick();
  EXPECT_EQ(master_->agentCount(), kHeard + 1) << "the silent one was not looked at yet";
  clock_.advance(100ms);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), kHeard);
}

TEST_F(MasterTest, SilentAgentIsRemovedItsTasksLostAndFrameworksTold) {
  std::string agentId = registerAgent();
  registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  accept(kFrameworkPeer, offers[0].offer_id(), {task("t1", "cpus:1;mem:10")});
  clock_.advance(10s);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 1u);
  clock_.advance(6s);
  master_->tick();
  EXPECT_EQ(master_->agentCount(), 0u);
  auto updates = updatesTo(kFrameworkPeer);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].state(), wire::TASK_LOST);
  EXPECT_EQ(updates[0].reason(), wire::REASON_AGENT_LOST);
  auto lost = outbox_.take(kFrameworkPeer, wire::Envelope::kAgentLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].agent_lost().agent_id(), agentId);
  EXPECT_EQ(master_->taskCount(), 0u);
  EXPECT_EQ(master_->dominantShare(updates[0].framework_id()), 0.0);
  EXPECT_EQ(master_->allocator().totalResources().scalarMillis("cpus"), 0);
}

TEST_F(MasterTest, UpdatesReachTheFrameworkAndAcknowledgementsTheAgent) {
  std::string agentId = registerAgent();
  std::string fid = registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  accept(kFrameworkPeer, offers[0].offer_id(), {task("t1", "cpus:4;mem:4096")});
  EXPECT_TRUE(offersTo(kFrameworkPeer).empty());
  wire::TaskStatus s;
  s.set_task_id("t1");
  s.set_framework_id(fid);
  s.set_state(wire::TASK_FINISHED);
  s.set_update_id("u1");
  agentUpdate(s);
  auto updates = updatesTo(kFrameworkPeer);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].agent_id(), agentId);
  wire::Envelope ack;
  ack.mutable_acknowledge()->set_task_id("t1");
  ack.mutable_acknowledge()->set_agent_id(agentId);
  ack.mutable_acknowledge()->set_update_id("u1");
  master_->peerMessage(kFrameworkPeer, ack);
  auto acks = outbox_.take(kAgentPeer, wire::Envelope::kStatusAcknowledgement);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].status_acknowledgement().update_id(), "u1");
  // The finished task's resources are offered again at once.
  EXPECT_TRUE(master_->allocationPending());
  master_->allocate();
  EXPECT_EQ(offersTo(kFrameworkPeer).size(), 1u);
}

TEST_F(MasterTest, KeepsTheLatestUsageAnAgentReports) {
  std::string agentId = registerAgent();
  auto report = [&](uint64_t mem) {
    wire::Envelope e;
    auto* u = e.mutable_usage_report()->add_executors();
    u->set_framework_id("f");
    u->set_executor_id("x");
    u->mutable_usage()->set_mem_bytes(mem);
    master_->peerMessage(kAgentPeer, e);
  };
  report(100);
  report(200);
  auto usage = master_->executorUsage(agentId, "f", "x");
  ASSERT_TRUE(usage.has_value());
  EXPECT_EQ(usage->mem_bytes(), 200u);
  EXPECT_FALSE(master_->executorUsage(agentId, "f", "other").has_value());
}

TEST_F(MasterTest, KillOfAnUnknownTaskAnswersLost) {
  registerAgent();
  registerFramework();
  wire::Envelope kill;
  kill.mutable_kill_task()->set_task_id("nope");
  master_->peerMessage(kFrameworkPeer, kill);
  auto updates = updatesTo(kFrameworkPeer);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].reason(), wire::REASON_UNKNOWN_TASK);
}

TEST_F(MasterTest, DisconnectedFrameworkIsRemovedAfterItsFailoverTimeout) {
  registerAgent();
  std::string fid = registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  accept(kFrameworkPeer, offers[0].offer_id(), {task("t1", "cpus:1;mem:10")});
  master_->peerClosed(kFrameworkPeer);
  clock_.advance(30s);
  master_->peerMessage(kAgentPeer, [] { wire::Envelope e; e.mutable_heartbeat(); return e; }());
  master_->tick();
  EXPECT_EQ(master_->frameworkCount(), 1u);
  clock_.advance(31s);
  master_->peerMessage(kAgentPeer, [] { wire::Envelope e; e.mutable_heartbeat(); return e; }());
  master_->tick();
  EXPECT_EQ(master_->frameworkCount(), 0u);
  auto shutdowns = outbox_.take(kAgentPeer, wire::Envelope::kShutdownFramework);
  ASSERT_EQ(shutdowns.size(), 1u);
  EXPECT_EQ(shutdowns[0].shutdown_framework().framework_id(), fid);
  // Its task's resources went back to the agent: a new framework gets all.
  registerFramework(kOtherFrameworkPeer);
  master_->allocate();
  auto offers2 = offersTo(kOtherFrameworkPeer);
  ASSERT_EQ(offers2.size(), 1u);
  EXPECT_EQ(*Resources::fromWire(offers2[0].resources()), *Resources::parse("cpus:4;mem:4096"));
}

TEST_F(MasterTest, SecondSchedulerTakesOverTheFramework) {
  registerAgent();
  std::string fid = registerFramework();
  EXPECT_EQ(registerFramework(kOtherFrameworkPeer, fid, frameworkSecret_), fid);
  EXPECT_EQ(outbox_.closed.count(kFrameworkPeer), 1u);
  master_->allocate();
  EXPECT_EQ(offersTo(kOtherFrameworkPeer).size(), 1u);
}

// Soft state: a fresh master learns the running task from the agent's
// re-registration and the framework from its scheduler's.
TEST_F(MasterTest, NewMasterRebuildsStateFromReregistrations) {
  master_ = makeMaster("m2");
  hello(kAgentPeer, wire::ROLE_AGENT);
  wire::Envelope e = reregistration("m1-A1");
  auto* reg = e.mutable_register_agent();
  auto* fw = reg->add_frameworks();
  fw->set_id("m1-F2");
  fw->set_name("test");
  auto* ex = reg->add_executors();
  ex->mutable_info()->set_framework_id("m1-F2");
  ex->mutable_info()->set_executor_id("t1");
  *ex->add_tasks() = task("t1", "cpus:1;mem:1024");
  auto* latest = ex->add_latest();
  latest->set_task_id("t1");
  latest->set_state(wire::TASK_RUNNING);
  master_->peerMessage(kAgentPeer, e);
  EXPECT_EQ(master_->taskCount(), 1u);
  EXPECT_EQ(registerFramework(kFrameworkPeer, "m1-F2"), "m1-F2");
  EXPECT_NEAR(*master_->dominantShare("m1-F2"), 0.25, 1e-9);
  // The agent re-registers again (new connection, with the secret it was
  // given): nothing is counted twice.
  auto registered = outbox_.take(kAgentPeer, wire::Envelope::kAgentRegistered);
  ASSERT_EQ(registered.size(), 1u);
  reg->set_agent_secret(registered[0].agent_registered().agent_secret());
  hello(kOtherFrameworkPeer + 10, wire::ROLE_AGENT);
  master_->peerMessage(kOtherFrameworkPeer + 10, e);
  EXPECT_EQ(master_->taskCount(), 1u);
  EXPECT_NEAR(*master_->dominantShare("m1-F2"), 0.25, 1e-9);
  wire::Envelope rec;
  rec.mutable_reconcile();
  master_->peerMessage(kFrameworkPeer, rec);
  auto updates = updatesTo(kFrameworkPeer);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].state(), wire::TASK_RUNNING);
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(*Resources::fromWire(offers[0].resources()), *Resources::parse("cpus:3;mem:3072"));
}

// An agent holding only an executor of a framework (its tasks ended) hears
// of the framework's removal too: that agent ran none of its known tasks.
TEST_F(MasterTest, AnAgentWithOnlyAnExecutorOfARemovedFrameworkIsTold) {
  master_ = makeMaster("m2");
  hello(kAgentPeer, wire::ROLE_AGENT);
  wire::Envelope e = reregistration("m1-A1");
  auto* reg = e.mutable_register_agent();
  auto* ex = reg->add_executors();
  ex->mutable_info()->set_framework_id("m1-F3");
  ex->mutable_info()->set_executor_id("e1");
  ex->add_tasks()->set_task_id("t1");
  auto* latest = ex->add_latest();
  latest->set_task_id("t1");
  latest->set_state(wire::TASK_FINISHED);
  master_->peerMessage(kAgentPeer, e);
  EXPECT_EQ(master_->taskCount(), 0u);
  EXPECT_EQ(registerFramework(kFrameworkPeer, "m1-F3"), "m1-F3");
  wire::Envelope bye;
  bye.mutable_unregister_framework()->set_framework_id("m1-F3");
  master_->peerMessage(kFrameworkPeer, bye);
  EXPECT_EQ(master_->frameworkCount(), 0u);
  auto shutdowns = outbox_.take(kAgentPeer, wire::Envelope::kShutdownFramework);
  ASSERT_EQ(shutdowns.size(), 1u);
  EXPECT_EQ(shutdowns[0].shutdown_framework().framework_id(), "m1-F3");
}

// After a failover the agent reaches the new leader before the scheduler:
// its terminal update must wait for the framework, never be acknowledged
// for it.
TEST_F(MasterTest, NewMasterKeepsAnUnknownFrameworksUpdateUntilItReregisters) {
  master_ = makeMaster("m2");
  registerAgent(kAgentPeer, "cpus:4;mem:4096", "m1-A1");
  wire::TaskStatus s;
  s.set_task_id("t1");
  s.set_framework_id("m1-F9");
  s.set_state(wire::TASK_FINISHED);
  s.set_update_id("u1");
  agentUpdate(s);
  EXPECT_TRUE(outbox_.take(kAgentPeer, wire::Envelope::kStatusAcknowledgement).empty());
  EXPECT_TRUE(outbox_.take(kAgentPeer, wire::Envelope::kShutdownFramework).empty());
  EXPECT_EQ(registerFramework(kFrameworkPeer, "m1-F9"), "m1-F9");
  auto updates = updatesTo(kFrameworkPeer);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].update_id(), "u1");
  wire::Envelope ack;
  ack.mutable_acknowledge()->set_task_id("t1");
  ack.mutable_acknowledge()->set_agent_id("m1-A1");
  ack.mutable_acknowledge()->set_update_id("u1");
  master_->peerMessage(kFrameworkPeer, ack);
  EXPECT_EQ(outbox_.take(kAgentPeer, wire::Envelope::kStatusAcknowledgement).size(), 1u);
}

TEST_F(MasterTest, UpdateOfAFrameworkThisMasterRemovedIsAcknowledgedForIt) {
  registerAgent();
  std::string fid = registerFramework();
  wire::Envelope bye;
  bye.mutable_unregister_framework();
  master_->peerMessage(kFrameworkPeer, bye);
  ASSERT_EQ(master_->frameworkCount(), 0u);
  outbox_.take(kAgentPeer, wire::Envelope::kShutdownFramework);
  wire::TaskStatus s;
  s.set_task_id("t1");
  s.set_framework_id(fid);
  s.set_state(wire::TASK_KILLED);
  s.set_update_id("u2");
  agentUpdate(s);
  EXPECT_EQ(outbox_.take(kAgentPeer, wire::Envelope::kStatusAcknowledgement).size(), 1u);
  EXPECT_EQ(master_->frameworkCount(), 0u);
}

TEST_F(MasterTest, ASecondFrameworkIdOnOneConnectionDisconnectsTheFirst) {
  registerAgent();
  std::string first = registerFramework();
  wire::Envelope e;
  e.mutable_register_framework()->mutable_info()->set_name("again");
  master_->peerMessage(kFrameworkPeer, e);
  ASSERT_EQ(master_->frameworkCount(), 2u);
  master_->peerClosed(kFrameworkPeer);
  clock_.advance(61s);
  master_->peerMessage(kAgentPeer, [] { wire::Envelope h; h.mutable_heartbeat(); return h; }());
  master_->tick();
  EXPECT_EQ(master_->frameworkCount(), 0u) << "a framework kept a connection that was gone";
}

TEST_F(MasterTest, MessagesBeforeRegistrationGetAnError) {
  hello(kFrameworkPeer, wire::ROLE_SCHEDULER);
  wire::Envelope e;
  e.mutable_decline_offers()->add_offer_ids("x");
  master_->peerMessage(kFrameworkPeer, e);
  EXPECT_EQ(outbox_.take(kFrameworkPeer, wire::Envelope::kError).size(), 1u);
  EXPECT_EQ(master_->frameworkCount(), 0u);
}

TEST_F(MasterTest, MalformedAgentResourcesAreRefused) {
  hello(kAgentPeer, wire::ROLE_AGENT);
  wire::Envelope e;
  auto* r = e.mutable_register_agent()->mutable_info()->add_resources();
  r->set_name("cpus");
  r->set_scalar(-3);
  master_->peerMessage(kAgentPeer, e);
  EXPECT_EQ(master_->agentCount(), 0u);
  EXPECT_EQ(outbox_.closed.count(kAgentPeer), 1u);
}

}  // namespace
}  // namespace allot
