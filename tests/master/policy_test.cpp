// Roles and quota, guarantees, filtered-as-declined accounting,
// revocation planning and the master's revocation and long-task cap, all on
// a fake clock.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "base/clock.h"
#include "master/allocator/allocator.h"
#include "master/allocator/revocation.h"
#include "master/master.h"
#include "master/policy.h"
#include "tests/master/master_fixture.h"

namespace allot {
namespace {

using namespace std::chrono_literals;

Resources res(const char* text) {
  auto r = Resources::parse(text);
  EXPECT_TRUE(r.ok()) << text;
  return *r;
}

std::unique_ptr<Allocator> makeAllocator(std::map<std::string, RoleConfig> roles = {}) {
  AllocatorOptions options;
  options.roles = std::move(roles);
  auto a = createAllocator("drf", options);
  EXPECT_TRUE(a.ok());
  return std::move(*a);
}

FrameworkHandle addIn(Allocator& a, const std::string& role, const char* guaranteed = "") {
  FrameworkParams p;
  p.role = role;
  p.guaranteed = res(guaranteed);
  FrameworkHandle f = a.addFramework(p);
  a.setActive(f, true);
  return f;
}

std::map<FrameworkHandle, int> grantsBy(Allocator& a, TimePoint now) {
  std::vector<Grant> grants;
  a.allocate(now, true, &grants);
  std::map<FrameworkHandle, int> count;
  for (const Grant& g : grants) ++count[g.framework];
  return count;
}

// ---------------------------------------------------------------- roles

TEST(Roles, DrfRunsAcrossRolesFirstThenWithinTheRole) {
  auto a = makeAllocator();
  FakeClock clock;
  for (int i = 0; i < 8; ++i) a->addAgent(res("cpus:1;mem:10"));
  FrameworkHandle crowd1 = addIn(*a, "crowd"), crowd2 = addIn(*a, "crowd"), crowd3 = addIn(*a, "crowd");
  FrameworkHandle alone = addIn(*a, "alone");
  auto count = grantsBy(*a, clock.now());
  // Two roles share 8 agents 4/4; the crowd's four split among three.
  EXPECT_EQ(count[alone], 4);
  EXPECT_EQ(count[crowd1] + count[crowd2] + count[crowd3], 4);
  EXPECT_GE(std::min({count[crowd1], count[crowd2], count[crowd3]}), 1);
  EXPECT_EQ(a->roleAllocation("alone"), res("cpus:4;mem:40"));
}

TEST(Roles, RoleWeightsSkewTheSplit) {
  auto a = makeAllocator({{"heavy", RoleConfig{3.0, {}}}});
  FakeClock clock;
  for (int i = 0; i < 8; ++i) a->addAgent(res("cpus:1;mem:10"));
  FrameworkHandle heavy = addIn(*a, "heavy");
  FrameworkHandle light = addIn(*a, "light");
  auto count = grantsBy(*a, clock.now());
  EXPECT_EQ(count[heavy], 6);
  EXPECT_EQ(count[light], 2);
  std::vector<double> fair;
  a->fairShares(&fair);
  EXPECT_NEAR(fair[heavy], 0.75, 1e-9);
  EXPECT_NEAR(fair[light], 0.25, 1e-9);
}

TEST(Roles, RoleChangeMovesTheAllocation) {
  auto a = makeAllocator();
  AgentHandle ag = a->addAgent(res("cpus:4;mem:40"));
  FrameworkHandle f = addIn(*a, "one");
  a->allocateUsed(f, ag, res("cpus:1;mem:10"));
  FrameworkParams p;
  p.role = "two";
  a->updateFramework(f, p);
  EXPECT_TRUE(a->roleAllocation("one").empty());
  EXPECT_EQ(a->roleAllocation("two"), res("cpus:1;mem:10"));
}

// ---------------------------------------------------------------- quota

TEST(Quota, CapsTheRoleAndChopsTheLastGrant) {
  auto a = makeAllocator({{"capped", RoleConfig{1.0, res("cpus:4")}}});
  FakeClock clock;
  for (int i = 0; i < 4; ++i) a->addAgent(res("cpus:3;mem:30"));
  FrameworkHandle capped = addIn(*a, "capped");
  std::vector<Grant> grants;
  a->allocate(clock.now(), true, &grants);
  Resources got;
  for (const Grant& g : grants) {
    EXPECT_EQ(g.framework, capped);
    got += g.resources;
  }
  EXPECT_EQ(got.scalarMillis("cpus"), 4000);  // 3 + a chopped 1, never more
  // The chopped agent keeps its other 2 cpus for others.
  FrameworkHandle other = addIn(*a, "other");
  grants.clear();
  a->allocate(clock.now(), true, &grants);
  Resources otherGot;
  for (const Grant& g : grants) {
    EXPECT_EQ(g.framework, other);
    otherGot += g.resources;
  }
  EXPECT_EQ(otherGot.scalarMillis("cpus"), 8000);
}

TEST(Quota, RoleBelowItsMinimumIsServedFirst) {
  auto a = makeAllocator({{"q", RoleConfig{1.0, res("cpus:6")}}});
  FakeClock clock;
  AgentHandle held = a->addAgent(res("cpus:4;mem:40"));
  FrameworkHandle inQuota = addIn(*a, "q");
  FrameworkHandle plain = addIn(*a, "p");
  // q already has the larger share but is still below its 6-cpu minimum.
  a->allocateUsed(inQuota, held, res("cpus:4;mem:40"));
  a->addAgent(res("cpus:1;mem:10"));
  auto count = grantsBy(*a, clock.now());
  EXPECT_EQ(count[inQuota], 1);
  EXPECT_EQ(count[plain], 0);
}

// ---------------------------------------------------------------- guarantees

TEST(Guarantee, FrameworkBelowItsGuaranteeIsServedFirst) {
  auto a = makeAllocator();
  FakeClock clock;
  AgentHandle held = a->addAgent(res("cpus:4;mem:40"));
  FrameworkHandle guaranteed = addIn(*a, "", "cpus:6");
  FrameworkHandle plain = addIn(*a, "");
  a->allocateUsed(guaranteed, held, res("cpus:4;mem:40"));
  a->addAgent(res("cpus:1;mem:10"));
  auto count = grantsBy(*a, clock.now());
  EXPECT_EQ(count[guaranteed], 1);
  EXPECT_EQ(count[plain], 0);
}

// ---------------------------------------------------------------- filtered as declined

TEST(FilteredAsDeclined, RefusedResourcesCountForTheRefusalTime) {
  auto a = makeAllocator();
  FakeClock clock;
  AgentHandle first = a->addAgent(res("cpus:4;mem:40"));
  FrameworkHandle decliner = addIn(*a, "");
  std::vector<Grant> grants;
  a->allocate(clock.now(), true, &grants);
  ASSERT_EQ(grants.size(), 1u);
  a->recover(decliner, first, grants[0].resources, 10s, clock.now());
  EXPECT_NEAR(a->dominantShare(decliner), 0.0, 1e-9);
  EXPECT_NEAR(a->orderingShare(decliner), 1.0, 1e-9);
  // A newcomer with a small holding now goes before the decliner.
  FrameworkHandle small = addIn(*a, "");
  AgentHandle second = a->addAgent(res("cpus:4;mem:40"));
  a->allocateUsed(small, second, res("cpus:1;mem:1"));
  AgentHandle third = a->addAgent(res("cpus:1;mem:10"));
  grants.clear();
  a->allocate(clock.now(), true, &grants);
  for (const Grant& g : grants) {
    if (g.agent == third) EXPECT_EQ(g.framework, small);
  }
  clock.advance(11s);
  grants.clear();
  a->allocate(clock.now(), true, &grants);  // expires the refusal
  EXPECT_LT(a->orderingShare(decliner), 1.0);
}

// ---------------------------------------------------------------- revocation planning

RevocationFramework fwIn(FrameworkHandle h, const char* alloc, const char* guarantee, double fair,
                         bool starved = false) {
  RevocationFramework f;
  f.handle = h;
  f.allocation = res(alloc);
  f.guarantee = res(guarantee);
  f.fairShare = fair;
  f.orderingShare = rawShare(f.allocation, res("cpus:8;mem:80"));
  f.starved = starved;
  return f;
}

RevocableTask taskOf(FrameworkHandle f, const char* r, int startedS) {
  return RevocableTask{f, res(r), TimePoint(std::chrono::seconds(startedS))};
}

TEST(RevocationPlan, TakesTheNewestTasksAboveTheGuaranteeOnly) {
  Resources total = res("cpus:8;mem:80");
  // A holds everything, 8 one-cpu tasks started at t=1..8; B starved with
  // a guarantee of 2 cpus; fair shares 0.5 each.
  std::vector<RevocationFramework> fws = {fwIn(0, "cpus:8;mem:80", "", 0.5),
                                          fwIn(1, "", "cpus:2;mem:20", 0.5, true)};
  std::vector<RevocableTask> tasks;
  for (int i = 1; i <= 8; ++i) tasks.push_back(taskOf(0, "cpus:1;mem:10", i));
  auto chosen = planRevocations(fws, tasks, total, Resources(), 0.1);
  // Guarantee (2 cpus) then fair share (0.5): four tasks, newest first.
  ASSERT_EQ(chosen.size(), 4u);
  EXPECT_EQ(chosen[0], 7u);
  EXPECT_EQ(chosen[3], 4u);
}

TEST(RevocationPlan, NeverTakesFromAFrameworkAtItsGuarantee) {
  Resources total = res("cpus:8;mem:80");
  std::vector<RevocationFramework> fws = {fwIn(0, "cpus:4;mem:40", "cpus:4;mem:40", 0.33),
                                          fwIn(1, "cpus:4;mem:40", "", 0.33),
                                          fwIn(2, "", "cpus:2", 0.33, true)};
  std::vector<RevocableTask> tasks;
  for (int i = 0; i < 4; ++i) tasks.push_back(taskOf(0, "cpus:1;mem:10", 100 + i));  // newest
  for (int i = 0; i < 4; ++i) tasks.push_back(taskOf(1, "cpus:1;mem:10", i));
  auto chosen = planRevocations(fws, tasks, total, Resources(), 0.1);
  ASSERT_FALSE(chosen.empty());
  for (size_t i : chosen) EXPECT_EQ(tasks[i].framework, 1u) << "task " << i;
}

TEST(RevocationPlan, HysteresisLeavesNearFairFrameworksAlone) {
  Resources total = res("cpus:8;mem:80");
  // B at 0.4625 of a 0.5 fair share: within the 10% band, nothing happens.
  std::vector<RevocationFramework> fws = {fwIn(0, "cpus:4.3;mem:43", "", 0.5),
                                          fwIn(1, "cpus:3.7;mem:37", "", 0.5, true)};
  std::vector<RevocableTask> tasks = {taskOf(0, "cpus:0.3;mem:3", 5)};
  EXPECT_TRUE(planRevocations(fws, tasks, total, Resources(), 0.1).empty());
  // And a victim is never pushed below its fair share: A at 0.55, the only
  // task (0.25) would leave it at 0.3 < 0.5.
  fws = {fwIn(0, "cpus:4.4;mem:44", "", 0.5), fwIn(1, "cpus:2;mem:20", "", 0.5, true)};
  tasks = {taskOf(0, "cpus:2;mem:20", 5)};
  EXPECT_TRUE(planRevocations(fws, tasks, total, Resources(), 0.1).empty());
}

TEST(RevocationPlan, ResourcesAlreadyBeingRevokedCount) {
  Resources total = res("cpus:8;mem:80");
  std::vector<RevocationFramework> fws = {fwIn(0, "cpus:8;mem:80", "", 0.5),
                                          fwIn(1, "", "cpus:2;mem:20", 0.5, true)};
  std::vector<RevocableTask> tasks;
  for (int i = 1; i <= 8; ++i) tasks.push_back(taskOf(0, "cpus:1;mem:10", i));
  EXPECT_TRUE(planRevocations(fws, tasks, total, res("cpus:4;mem:40"), 0.1).empty());
}

TEST(RevocationPlan, LowerPriorityFrameworksLoseTasksFirst) {
  Resources total = res("cpus:8;mem:80");
  auto high = fwIn(0, "cpus:4;mem:40", "", 0.2);
  high.priority = 5;
  auto low = fwIn(1, "cpus:4;mem:40", "", 0.2);
  std::vector<RevocationFramework> fws = {high, low, fwIn(2, "", "cpus:1;mem:10", 0.2, true)};
  std::vector<RevocableTask> tasks = {taskOf(0, "cpus:1;mem:10", 50), taskOf(1, "cpus:1;mem:10", 1)};
  auto chosen = planRevocations(fws, tasks, total, Resources(), 0.1);
  ASSERT_FALSE(chosen.empty());
  EXPECT_EQ(chosen[0], 1u);
}

TEST(RevocationPlan, ARoleBelowItsQuotaMinimumIsServedAndAVictimsRoleKeepsItsMinimum) {
  Resources total = res("cpus:8;mem:80");
  // A (role 0, minimum 3 cpus) holds 6, C (no quota) holds 2, B (role 1,
  // minimum 2 cpus, nothing held) carries its role's deficit; fair shares
  // are small so only the quota minimum asks for anything.
  auto a = fwIn(0, "cpus:6;mem:60", "", 0.1);
  a.role = 0;
  auto c = fwIn(1, "cpus:2;mem:20", "", 0.1);
  auto b = fwIn(2, "", "", 0.0, true);
  b.role = 1;
  b.roleDeficit = res("cpus:2;mem:20");
  std::vector<RevocationRole> roles = {{res("cpus:3"), res("cpus:6;mem:60")},
                                       {res("cpus:2;mem:20"), Resources()}};
  std::vector<RevocableTask> tasks;
  for (int i = 0; i < 6; ++i) tasks.push_back(taskOf(0, "cpus:1;mem:10", 10 + i));  // newest
  for (int i = 0; i < 2; ++i) tasks.push_back(taskOf(1, "cpus:1;mem:10", i));
  auto chosen = planRevocations({a, c, b}, tasks, total, Resources(), 0.1, roles);
  ASSERT_EQ(chosen.size(), 2u);
  for (size_t i : chosen) EXPECT_EQ(tasks[i].framework, 0u);
  // A's role at its minimum: B's deficit is taken from C, never from A.
  roles[0].allocation = res("cpus:3;mem:30");
  a.allocation = res("cpus:3;mem:30");
  tasks.erase(tasks.begin() + 3, tasks.begin() + 6);
  chosen = planRevocations({a, c, b}, tasks, total, Resources(), 0.1, roles);
  ASSERT_EQ(chosen.size(), 2u);
  for (size_t i : chosen) EXPECT_EQ(tasks[i].framework, 1u) << "task " << i;
  // A starved framework of a role below its minimum needs revocation even
  // at its fair share.
  EXPECT_TRUE(needsRevocation(b, total, 0.1));
  b.roleDeficit = res("cpus:0");
  EXPECT_FALSE(needsRevocation(b, total, 0.1));
}

// ---------------------------------------------------------------- flags

TEST(PolicyFlags, ParseAndReject) {
  std::map<std::string, RoleConfig> roles;
  ASSERT_TRUE(parseRoleWeights("batch:2  web:0.5", &roles).ok());
  ASSERT_TRUE(parseQuotas("batch:cpus:10;mem:1024", &roles).ok());
  EXPECT_EQ(roles["batch"].weight, 2);
  EXPECT_EQ(roles["web"].weight, 0.5);
  EXPECT_EQ(roles["batch"].quota, res("cpus:10;mem:1024"));
  EXPECT_FALSE(parseRoleWeights("batch:-1", &roles).ok());
  EXPECT_FALSE(parseRoleWeights("batch", &roles).ok());
  EXPECT_FALSE(parseQuotas("x:cpus:lots", &roles).ok());
  auto cap = parseLongTaskMax("0.5");
  ASSERT_TRUE(cap.ok());
  EXPECT_EQ(cap->on(res("cpus:4;mem:100")), res("cpus:2;mem:50"));
  EXPECT_FALSE(parseLongTaskMax("1.5").ok());
  EXPECT_TRUE(parseLongTaskMax("cpus:2").ok());
  auto g = parseGuarantees("mpi:cpus:4;mem:400");
  ASSERT_TRUE(g.ok());
  PolicyOptions policy;
  policy.guarantees = *g;
  wire::FrameworkInfo info;
  info.set_role("mpi");
  EXPECT_EQ(effectiveGuarantee(policy, info), res("cpus:4;mem:400"));
  res("cpus:8;mem:100").toWire(info.mutable_guaranteed());
  EXPECT_EQ(effectiveGuarantee(policy, info), res("cpus:4;mem:100"));  // clamped
  info.set_role("other");
  EXPECT_TRUE(effectiveGuarantee(policy, info).empty());  // the operator allows none
}

// ---------------------------------------------------------------- the master

using testing::RecordingOutbox;

constexpr PeerId kAgent = 1, kA = 2, kB = 3;

class MasterPolicyTest : public ::testing::Test {
 protected:
  void start(PolicyOptions policy, std::optional<Acls> acls = std::nullopt) {
    MasterOptions options;
    if (acls) options.acls = *acls;
    options.masterId = "m";
    options.minOffer = res("cpus:0.01;mem:32");
    options.allocationInterval = 1s;
    options.policy = std::move(policy);
    master_ = std::move(*Master::create(options, clock_, outbox_));
    wire::Hello h;
    h.set_role(wire::ROLE_AGENT);
    master_->peerConnected(kAgent, h);
    wire::Envelope e;
    e.mutable_register_agent()->mutable_info()->set_hostname("node");
    res("cpus:4;mem:400").toWire(e.mutable_register_agent()->mutable_info()->mutable_resources());
    master_->peerMessage(kAgent, e);
    agentId_ = outbox_.take(kAgent, wire::Envelope::kAgentRegistered)[0].agent_registered().agent_id();
  }

