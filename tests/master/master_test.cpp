#include <gtest/gtest.h>

#include <map>

#include "base/clock.h"
#include "master/master.h"

namespace allot {
namespace {

using namespace std::chrono_literals;

class RecordingOutbox final : public Outbox {
 public:
  void send(PeerId peer, const wire::Envelope& e) override { sent[peer].push_back(e); }
  void close(PeerId peer, const std::string& reason) override { closed[peer] = reason; }

  // Takes every message of one kind sent to `peer` so far.
  std::vector<wire::Envelope> take(PeerId peer, wire::Envelope::BodyCase kind) {
    std::vector<wire::Envelope> out, rest;
    for (auto& e : sent[peer]) (e.body_case() == kind ? out : rest).push_back(e);
    sent[peer] = rest;
    return out;
  }

  std::map<PeerId, std::vector<wire::Envelope>> sent;
  std::map<PeerId, std::string> closed;
};

constexpr PeerId kAgentPeer = 1;
constexpr PeerId kFrameworkPeer = 2;
constexpr PeerId kOtherFrameworkPeer = 3;

PeerIdentity tlsPeer(const std::string& principal) {
  PeerIdentity id;
  id.tls = true;
  id.principal = principal;
  return id;
}

class MasterTest : public ::testing::Test {
 protected:
  void SetUp() override { master_ = makeMaster("m1"); }

  std::unique_ptr<Master> makeMaster(const std::string& id) {
    MasterOptions options;
    options.masterId = id;
    options.offerTimeout = 30s;
    options.agentTimeout = 15s;
    options.refuseDefault = 5s;
    options.failoverTimeoutDefault = 60s;
    options.minOffer = *Resources::parse("cpus:0.01;mem:32");
    auto m = Master::create(options, clock_, outbox_);
    EXPECT_TRUE(m.ok());
    return std::move(*m);
  }

  void hello(PeerId peer, wire::Role role, const PeerIdentity& auth = {}) {
    wire::Hello h;
    h.set_role(role);
    master_->peerConnected(peer, h, auth);
  }

  std::string registerAgent(PeerId peer = kAgentPeer, const char* resources = "cpus:4;mem:4096",
                            const std::string& id = "") {
    hello(peer, wire::ROLE_AGENT);
    wire::Envelope e;
    e.mutable_register_agent()->mutable_info()->set_hostname("node");
    e.mutable_register_agent()->mutable_info()->set_id(id);
    Resources::parse(resources)->toWire(e.mutable_register_agent()->mutable_info()->mutable_resources());
    master_->peerMessage(peer, e);
    auto replies = outbox_.take(peer, wire::Envelope::kAgentRegistered);
    EXPECT_EQ(replies.size(), 1u);
    if (!replies.empty()) agentSecret_ = replies[0].agent_registered().agent_secret();
    return replies.empty() ? "" : replies[0].agent_registered().agent_id();
  }

  std::string registerFramework(PeerId peer = kFrameworkPeer, const std::string& id = "",
                                const std::string& secret = "") {
    hello(peer, wire::ROLE_SCHEDULER);
    wire::Envelope e;
    e.mutable_register_framework()->mutable_info()->set_name("test");
    e.mutable_register_framework()->mutable_info()->set_id(id);
    e.mutable_register_framework()->set_needs_offers(true);
    e.mutable_register_framework()->set_framework_secret(secret);
    master_->peerMessage(peer, e);
    auto replies = outbox_.take(peer, wire::Envelope::kFrameworkRegistered);
    EXPECT_EQ(replies.size(), 1u);
    if (!replies.empty()) frameworkSecret_ = replies[0].framework_registered().framework_secret();
    return replies.empty() ? "" : replies[0].framework_registered().framework_id();
  }

  std::vector<wire::Offer> offersTo(PeerId peer) {
    std::vector<wire::Offer> offers;
    for (auto& e : outbox_.take(peer, wire::Envelope::kResourceOffers)) {
      for (auto& o : e.resource_offers().offers()) offers.push_back(o);
    }
    return offers;
  }

