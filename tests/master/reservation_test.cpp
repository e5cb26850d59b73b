// Reservations for frameworks of large tasks (master/allocator/reservations.cpp).
#include <gtest/gtest.h>

#include "base/clock.h"
#include "master/allocator/allocator.h"
#include "master/allocator/revocation.h"

namespace allot {
namespace {

Resources res(const char* text) {
  auto r = Resources::parse(text);
  EXPECT_TRUE(r.ok()) << text;
  return *r;
}

std::unique_ptr<Allocator> make(Duration timeout = std::chrono::seconds(10)) {
  AllocatorOptions options;
  options.reservationTimeout = timeout;
  auto a = createAllocator("drf", options);
  EXPECT_TRUE(a.ok());
  return std::move(*a);
}

// `agents` agents of cpus:8;mem:64, all held by a greedy framework of
// 1-cpu tasks (active: it takes every piece that frees), and a framework
// of cpus:4;mem:4 tasks that holds nothing.
struct Cluster {
  std::unique_ptr<Allocator> a;
  std::vector<AgentHandle> agents;
  FrameworkHandle small = 0, large = 0;
  FakeClock clock;

  explicit Cluster(size_t n, Duration timeout = std::chrono::seconds(10)) : a(make(timeout)) {
    small = a->addFramework(FrameworkParams{});
    a->setActive(small, true);
    for (size_t i = 0; i < n; ++i) {
      agents.push_back(a->addAgent(res("cpus:8;mem:64")));
      a->allocateUsed(small, agents.back(), res("cpus:8;mem:64"));
    }
    large = a->addFramework(FrameworkParams{});
    a->setStandingFilters(large, {}, res("cpus:4;mem:4"));
    a->setActive(large, true);
  }

  // A 1-cpu task of `small` ends on `agent`; returns this round's grants.
  std::vector<Grant> smallTaskEnds(AgentHandle agent) {
    a->recover(small, agent, res("cpus:1;mem:1"), std::nullopt, clock.now());
    std::vector<Grant> grants;
    a->allocate(clock.now(), false, &grants);
    return grants;
  }
};

TEST(Reservation, FreedPiecesAccumulateForTheLargeTaskFramework) {
  Cluster c(4);
  std::vector<Grant> grants;
  c.a->allocate(c.clock.now(), true, &grants);
  EXPECT_TRUE(grants.empty());
  // Below its fair share (0.5) and fitting nowhere: one agent is held for
  // it (a quarter of 4 agents).
  ASSERT_EQ(c.a->reservations(c.large).size(), 1u);
  AgentHandle held = c.a->reservations(c.large)[0];
  EXPECT_EQ(c.a->reservedAgentCount(), 1u);
  for (int i = 0; i < 3; ++i) {
    grants = c.smallTaskEnds(held);
    EXPECT_TRUE(grants.empty()) << "piece " << i << " went to the small-task framework";
  }
  // The fourth cpu: the task fits, the large framework gets it all.
  grants = c.smallTaskEnds(held);
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].framework, c.large);
  EXPECT_EQ(grants[0].agent, held);
  EXPECT_EQ(grants[0].resources, res("cpus:4;mem:4"));
  // Granted: that hold ended; still starved, so an agent is held again
  // (the cover of one agent, two tasks, is below its deficit).
  EXPECT_EQ(c.a->reservations(c.large).size(), 1u);
}

TEST(Reservation, PiecesOnOtherAgentsStillGoToOthers) {
  Cluster c(4);
  std::vector<Grant> grants;
  c.a->allocate(c.clock.now(), true, &grants);
  AgentHandle held = c.a->reservations(c.large).at(0);
  AgentHandle other = c.agents[0] == held ? c.agents[1] : c.agents[0];
  grants = c.smallTaskEnds(other);
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].framework, c.small);
  EXPECT_EQ(grants[0].agent, other);
}