  std::string registerFramework(PeerId peer, const std::string& role) {
    wire::Hello h;
    h.set_role(wire::ROLE_SCHEDULER);
    master_->peerConnected(peer, h);
    wire::Envelope e;
    e.mutable_register_framework()->mutable_info()->set_name("f");
    e.mutable_register_framework()->mutable_info()->set_role(role);
    e.mutable_register_framework()->mutable_info()->set_revocation_grace_s(2);
    e.mutable_register_framework()->set_needs_offers(true);
    master_->peerMessage(peer, e);
    if (master_->allocationPending()) master_->allocate();
    return outbox_.take(peer, wire::Envelope::kFrameworkRegistered)[0].framework_registered().framework_id();
  }

  std::vector<wire::Offer> offersTo(PeerId peer) {
    std::vector<wire::Offer> offers;
    for (auto& e : outbox_.take(peer, wire::Envelope::kResourceOffers)) {
      for (auto& o : e.resource_offers().offers()) offers.push_back(o);
    }
    return offers;
  }

  void launch(PeerId peer, const wire::Offer& offer, int n, const char* each, bool longLived = false) {
    wire::Envelope e;
    e.mutable_accept_offers()->add_offer_ids(offer.offer_id());
    for (int i = 0; i < n; ++i) {
      wire::TaskInfo* t = e.mutable_accept_offers()->add_tasks();
      t->set_task_id("t" + std::to_string(taskSeq_++));
      t->mutable_command()->set_shell("sleep 100");
      t->set_long_lived(longLived);
      res(each).toWire(t->mutable_resources());
    }
    master_->peerMessage(peer, e);
  }