  std::vector<wire::TaskStatus> updatesTo(PeerId peer) {
    std::vector<wire::TaskStatus> out;
    for (auto& e : outbox_.take(peer, wire::Envelope::kStatusUpdate)) out.push_back(e.status_update().status());
    return out;
  }

  wire::TaskInfo task(const std::string& id, const char* resources) {
    wire::TaskInfo t;
    t.set_task_id(id);
    t.mutable_command()->set_shell("true");
    Resources::parse(resources)->toWire(t.mutable_resources());
    return t;
  }

  void accept(PeerId peer, const std::string& offerId, std::vector<wire::TaskInfo> tasks,
              std::optional<double> refuse = std::nullopt) {
    wire::Envelope e;
    e.mutable_accept_offers()->add_offer_ids(offerId);
    for (auto& t : tasks) *e.mutable_accept_offers()->add_tasks() = t;
    if (refuse) e.mutable_accept_offers()->mutable_filters()->set_refuse_seconds(*refuse);
    master_->peerMessage(peer, e);
  }

  void agentUpdate(const wire::TaskStatus& status) {
    wire::Envelope e;
    *e.mutable_status_update()->mutable_status() = status;
    master_->peerMessage(kAgentPeer, e);
  }

  FakeClock clock_;
  RecordingOutbox outbox_;
  std::unique_ptr<Master> master_;
  std::string frameworkSecret_;  // from the latest FrameworkRegistered
  std::string agentSecret_;      // from the latest AgentRegistered
};

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
  wire::Envelope e;
  auto* reg = e.mutable_register_agent();
  reg->mutable_info()->set_id("m1-A1");
  reg->mutable_info()->set_hostname("node");
  Resources::parse("cpus:4;mem:4096")->toWire(reg->mutable_info()->mutable_resources());
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

// ------------------------------------------------------------------ trust

TEST_F(MasterTest, IdsAndSecretsAre128RandomBits) {
  std::string a = registerFramework(kFrameworkPeer);
  std::string secretA = frameworkSecret_;
  std::string b = registerFramework(kOtherFrameworkPeer);
  ASSERT_EQ(a.size(), 34u);  // "F-" + 32 hex digits
  EXPECT_EQ(a.substr(0, 2), "F-");
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef", 2), std::string::npos);
  EXPECT_NE(a, b);
  EXPECT_EQ(secretA.size(), 32u);
  EXPECT_NE(secretA, frameworkSecret_);
  EXPECT_EQ(a.find(master_->masterId()), std::string::npos);
}

TEST_F(MasterTest, FrameworkTakeoverWithoutTheSecretIsRefused) {
  std::string fid = registerFramework();
  hello(kOtherFrameworkPeer, wire::ROLE_SCHEDULER);
  wire::Envelope e;
  e.mutable_register_framework()->mutable_info()->set_id(fid);
  e.mutable_register_framework()->set_framework_secret("guess");
  master_->peerMessage(kOtherFrameworkPeer, e);
  EXPECT_TRUE(outbox_.take(kOtherFrameworkPeer, wire::Envelope::kFrameworkRegistered).empty());
  auto errors = outbox_.take(kOtherFrameworkPeer, wire::Envelope::kError);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].error().message().find("framework_secret does not match"), std::string::npos);
  EXPECT_TRUE(errors[0].error().fatal());
  EXPECT_EQ(outbox_.closed.count(kFrameworkPeer), 0u);  // the owner keeps its link
}

