// The master on a fake clock against hostile peers: ids and secrets,
// takeovers, principals, ACLs, input limits.
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

// ---------------------------------------------------------------- accepts and limits

TEST_F(MasterTest, AnOfferNamedTwiceLaunchesNothingAndIsReleasedAtOnce) {
  registerAgent(kAgentPeer, "cpus:4;mem:4096");
  registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  wire::Envelope e;
  e.mutable_accept_offers()->add_offer_ids(offers[0].offer_id());
  e.mutable_accept_offers()->add_offer_ids(offers[0].offer_id());
  *e.mutable_accept_offers()->add_tasks() = task("a", "cpus:4;mem:100");
  *e.mutable_accept_offers()->add_tasks() = task("b", "cpus:4;mem:100");  // the offer twice over
  master_->peerMessage(kFrameworkPeer, e);
  auto updates = updatesTo(kFrameworkPeer);
  ASSERT_EQ(updates.size(), 2u);
  for (const auto& u : updates) {
    EXPECT_EQ(u.state(), wire::TASK_ERROR);
    EXPECT_EQ(u.reason(), wire::REASON_INVALID_OFFER);
    EXPECT_NE(u.message().find("named more than once"), std::string::npos) << u.message();
  }
  EXPECT_TRUE(outbox_.take(kAgentPeer, wire::Envelope::kRunTask).empty());
  EXPECT_EQ(master_->taskCount(), 0u);
  EXPECT_EQ(master_->offerCount(), 0u);
  master_->allocate();  // released, not held until --offer-timeout
  EXPECT_EQ(offersTo(kFrameworkPeer).size(), 1u);
}

TEST_F(MasterTest, AnAcceptRefusedForALimitReleasesItsOffersAndAnswersEachTask) {
  registerAgent();
  registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  wire::Envelope e;
  e.mutable_accept_offers()->add_offer_ids(offers[0].offer_id());
  for (size_t i = 0; i <= limits::kTasksPerAcceptMax; ++i) {
    *e.mutable_accept_offers()->add_tasks() = task("t" + std::to_string(i), "cpus:0.001;mem:1");
  }
  master_->peerMessage(kFrameworkPeer, e);
  EXPECT_EQ(outbox_.take(kFrameworkPeer, wire::Envelope::kError).size(), 1u);
  auto updates = updatesTo(kFrameworkPeer);
  ASSERT_EQ(updates.size(), limits::kTasksPerAcceptMax);  // those within the limit
  EXPECT_EQ(updates[0].state(), wire::TASK_ERROR);
  EXPECT_NE(updates[0].message().find("AcceptOffers.tasks"), std::string::npos) << updates[0].message();
  EXPECT_EQ(master_->offerCount(), 0u);
  master_->allocate();
  EXPECT_EQ(offersTo(kFrameworkPeer).size(), 1u);
}

TEST_F(MasterTest, APrincipalHoldsNoMoreFrameworksAndAgentsThanItsRuleAllows) {
  MasterOptions options;
  options.masterId = "m";
  options.minOffer = *Resources::parse("cpus:0.01;mem:32");
  options.acls = *Acls::parse("register_framework alice frameworks_max=2\nregister_framework *\n"
                              "register_agent rack agents_max=1\n", "acls");
  master_ = std::move(*Master::create(options, clock_, outbox_));
  auto tryRegister = [&](PeerId peer, const std::string& principal, const std::string& id = "") {
    hello(peer, wire::ROLE_SCHEDULER, tlsPeer(principal));
    wire::Envelope e;
    e.mutable_register_framework()->mutable_info()->set_id(id);
    master_->peerMessage(peer, e);
    auto replies = outbox_.take(peer, wire::Envelope::kFrameworkRegistered);
    return replies.empty() ? std::string() : replies[0].framework_registered().framework_id();
  };
  std::string first = tryRegister(90, "alice");
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(tryRegister(91, "alice").empty());
  EXPECT_TRUE(tryRegister(92, "alice").empty());
  auto errors = outbox_.take(92, wire::Envelope::kError);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].error().message().find("principal 'alice' holds 2 frameworks already (frameworks_max=2)"),
            std::string::npos)
      << errors[0].error().message();
  EXPECT_EQ(outbox_.closed.count(92), 1u);
  EXPECT_FALSE(tryRegister(93, "bob").empty());        // other principals are not affected
  EXPECT_EQ(tryRegister(94, "alice", first), first);  // an id it holds: always
  // A removed framework makes room.
  wire::Envelope unregister;
  unregister.mutable_unregister_framework();
  master_->peerMessage(94, unregister);
  EXPECT_FALSE(tryRegister(95, "alice").empty());

  wire::Envelope agent;
  Resources::parse("cpus:1;mem:64")->toWire(agent.mutable_register_agent()->mutable_info()->mutable_resources());
  hello(96, wire::ROLE_AGENT, tlsPeer("rack"));
  master_->peerMessage(96, agent);
  ASSERT_EQ(outbox_.take(96, wire::Envelope::kAgentRegistered).size(), 1u);
  hello(97, wire::ROLE_AGENT, tlsPeer("rack"));
  master_->peerMessage(97, agent);
  EXPECT_TRUE(outbox_.take(97, wire::Envelope::kAgentRegistered).empty());
  EXPECT_EQ(outbox_.closed.count(97), 1u);
  EXPECT_EQ(master_->agentCount(), 1u);
}

}  // namespace
}  // namespace allot