  // A registers and fills the 4-cpu agent with four 1-cpu tasks (t0..t3).
  void fillWithA(std::string* a) {
    *a = registerFramework(kA, "a");
    auto offers = offersTo(kA);
    ASSERT_EQ(offers.size(), 1u);
    launch(kA, offers[0], 4, "cpus:1;mem:100");
    ASSERT_EQ(outbox_.take(kAgent, wire::Envelope::kRunTask).size(), 4u);
  }

  // The agent reports A's revoked tasks KILLED / REVOKED.
  void reportRevoked(const std::string& a, const std::vector<wire::Envelope>& kills) {
    for (const auto& k : kills) {
      wire::Envelope e;
      auto* s = e.mutable_status_update()->mutable_status();
      s->set_framework_id(a);
      s->set_task_id(k.kill_task().task_id());
      s->set_state(wire::TASK_KILLED);
      s->set_reason(wire::REASON_REVOKED);
      master_->peerMessage(kAgent, e);
    }
  }

  void tickFor(Duration d) {
    for (Duration t{}; t < d; t += 100ms) {
      clock_.advance(100ms);
      master_->tick();
      if (master_->allocationPending()) master_->allocate();
    }
  }

  FakeClock clock_;
  RecordingOutbox outbox_;
  std::unique_ptr<Master> master_;
  std::string agentId_;
  int taskSeq_ = 0;
};

TEST_F(MasterPolicyTest, StarvedFrameworkGetsItsGuaranteeBackThroughRevocation) {
  PolicyOptions policy;
  policy.guarantees["b"] = res("cpus:2;mem:200");
  policy.revocation.enabled = true;
  policy.revocation.starvation = 1s;
  start(policy);
  std::string a;
  ASSERT_NO_FATAL_FAILURE(fillWithA(&a));
  std::string b = registerFramework(kB, "b");
  tickFor(3s);
  auto kills = outbox_.take(kAgent, wire::Envelope::kKillTask);
  ASSERT_EQ(kills.size(), 2u);  // B's guarantee is 2 of A's four 1-cpu tasks
  for (const auto& k : kills) {
    EXPECT_EQ(k.kill_task().reason(), wire::REASON_REVOKED);
    EXPECT_EQ(k.kill_task().framework_id(), a);
    EXPECT_DOUBLE_EQ(k.kill_task().grace_s(), 2);  // the framework's own grace
    EXPECT_TRUE(k.kill_task().task_id() == "t2" || k.kill_task().task_id() == "t3");  // newest
  }
  tickFor(3s);
  EXPECT_TRUE(outbox_.take(kAgent, wire::Envelope::kKillTask).empty()) << "revoked twice";
  EXPECT_EQ(master_->revocationCount(), 2u);
  // The agent reports them killed; A hears REVOKED, then B is offered.
  reportRevoked(a, kills);
  auto toA = outbox_.take(kA, wire::Envelope::kStatusUpdate);
  ASSERT_EQ(toA.size(), 2u);
  EXPECT_EQ(toA[0].status_update().status().reason(), wire::REASON_REVOKED);
  tickFor(200ms);
  auto toB = offersTo(kB);
  ASSERT_EQ(toB.size(), 1u);
  EXPECT_EQ(Resources::fromWire(toB[0].resources())->scalarMillis("cpus"), 2000);
}

// A victim that relaunches at once must not win back what was revoked from
// it: the freed resources are withheld from it on that agent for
// kRevokedHoldRounds allocation intervals (here 1 s each), then offered to
// it again if nobody took them.
TEST_F(MasterPolicyTest, RevokedResourcesAreWithheldFromTheVictimForAFewRounds) {
  PolicyOptions policy;
  policy.guarantees["b"] = res("cpus:2;mem:200");
  policy.revocation.enabled = true;
  policy.revocation.starvation = 1s;
  start(policy);
  std::string a;
  ASSERT_NO_FATAL_FAILURE(fillWithA(&a));
  registerFramework(kB, "b");
  tickFor(3s);
  auto kills = outbox_.take(kAgent, wire::Envelope::kKillTask);
  ASSERT_EQ(kills.size(), 2u);
  // B leaves before the kills land: nobody else wants the freed resources.
  master_->peerClosed(kB);
  reportRevoked(a, kills);
  outbox_.take(kA, wire::Envelope::kStatusUpdate);
  tickFor(2500ms);
  EXPECT_TRUE(offersTo(kA).empty()) << "the victim was offered what was just revoked from it";
  tickFor(1500ms);
  auto back = offersTo(kA);
  ASSERT_EQ(back.size(), 1u) << "the hold never ended";
  EXPECT_EQ(Resources::fromWire(back[0].resources())->scalarMillis("cpus"), 2000);
}

// allotctl role / HTTP /roles (through RoleSettingsKeeper, which stores
// first): validated, then the allocator orders by it.
TEST_F(MasterPolicyTest, RoleWeightAndQuotaSetAtRunTimeAreValidatedAndUsed) {
  start(PolicyOptions{});
  auto set = [&](const std::string& role, std::optional<double> weight, std::optional<Resources> quota) {
    RoleSetting setting{weight, quota};
    Status checked = master_->checkRoleSetting(role, setting);
    Status applied = master_->applyRoleSetting(role, setting);
    EXPECT_EQ(checked.ok(), applied.ok()) << role;
    return applied;
  };
  EXPECT_FALSE(set("b", 0.0, std::nullopt).ok());
  EXPECT_FALSE(set("b", -1.0, std::nullopt).ok());
  EXPECT_FALSE(set("b", 2e6, std::nullopt).ok());
  EXPECT_FALSE(set("b", std::nan(""), std::nullopt).ok());
  EXPECT_FALSE(set(std::string(65, 'r'), 1.0, std::nullopt).ok());
  EXPECT_FALSE(set("a b", 1.0, std::nullopt).ok());
  EXPECT_FALSE(set("a:b", 1.0, std::nullopt).ok());
  EXPECT_FALSE(set("b", std::nullopt, res("ports:[1-2]")).ok());
  EXPECT_TRUE(master_->roleSettings().empty()) << "a refused setting was recorded";
  EXPECT_TRUE(set(std::string(64, 'r'), 1.0, std::nullopt).ok());
  ASSERT_TRUE(set("b", 2.5, res("cpus:3")).ok());
  bool found = false;
  for (const auto& row : master_->roles()) {
    if (row.name != "b") continue;
    found = true;
    EXPECT_EQ(row.weight, 2.5);
    EXPECT_EQ(row.quota, res("cpus:3"));
    EXPECT_TRUE(row.runTime);
  }
  EXPECT_TRUE(found);
  // The quota caps role b at once: B is offered 3 of the agent's 4 cpus.
  registerFramework(kB, "b");
  auto offers = offersTo(kB);
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(Resources::fromWire(offers[0].resources())->scalarMillis("cpus"), 3000);
}

// --quota b:cpus:3;mem:300 with no guarantee: B's role is below its
// minimum, so tasks of A are revoked for it, as for a guarantee: three,
// where fairness alone (fair share 0.5) would take two.
TEST_F(MasterPolicyTest, AQuotaMinimumTriggersRevocation) {
  PolicyOptions policy;
  policy.roles["b"].quota = res("cpus:3;mem:300");
  policy.revocation.enabled = true;
  policy.revocation.starvation = 1s;
  start(policy);
  std::string a;
  ASSERT_NO_FATAL_FAILURE(fillWithA(&a));
  registerFramework(kB, "b");
  tickFor(3s);
  auto kills = outbox_.take(kAgent, wire::Envelope::kKillTask);
  ASSERT_EQ(kills.size(), 3u);
  for (const auto& k : kills) EXPECT_EQ(k.kill_task().framework_id(), a);
}

// B's guarantee is 2 cpus but its tasks need 3 cpus on one agent (a
// standing filter, so revocation is placement-aware): fitting one would
// take A below its fair share (2 of the 4 cpus) for more than B's
// guarantee owes, so nothing is revoked (revoking 2 tasks would leave
// their cpus idle).
TEST_F(MasterPolicyTest, NothingIsRevokedWhereTheStarvedTaskCannotFit) {
  PolicyOptions policy;
  policy.guarantees["b"] = res("cpus:2;mem:200");
  policy.revocation.enabled = true;
  policy.revocation.starvation = 1s;
  start(policy);
  std::string a;
  ASSERT_NO_FATAL_FAILURE(fillWithA(&a));
  registerFramework(kB, "b");
  wire::Envelope f;
  res("cpus:3").toWire(f.mutable_set_filters()->mutable_filters()->mutable_min_free());
  master_->peerMessage(kB, f);
  tickFor(5s);
  EXPECT_TRUE(outbox_.take(kAgent, wire::Envelope::kKillTask).empty());
  EXPECT_EQ(master_->revocationCount(), 0u);
}

// B's tasks need 2 cpus on one agent, as much as its guarantee: two of A's
// tasks are revoked on the agent held for B, and nothing more while the
// freed cpus are withheld from A (free resources count as freed).
TEST_F(MasterPolicyTest, ResourcesLeftFreeStopFurtherRevocation) {
  PolicyOptions policy;
  policy.guarantees["b"] = res("cpus:2;mem:200");
  policy.revocation.enabled = true;
  policy.revocation.starvation = 1s;
  start(policy);
  std::string a;
  ASSERT_NO_FATAL_FAILURE(fillWithA(&a));
  registerFramework(kB, "b");
  wire::Envelope f;
  res("cpus:2").toWire(f.mutable_set_filters()->mutable_filters()->mutable_min_free());
  master_->peerMessage(kB, f);
  tickFor(3s);
  auto kills = outbox_.take(kAgent, wire::Envelope::kKillTask);
  ASSERT_EQ(kills.size(), 2u);
  reportRevoked(a, kills);
  tickFor(2500ms);  // less than the hold (3 allocation intervals)
  EXPECT_TRUE(outbox_.take(kAgent, wire::Envelope::kKillTask).empty()) << "revoked again";
  EXPECT_EQ(master_->revocationCount(), 2u);
}

// The operator grants a guarantee per principal (ACL `guarantee=`), not
// only per role: every principal here (the empty one of a plaintext link)
// may hold cpus:3, so B is owed 3 cpus, but A keeps its own 3.
TEST_F(MasterPolicyTest, APrincipalsGuaranteeFromTheAclsIsHonoured) {
  PolicyOptions policy;
  policy.revocation.enabled = true;
  policy.revocation.starvation = 1s;
  auto acls = Acls::parse("register_agent *\nregister_framework * guarantee=cpus:3;mem:300\n", "acls");
  ASSERT_TRUE(acls.ok()) << acls.error().describe();
  start(policy, *acls);
  std::string a;
  ASSERT_NO_FATAL_FAILURE(fillWithA(&a));
  registerFramework(kB, "b");
  tickFor(3s);
  // A holds the same guarantee: it keeps 3 of its 4 one-cpu tasks only if
  // B's need (3) is served first from what is above A's floor (1 task).
  auto kills = outbox_.take(kAgent, wire::Envelope::kKillTask);
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].kill_task().framework_id(), a);
}