TEST_F(MasterTest, FrameworkTakeoverOverTlsNeedsTheSamePrincipal) {
  hello(kFrameworkPeer, wire::ROLE_SCHEDULER, tlsPeer("alice"));
  wire::Envelope e;
  e.mutable_register_framework()->mutable_info()->set_name("a");
  master_->peerMessage(kFrameworkPeer, e);
  auto replies = outbox_.take(kFrameworkPeer, wire::Envelope::kFrameworkRegistered);
  ASSERT_EQ(replies.size(), 1u);
  std::string fid = replies[0].framework_registered().framework_id();
  std::string secret = replies[0].framework_registered().framework_secret();

  e.mutable_register_framework()->mutable_info()->set_id(fid);
  e.mutable_register_framework()->set_framework_secret(secret);  // a secret does not help
  hello(kOtherFrameworkPeer, wire::ROLE_SCHEDULER, tlsPeer("mallory"));
  master_->peerMessage(kOtherFrameworkPeer, e);
  EXPECT_TRUE(outbox_.take(kOtherFrameworkPeer, wire::Envelope::kFrameworkRegistered).empty());
  EXPECT_EQ(outbox_.closed.count(kOtherFrameworkPeer), 1u);

  hello(kOtherFrameworkPeer + 1, wire::ROLE_SCHEDULER, tlsPeer("alice"));
  master_->peerMessage(kOtherFrameworkPeer + 1, e);
  EXPECT_EQ(outbox_.take(kOtherFrameworkPeer + 1, wire::Envelope::kFrameworkRegistered).size(), 1u);
}

TEST_F(MasterTest, AgentReregistrationNeedsItsSecret) {
  std::string id = registerAgent();
  std::string secret = agentSecret_;
  ASSERT_EQ(secret.size(), 32u);
  hello(50, wire::ROLE_AGENT);
  wire::Envelope e;
  e.mutable_register_agent()->mutable_info()->set_id(id);
  Resources::parse("cpus:64;mem:65536")->toWire(e.mutable_register_agent()->mutable_info()->mutable_resources());
  master_->peerMessage(50, e);
  EXPECT_TRUE(outbox_.take(50, wire::Envelope::kAgentRegistered).empty());
  EXPECT_EQ(outbox_.closed.count(50), 1u);
  EXPECT_EQ(outbox_.closed.count(kAgentPeer), 0u);
  e.mutable_register_agent()->set_agent_secret(secret);
  hello(51, wire::ROLE_AGENT);
  master_->peerMessage(51, e);
  EXPECT_EQ(outbox_.take(51, wire::Envelope::kAgentRegistered).size(), 1u);
}

TEST_F(MasterTest, AgentMayReportOnlyTasksPlacedOnIt) {
  registerAgent(kAgentPeer);
  hello(60, wire::ROLE_AGENT);
  wire::Envelope reg;
  reg.mutable_register_agent()->mutable_info()->set_hostname("other");
  Resources::parse("cpus:1;mem:64")->toWire(reg.mutable_register_agent()->mutable_info()->mutable_resources());
  master_->peerMessage(60, reg);
  std::string fid = registerFramework();
  master_->allocate();
  std::string offerId;
  for (const auto& o : offersTo(kFrameworkPeer)) {
    if (o.hostname() == "node") offerId = o.offer_id();
  }
  ASSERT_FALSE(offerId.empty());
  accept(kFrameworkPeer, offerId, {task("t1", "cpus:1;mem:10")});
  ASSERT_EQ(master_->taskCount(), 1u);

  wire::Envelope forged;
  auto* s = forged.mutable_status_update()->mutable_status();
  s->set_framework_id(fid);
  s->set_task_id("t1");
  s->set_state(wire::TASK_FINISHED);
  s->set_update_id("u1");
  master_->peerMessage(60, forged);
  EXPECT_TRUE(updatesTo(kFrameworkPeer).empty());
  EXPECT_EQ(master_->taskCount(), 1u);
  EXPECT_EQ(outbox_.take(60, wire::Envelope::kError).size(), 1u);

  // The real agent's update passes, and so does its resend after the end.
  agentUpdate(*s);
  agentUpdate(*s);
  EXPECT_EQ(updatesTo(kFrameworkPeer).size(), 2u);
  EXPECT_EQ(master_->taskCount(), 0u);
}

