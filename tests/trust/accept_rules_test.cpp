// Each rule of an AcceptOffers against a real master and agent: a refused
// accept gets TASK_ERROR with its reason for each task, launches nothing,
// and the sender's offers it named come back at once (here: long before
// the 120 s --offer-timeout), whole.
#include <gtest/gtest.h>

#include <set>

#include "proto/input_limits.h"
#include "proto/resources.h"
#include "tests/agent/cluster.h"
#include "tests/common/raw_peer.h"

namespace allot {
namespace {

using testing::Cluster;
using testing::RawPeer;
using testing::registerFramework;

class AcceptRules : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster();
    if (!cluster_->missing().empty()) return;
    started_ = cluster_->startMaster({"--offer-timeout", "120"}) && cluster_->startAgent();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (auto why = cluster_->missing(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(started_) << cluster_->masterLog() << cluster_->agentLog();
  }

  // Registers `peer` as a framework that wants offers; its id.
  static std::string join(RawPeer& peer) {
    peer.send(registerFramework("", "", /*needsOffers=*/true));
    auto reg = peer.waitFor(wire::Envelope::kFrameworkRegistered);
    return reg ? reg->framework_registered().framework_id() : "";
  }
  // The offers of the next ResourceOffers (none within 5 s: empty).
  static std::vector<wire::Offer> nextOffers(RawPeer& peer) {
    auto e = peer.waitFor(wire::Envelope::kResourceOffers);
    if (!e) return {};
    return {e->resource_offers().offers().begin(), e->resource_offers().offers().end()};
  }
  // Every offer that arrives until none comes for a second: tasks of the
  // earlier tests end and their resources come back as offers of their own.
  static std::vector<wire::Offer> offersUntilQuiet(RawPeer& peer) {
    std::vector<wire::Offer> all = nextOffers(peer);
    while (true) {
      auto e = peer.waitFor(wire::Envelope::kResourceOffers,
                            std::chrono::steady_clock::now() + std::chrono::seconds(1));
      if (!e) return all;
      all.insert(all.end(), e->resource_offers().offers().begin(), e->resource_offers().offers().end());
    }
  }
  // The sum of `offers`' resources (an offer that does not parse counts
  // as nothing: a test comparing sums then fails).
  static Resources sumOf(const std::vector<wire::Offer>& offers) {
    Resources total;
    for (const auto& o : offers) {
      if (auto r = Resources::fromWire(o.resources())) total += *r;
    }
    return total;
  }
  static std::string totalOf(const std::vector<wire::Offer>& offers) { return sumOf(offers).toString(); }
  static wire::TaskInfo task(const std::string& id, const char* resources, const char* shell = "true") {
    wire::TaskInfo t;
    t.set_task_id(id);
    t.mutable_command()->set_shell(shell);
    Resources::parse(resources)->toWire(t.mutable_resources());
    return t;
  }
  static wire::Envelope accept(std::vector<std::string> offerIds, std::vector<wire::TaskInfo> tasks) {
    wire::Envelope e;
    for (const auto& id : offerIds) e.mutable_accept_offers()->add_offer_ids(id);
    for (auto& t : tasks) *e.mutable_accept_offers()->add_tasks() = t;
    e.mutable_accept_offers()->mutable_filters()->set_refuse_seconds(0);
    return e;
  }
  // The next status update is a TASK_ERROR for `taskId` naming `why`.
  static void expectTaskError(RawPeer& peer, const std::string& taskId, const std::string& why) {
    auto u = peer.waitFor(wire::Envelope::kStatusUpdate);
    ASSERT_TRUE(u.has_value()) << "no TASK_ERROR for " << taskId;
    const wire::TaskStatus& s = u->status_update().status();
    EXPECT_EQ(s.state(), wire::TASK_ERROR) << s.task_id() << ": " << s.message();
    EXPECT_EQ(s.task_id(), taskId);
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  }
  // The refused offer comes back at once and whole: nothing was launched.
  // Offers of earlier tests' ended tasks may come back alongside, even
  // merged with it, so what comes back on its agent must contain it.
  static void expectOfferBack(RawPeer& peer, const wire::Offer& refused) {
    std::vector<wire::Offer> onAgent;
    for (const auto& o : offersUntilQuiet(peer)) {
      if (o.agent_id() == refused.agent_id()) onAgent.push_back(o);
    }
    ASSERT_FALSE(onAgent.empty()) << "the offer was not released at once";
    Resources back = sumOf(onAgent), wanted = sumOf({refused});
    EXPECT_TRUE(back.contains(wanted)) << back.toString() << " lacks " << wanted.toString();
  }

  static Cluster* cluster_;
  static bool started_;
};
Cluster* AcceptRules::cluster_ = nullptr;
bool AcceptRules::started_ = false;

TEST_F(AcceptRules, AnOfferNotOutstandingIsRefusedAndTheOthersComeBackAtOnce) {
  RawPeer fw(cluster_->masterPort(), wire::ROLE_SCHEDULER);
  ASSERT_FALSE(join(fw).empty());
  auto offers = nextOffers(fw);
  ASSERT_EQ(offers.size(), 1u);
  fw.send(accept({offers[0].offer_id(), "O-00000000000000000000000000000000"},
                 {task("a", "cpus:0.1;mem:16")}));
  expectTaskError(fw, "a", "is unknown, was rescinded");
  expectOfferBack(fw, offers[0]);
}

TEST_F(AcceptRules, AnOfferNamedTwiceIsRefusedAndComesBackAtOnce) {
  RawPeer fw(cluster_->masterPort(), wire::ROLE_SCHEDULER);
  ASSERT_FALSE(join(fw).empty());
  auto offers = nextOffers(fw);
  ASSERT_EQ(offers.size(), 1u);
  const std::string& o = offers[0].offer_id();
  // Twice the offer's cpus, were it counted twice.
  fw.send(accept({o, o}, {task("a", "cpus:8;mem:16"), task("b", "cpus:8;mem:16")}));
  expectTaskError(fw, "a", "named more than once");
  expectTaskError(fw, "b", "named more than once");
  expectOfferBack(fw, offers[0]);
}

TEST_F(AcceptRules, AnotherFrameworksOfferIsRefusedAndStaysItsOwners) {
  RawPeer owner(cluster_->masterPort(), wire::ROLE_SCHEDULER);
  ASSERT_FALSE(join(owner).empty());
  auto offers = nextOffers(owner);
  ASSERT_EQ(offers.size(), 1u);
  RawPeer thief(cluster_->masterPort(), wire::ROLE_SCHEDULER);
  ASSERT_FALSE(join(thief).empty());
  thief.send(accept({offers[0].offer_id()}, {task("stolen", "cpus:0.1;mem:16")}));
  expectTaskError(thief, "stolen", "belongs to another framework");
  owner.send(accept({offers[0].offer_id()}, {task("mine", "cpus:0.1;mem:16")}));
  auto u = owner.waitFor(wire::Envelope::kStatusUpdate);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->status_update().status().task_id(), "mine");
  EXPECT_NE(u->status_update().status().state(), wire::TASK_ERROR) << u->status_update().status().message();
}

TEST_F(AcceptRules, ALiveTaskIdAndResourcesBeyondTheOffersAreRefused) {
  RawPeer fw(cluster_->masterPort(), wire::ROLE_SCHEDULER);
  ASSERT_FALSE(join(fw).empty());
  auto offers = nextOffers(fw);
  ASSERT_EQ(offers.size(), 1u);
  fw.send(accept({offers[0].offer_id()}, {task("live", "cpus:0.1;mem:16", "sleep 30")}));
  offers = offersUntilQuiet(fw);  // the rest, returned with refuse_seconds 0
  ASSERT_FALSE(offers.empty());
  std::vector<std::string> ids;
  for (const auto& o : offers) ids.push_back(o.offer_id());
  fw.send(accept(ids, {task("live", "cpus:0.1;mem:16"), task("huge", "cpus:1000;mem:16")}));
  for (int i = 0, errors = 0; errors < 2 && i < 10; ++i) {
    auto u = fw.waitFor(wire::Envelope::kStatusUpdate);
    ASSERT_TRUE(u.has_value()) << "no TASK_ERROR for live and huge";
    const wire::TaskStatus& s = u->status_update().status();
    if (s.state() != wire::TASK_ERROR) continue;  // the first "live" running
    ++errors;
    const char* why = s.task_id() == "live" ? "already in use" : "is left in the offers";
    EXPECT_NE(s.message().find(why), std::string::npos) << s.task_id() << ": " << s.message();
  }
  EXPECT_EQ(totalOf(offersUntilQuiet(fw)), totalOf(offers)) << "the offers were not released whole";
  wire::Envelope kill;
  kill.mutable_kill_task()->set_task_id("live");
  fw.send(kill);
}

TEST_F(AcceptRules, OffersOnTwoAgentsAreRefusedAndBothComeBack) {
  RawPeer agent(cluster_->masterPort(), wire::ROLE_AGENT);
  wire::Envelope reg;
  reg.mutable_register_agent()->mutable_info()->set_hostname("second");
  Resources::parse("cpus:1;mem:64")->toWire(reg.mutable_register_agent()->mutable_info()->mutable_resources());
  agent.send(reg);
  ASSERT_TRUE(agent.waitFor(wire::Envelope::kAgentRegistered).has_value());
  RawPeer fw(cluster_->masterPort(), wire::ROLE_SCHEDULER);
  ASSERT_FALSE(join(fw).empty());
  std::vector<wire::Offer> offers;
  while (offers.size() < 2) {
    auto more = nextOffers(fw);
    ASSERT_FALSE(more.empty()) << "expected an offer from each agent";
    offers.insert(offers.end(), more.begin(), more.end());
  }
  ASSERT_NE(offers[0].agent_id(), offers[1].agent_id());
  fw.send(accept({offers[0].offer_id(), offers[1].offer_id()}, {task("split", "cpus:0.1;mem:16")}));
  expectTaskError(fw, "split", "span more than one agent");
  std::set<std::string> back;
  while (back.size() < 2) {
    auto more = nextOffers(fw);
    ASSERT_FALSE(more.empty()) << "the offers were not released at once";
    for (const auto& o : more) back.insert(o.agent_id());
  }
}

TEST_F(AcceptRules, AFrameRefusedForALimitAnswersEachTaskAndReleasesItsOffer) {
  RawPeer fw(cluster_->masterPort(), wire::ROLE_SCHEDULER);
  ASSERT_FALSE(join(fw).empty());
  auto offers = nextOffers(fw);
  ASSERT_EQ(offers.size(), 1u);
  std::vector<wire::TaskInfo> tasks;
  for (size_t i = 0; i <= limits::kTasksPerAcceptMax; ++i) {
    tasks.push_back(task("t" + std::to_string(i), "cpus:0.001;mem:1"));
  }
  fw.send(accept({offers[0].offer_id()}, tasks));
  auto error = fw.waitFor(wire::Envelope::kError);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->error().message().find("AcceptOffers.tasks"), std::string::npos);
  for (size_t i = 0; i < limits::kTasksPerAcceptMax; ++i) {
    expectTaskError(fw, "t" + std::to_string(i), "AcceptOffers.tasks");
    if (HasFatalFailure()) return;
  }
  expectOfferBack(fw, offers[0]);
}

}  // namespace
}  // namespace allot