TEST(Reservation, ExpiresUnusedAndWaitsOneTimeoutBeforeHoldingAgain) {
  Cluster c(4, std::chrono::seconds(10));
  std::vector<Grant> grants;
  c.a->allocate(c.clock.now(), true, &grants);
  AgentHandle held = c.a->reservations(c.large).at(0);
  c.a->recover(c.small, held, res("cpus:1;mem:1"), std::nullopt, c.clock.now());
  c.clock.advance(std::chrono::seconds(10));
  grants.clear();
  c.a->allocate(c.clock.now(), false, &grants);
  // Released: the piece goes to the small-task framework, and no agent is
  // held for the large one until the cool-down has passed.
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].framework, c.small);
  EXPECT_TRUE(c.a->reservations(c.large).empty());
  c.clock.advance(std::chrono::seconds(9));
  c.a->allocate(c.clock.now(), true, &grants);
  EXPECT_TRUE(c.a->reservations(c.large).empty());
  c.clock.advance(std::chrono::seconds(1));
  c.a->allocate(c.clock.now(), true, &grants);
  EXPECT_EQ(c.a->reservations(c.large).size(), 1u);
}

TEST(Reservation, BoundedToAQuarterOfTheAgentsAndEndsWithTheFramework) {
  Cluster c(8);
  FrameworkHandle large2 = c.a->addFramework(FrameworkParams{});
  c.a->setStandingFilters(large2, {}, res("cpus:4;mem:4"));
  c.a->setActive(large2, true);
  std::vector<Grant> grants;
  c.a->allocate(c.clock.now(), true, &grants);
  EXPECT_EQ(c.a->reservedAgentCount(), 2u);
  EXPECT_LE(c.a->reservations(c.large).size() + c.a->reservations(large2).size(), 2u);
  c.a->setActive(c.large, false);
  c.a->setActive(large2, false);
  EXPECT_EQ(c.a->reservedAgentCount(), 0u);
}

TEST(Reservation, NoneForAFrameworkAtItsFairShareOrWithoutATaskSize) {
  Cluster c(4);
  // Without a stated task size nothing is held.
  c.a->setStandingFilters(c.large, {}, Resources());
  c.a->setActive(c.large, false);
  FrameworkHandle plain = c.a->addFramework(FrameworkParams{});
  c.a->setActive(plain, true);
  std::vector<Grant> grants;
  c.a->allocate(c.clock.now(), true, &grants);
  EXPECT_EQ(c.a->reservedAgentCount(), 0u);
  // A large-task framework already at its fair share: nothing held.
  c.a->setActive(plain, false);
  c.a->removeFramework(plain);
  c.a->recover(c.small, c.agents[0], res("cpus:8;mem:64"), std::nullopt, c.clock.now());
  c.a->recover(c.small, c.agents[1], res("cpus:8;mem:64"), std::nullopt, c.clock.now());
  c.a->allocateUsed(c.large, c.agents[0], res("cpus:8;mem:64"));
  c.a->allocateUsed(c.large, c.agents[1], res("cpus:8;mem:64"));
  c.a->setStandingFilters(c.large, {}, res("cpus:4;mem:4"));
  c.a->setActive(c.large, true);
  c.a->setActive(c.small, false);
  c.a->allocate(c.clock.now(), true, &grants);
  EXPECT_EQ(c.a->reservedAgentCount(), 0u);
}

TEST(Reservation, OffWithAZeroTimeout) {
  Cluster c(4, Duration::zero());
  std::vector<Grant> grants;
  c.a->allocate(c.clock.now(), true, &grants);
  EXPECT_EQ(c.a->reservedAgentCount(), 0u);
  grants = c.smallTaskEnds(c.agents[0]);
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].framework, c.small);
}

TEST(Roles, SetAtRunTimeChangesTheOrderAndIsBounded) {
  auto a = make();
  FakeClock clock;
  AgentHandle agent = a->addAgent(res("cpus:1;mem:8"));
  FrameworkParams pa, pb;
  pa.role = "a";
  pb.role = "b";
  FrameworkHandle fa = a->addFramework(pa);
  FrameworkHandle fb = a->addFramework(pb);
  a->allocateUsed(fa, a->addAgent(res("cpus:1;mem:8")), res("cpus:1;mem:8"));
  a->allocateUsed(fb, a->addAgent(res("cpus:2;mem:16")), res("cpus:2;mem:16"));
  a->setActive(fa, true);
  a->setActive(fb, true);
  // Role b holds twice what a holds; weight 4 makes its share the lower.
  ASSERT_TRUE(a->setRoleConfig("b", RoleConfig{4.0, Resources()}).ok());
  EXPECT_EQ(a->roleConfig("b").weight, 4.0);
  std::vector<Grant> grants;
  a->allocate(clock.now(), true, &grants);
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].framework, fb);
  EXPECT_EQ(grants[0].agent, agent);
  // A quota cap set at run time: role b is capped at what it holds now.
  a->recover(fb, agent, grants[0].resources, std::nullopt, clock.now());
  ASSERT_TRUE(a->setRoleConfig("b", RoleConfig{4.0, res("cpus:2")}).ok());
  grants.clear();
  a->allocate(clock.now(), true, &grants);
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].framework, fa);
  auto names = a->roleNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "b"), names.end());
  for (size_t i = 0; i < kConfiguredRolesMax; ++i) {
    (void)a->setRoleConfig("r" + std::to_string(i), RoleConfig{});
  }
  EXPECT_FALSE(a->setRoleConfig("one-too-many", RoleConfig{}).ok());
  EXPECT_TRUE(a->setRoleConfig("b", RoleConfig{2.0, Resources()}).ok());  // known: allowed
}

}  // namespace
}  // namespace allot