TEST_F(MasterTest, AgentReregistrationDoesNotRewriteFrameworkSettings) {
  std::string agentId = registerAgent();
  std::string secret = agentSecret_;
  std::string fid = registerFramework();
  wire::Envelope e;
  auto* reg = e.mutable_register_agent();
  reg->mutable_info()->set_id(agentId);
  reg->set_agent_secret(secret);
  Resources::parse("cpus:4;mem:4096")->toWire(reg->mutable_info()->mutable_resources());
  auto* fw = reg->add_frameworks();
  fw->set_id(fid);
  fw->set_user("root");
  fw->set_weight(1000);
  master_->peerMessage(kAgentPeer, e);
  ASSERT_EQ(outbox_.take(kAgentPeer, wire::Envelope::kAgentRegistered).size(), 1u);
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_FALSE(offers.empty());
  accept(kFrameworkPeer, offers.back().offer_id(), {task("t1", "cpus:1;mem:10")});
  auto runs = outbox_.take(kAgentPeer, wire::Envelope::kRunTask);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_task().framework().user(), "");
  EXPECT_EQ(runs[0].run_task().framework().weight(), 0);
  EXPECT_EQ(runs[0].run_task().framework().name(), "test");
}

TEST_F(MasterTest, FrameworkCannotKillOrAcknowledgeAnotherFrameworksTask) {
  registerAgent();
  std::string owner = registerFramework(kFrameworkPeer);
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  accept(kFrameworkPeer, offers[0].offer_id(), {task("t1", "cpus:1;mem:10")});
  outbox_.take(kAgentPeer, wire::Envelope::kRunTask);
  registerFramework(kOtherFrameworkPeer);

  wire::Envelope kill;
  kill.mutable_kill_task()->set_framework_id(owner);
  kill.mutable_kill_task()->set_task_id("t1");
  master_->peerMessage(kOtherFrameworkPeer, kill);
  kill.mutable_kill_task()->clear_framework_id();  // its own namespace: unknown
  master_->peerMessage(kOtherFrameworkPeer, kill);
  EXPECT_TRUE(outbox_.take(kAgentPeer, wire::Envelope::kKillTask).empty());

  wire::Envelope ack;
  ack.mutable_acknowledge()->set_task_id("t1");
  ack.mutable_acknowledge()->set_update_id("u1");
  master_->peerMessage(kOtherFrameworkPeer, ack);
  ack.mutable_acknowledge()->set_framework_id(owner);
  master_->peerMessage(kOtherFrameworkPeer, ack);
  EXPECT_TRUE(outbox_.take(kAgentPeer, wire::Envelope::kStatusAcknowledgement).empty());

  updatesTo(kOtherFrameworkPeer);  // the kill's TASK_LOST for its own (unknown) t1
  wire::Envelope rec;
  rec.mutable_reconcile()->add_tasks()->set_task_id("t1");
  master_->peerMessage(kOtherFrameworkPeer, rec);
  auto answers = updatesTo(kOtherFrameworkPeer);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].state(), wire::TASK_LOST);  // nothing about the other's task leaks
}

TEST_F(MasterTest, OperatorPrincipalMayKillAnotherFrameworksTask) {
  MasterOptions options;
  options.masterId = "m";
  options.minOffer = *Resources::parse("cpus:0.01;mem:32");
  options.acls = *Acls::parse("register_framework *\nregister_agent *\noperate admin\n", "acls");
  master_ = std::move(*Master::create(options, clock_, outbox_));
  registerAgent();
  std::string owner = registerFramework(kFrameworkPeer);
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  accept(kFrameworkPeer, offers[0].offer_id(), {task("t1", "cpus:1;mem:10")});
  hello(70, wire::ROLE_SCHEDULER, tlsPeer("admin"));
  wire::Envelope reg;
  reg.mutable_register_framework()->mutable_info()->set_name("ops");
  master_->peerMessage(70, reg);
  wire::Envelope kill;
  kill.mutable_kill_task()->set_framework_id(owner);
  kill.mutable_kill_task()->set_task_id("t1");
  master_->peerMessage(70, kill);
  EXPECT_EQ(outbox_.take(kAgentPeer, wire::Envelope::kKillTask).size(), 1u);
  EXPECT_TRUE(master_->mayOperate("admin"));
  EXPECT_FALSE(master_->mayOperate(""));
}