TEST_F(MasterPolicyTest, NothingIsRevokedUnlessEnabled) {
  PolicyOptions policy;
  policy.guarantees["b"] = res("cpus:2;mem:200");
  start(policy);
  registerFramework(kA, "a");
  launch(kA, offersTo(kA)[0], 4, "cpus:1;mem:100");
  registerFramework(kB, "b");
  tickFor(5s);
  EXPECT_TRUE(outbox_.take(kAgent, wire::Envelope::kKillTask).empty());
  EXPECT_EQ(master_->revocationCount(), 0u);
}

TEST_F(MasterPolicyTest, LongTaskCapPerAgent) {
  PolicyOptions policy;
  policy.longTaskMax = *parseLongTaskMax("0.5");
  start(policy);
  registerFramework(kA, "");
  auto offers = offersTo(kA);
  ASSERT_EQ(offers.size(), 1u);
  // Three long 1-cpu tasks on a 4-cpu agent capped at half: the third fails;
  // a short task still fits.
  wire::Envelope e;
  e.mutable_accept_offers()->add_offer_ids(offers[0].offer_id());
  for (int i = 0; i < 4; ++i) {
    wire::TaskInfo* t = e.mutable_accept_offers()->add_tasks();
    t->set_task_id("L" + std::to_string(i));
    t->mutable_command()->set_shell("sleep 100");
    t->set_long_lived(i < 3);
    res("cpus:1;mem:100").toWire(t->mutable_resources());
  }
  master_->peerMessage(kA, e);
  auto runs = outbox_.take(kAgent, wire::Envelope::kRunTask);
  ASSERT_EQ(runs.size(), 3u);
  auto updates = outbox_.take(kA, wire::Envelope::kStatusUpdate);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].status_update().status().task_id(), "L2");
  EXPECT_EQ(updates[0].status_update().status().state(), wire::TASK_ERROR);
  EXPECT_NE(updates[0].status_update().status().message().find("long"), std::string::npos);
}

}  // namespace
}  // namespace allot