namespace allot {
namespace {

// Victim A holds 8 cpus on two agents (fair share 0.25 of 16 cpus, so it
// may lose 4); starved B has agent 0 held for it, where 1 cpu is free.
struct Placed {
  Resources total = res("cpus:16;mem:1600");
  std::vector<RevocationFramework> frameworks;
  std::vector<RevocableTask> tasks;
  std::vector<size_t> onAgent0;
  std::vector<RevocationRole> roles;
  Placed() {
    RevocationFramework a;
    a.handle = 0;
    a.allocation = res("cpus:8;mem:800");
    a.fairShare = 0.25;
    RevocationFramework b;
    b.handle = 1;
    b.starved = true;
    b.fairShare = 0.5;
    frameworks = {a, b};
    TimePoint t0{};
    // agent 1 holds A's newest tasks: a spread-out plan would take those.
    for (int i = 0; i < 4; ++i) {
      tasks.push_back(RevocableTask{0, res("cpus:1;mem:100"), t0 + std::chrono::seconds(i), 0});
      onAgent0.push_back(tasks.size() - 1);
    }
    for (int i = 0; i < 4; ++i) {
      tasks.push_back(RevocableTask{0, res("cpus:1;mem:100"), t0 + std::chrono::seconds(10 + i), 1});
    }
  }
};

TEST(PlacedRevocation, FreesEnoughOnTheHeldAgentOnlyNewestFirst) {
  Placed p;
  auto chosen = planPlacedRevocation(&p.frameworks, p.tasks, p.onAgent0, 1, res("cpus:1;mem:100"),
                                     res("cpus:4;mem:400"), p.total, false, &p.roles);
  ASSERT_EQ(chosen.size(), 3u);
  EXPECT_EQ(chosen, (std::vector<size_t>{3, 2, 1}));
  EXPECT_EQ(p.frameworks[0].allocation, res("cpus:5;mem:500"));
}

TEST(PlacedRevocation, AllOrNothingWhenTheVictimWouldFallBelowItsFairShare) {
  Placed p;
  // Two 4-cpu tasks need 7 more cpus there; A may lose only 4.
  auto chosen = planPlacedRevocation(&p.frameworks, p.tasks, p.onAgent0, 1, res("cpus:1;mem:100"),
                                     res("cpus:8;mem:800"), p.total, false, &p.roles);
  EXPECT_TRUE(chosen.empty());
  EXPECT_EQ(p.frameworks[0].allocation, res("cpus:8;mem:800"));  // untouched
  // For a guarantee that owes the whole need, A goes down to its own
  // guarantee (3 cpus here), not its fair share.
  p.frameworks[0].guarantee = res("cpus:3");
  p.onAgent0.push_back(4);  // pretend a fifth task of A runs there too
  chosen = planPlacedRevocation(&p.frameworks, p.tasks, p.onAgent0, 1, res("cpus:1;mem:100"),
                                res("cpus:5;mem:500"), p.total, true, &p.roles);
  EXPECT_EQ(chosen.size(), 4u);
  EXPECT_EQ(p.frameworks[0].allocation, res("cpus:4;mem:400"));
}

TEST(PlacedRevocation, NothingWhenItAlreadyFits) {
  Placed p;
  EXPECT_TRUE(planPlacedRevocation(&p.frameworks, p.tasks, p.onAgent0, 1, res("cpus:4;mem:400"),
                                   res("cpus:4;mem:400"), p.total, false, &p.roles)
                  .empty());
}

}  // namespace
}  // namespace allot