TEST_F(MasterTest, AclsDecideWhoRegistersAndAsWhichUser) {
  MasterOptions options;
  options.masterId = "m";
  options.minOffer = *Resources::parse("cpus:0.01;mem:32");
  options.acls = *Acls::parse("register_framework alice users=bob roles=batch weight_max=2\n"
                              "register_agent node-agent\n", "acls");
  master_ = std::move(*Master::create(options, clock_, outbox_));
  auto tryRegister = [&](PeerId peer, const std::string& principal, const std::string& user,
                         const std::string& role, double weight) {
    hello(peer, wire::ROLE_SCHEDULER, tlsPeer(principal));
    wire::Envelope e;
    e.mutable_register_framework()->mutable_info()->set_user(user);
    e.mutable_register_framework()->mutable_info()->set_role(role);
    e.mutable_register_framework()->mutable_info()->set_weight(weight);
    e.mutable_register_framework()->set_needs_offers(true);
    master_->peerMessage(peer, e);
    return outbox_.take(peer, wire::Envelope::kFrameworkRegistered).size() == 1;
  };
  EXPECT_FALSE(tryRegister(80, "mallory", "", "", 1));
  EXPECT_FALSE(tryRegister(81, "alice", "root", "", 1));
  EXPECT_FALSE(tryRegister(82, "alice", "", "prod", 1));
  EXPECT_FALSE(tryRegister(83, "alice", "", "", 5));
  EXPECT_TRUE(tryRegister(kFrameworkPeer, "alice", "bob", "batch", 2));

  hello(84, wire::ROLE_AGENT, tlsPeer("mallory"));
  wire::Envelope agent;
  Resources::parse("cpus:4;mem:4096")->toWire(agent.mutable_register_agent()->mutable_info()->mutable_resources());
  master_->peerMessage(84, agent);
  EXPECT_EQ(outbox_.closed.count(84), 1u);
  hello(kAgentPeer, wire::ROLE_AGENT, tlsPeer("node-agent"));
  master_->peerMessage(kAgentPeer, agent);
  ASSERT_EQ(outbox_.take(kAgentPeer, wire::Envelope::kAgentRegistered).size(), 1u);

  // A task asking for another user ends NOT_AUTHORIZED; the framework's
  // own user is what the agent is told to run the other one as.
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  wire::TaskInfo asEve = task("t-eve", "cpus:1;mem:10");
  asEve.mutable_command()->set_user("eve");
  accept(kFrameworkPeer, offers[0].offer_id(), {asEve, task("t-bob", "cpus:1;mem:10")});
  auto updates = updatesTo(kFrameworkPeer);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].task_id(), "t-eve");
  EXPECT_EQ(updates[0].state(), wire::TASK_ERROR);
  EXPECT_EQ(updates[0].reason(), wire::REASON_NOT_AUTHORIZED);
  auto runs = outbox_.take(kAgentPeer, wire::Envelope::kRunTask);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_task().task().command().user(), "bob");
}

TEST_F(MasterTest, WithoutAclsTasksMayNotRunAsRoot) {
  registerAgent();
  registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  wire::TaskInfo asRoot = task("t1", "cpus:1;mem:10");
  asRoot.mutable_command()->set_user("root");
  wire::TaskInfo asNobody = task("t2", "cpus:1;mem:10");
  asNobody.mutable_command()->set_user("nobody");
  accept(kFrameworkPeer, offers[0].offer_id(), {asRoot, asNobody});
  auto updates = updatesTo(kFrameworkPeer);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].reason(), wire::REASON_NOT_AUTHORIZED);
  EXPECT_EQ(master_->taskCount(), 1u);
}

TEST_F(MasterTest, RunTaskAllowsRootOnlyWhenTheAclNamesRoot) {
  MasterOptions options;
  options.masterId = "m";
  options.minOffer = *Resources::parse("cpus:0.01;mem:32");
  options.acls = *Acls::parse("register_framework ops users=*,root\n"
                              "register_framework dev users=*\n"
                              "register_agent *\n", "acls");
  master_ = std::move(*Master::create(options, clock_, outbox_));
  hello(kAgentPeer, wire::ROLE_AGENT);
  wire::Envelope agent;
  Resources::parse("cpus:4;mem:4096")->toWire(agent.mutable_register_agent()->mutable_info()->mutable_resources());
  master_->peerMessage(kAgentPeer, agent);
  ASSERT_EQ(outbox_.take(kAgentPeer, wire::Envelope::kAgentRegistered).size(), 1u);
  auto launchAs = [&](PeerId peer, const std::string& principal, const std::string& user) {
    hello(peer, wire::ROLE_SCHEDULER, tlsPeer(principal));
    wire::Envelope reg;
    reg.mutable_register_framework()->set_needs_offers(true);
    master_->peerMessage(peer, reg);
    EXPECT_EQ(outbox_.take(peer, wire::Envelope::kFrameworkRegistered).size(), 1u);
    master_->allocate();
    auto offers = offersTo(peer);
    EXPECT_EQ(offers.size(), 1u);
    if (offers.empty()) return std::vector<wire::Envelope>{};
    wire::TaskInfo t = task("t-" + principal + "-" + user, "cpus:1;mem:10");
    t.mutable_command()->set_user(user);
    accept(peer, offers[0].offer_id(), {t}, 0);
    wire::Envelope quiet;  // the next framework gets the next offer
    quiet.mutable_set_needs_offers()->set_needs_offers(false);
    master_->peerMessage(peer, quiet);
    return outbox_.take(kAgentPeer, wire::Envelope::kRunTask);
  };
  auto runs = launchAs(70, "ops", "root");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_task().task().command().user(), "root");
  EXPECT_TRUE(runs[0].run_task().allow_root());
  // The same framework's tasks as another user or as the agent's default
  // user do not carry the permission.
  runs = launchAs(71, "ops", "alice");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].run_task().allow_root()) << "ops may run as root: a name that is uid 0 on the agent runs";
  runs = launchAs(72, "ops", "");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_FALSE(runs[0].run_task().allow_root());
  // dev's ACL does not name root: refused at the master, and its other
  // tasks never carry allow_root (an alias of uid 0 is refused by the agent).
  EXPECT_TRUE(launchAs(73, "dev", "root").empty());
  auto updates = updatesTo(73);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].state(), wire::TASK_ERROR);
  EXPECT_EQ(updates[0].reason(), wire::REASON_NOT_AUTHORIZED);
  runs = launchAs(74, "dev", "toor");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_FALSE(runs[0].run_task().allow_root());
}

TEST_F(MasterTest, PeerThatNeverRegistersIsClosed) {
  hello(90, wire::ROLE_SCHEDULER);
  registerFramework(kFrameworkPeer);
  clock_.advance(29s);
  master_->tick();
  EXPECT_EQ(outbox_.closed.count(90), 0u);
  clock_.advance(2s);
  master_->tick();
  EXPECT_EQ(outbox_.closed.count(90), 1u);
  EXPECT_EQ(outbox_.closed.count(kFrameworkPeer), 0u);
}

TEST_F(MasterTest, OversizedFieldsAreRefusedWithTheFieldsName) {
  registerAgent();
  registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  wire::Envelope e;
  e.mutable_accept_offers()->add_offer_ids(offers[0].offer_id());
  wire::TaskInfo t = task("t1", "cpus:1;mem:10");
  for (int i = 0; i < 1025; ++i) t.mutable_command()->add_argv("x");
  *e.mutable_accept_offers()->add_tasks() = t;
  master_->peerMessage(kFrameworkPeer, e);
  auto errors = outbox_.take(kFrameworkPeer, wire::Envelope::kError);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].error().message().find("AcceptOffers.tasks[0].command.argv: 1025 entries (limit 1024)"),
            std::string::npos)
      << errors[0].error().message();
  EXPECT_FALSE(errors[0].error().fatal());
  EXPECT_EQ(master_->taskCount(), 0u);
}

}  // namespace
}  // namespace allot
