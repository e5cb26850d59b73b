// A real allot-master on loopback, fake agents, and frameworks written with
// the scheduler SDK.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "proto/resources.h"
#include "sdk/scheduler.h"
#include "tests/sdk/fake_agent.h"
#include "tests/sdk/master_process.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::FakeAgent;
using testing::MasterProcess;
using testing::runFor;
using testing::runUntil;

// A framework whose reactions to offers are set per test.
class TestFramework : public Scheduler {
 public:
  std::function<void(SchedulerDriver&, const wire::Offer&)> onOffer;

  void registered(SchedulerDriver&, const std::string& id, const std::string&) override {
    frameworkId = id;
  }
  void reregistered(SchedulerDriver&, const std::string& masterId) override {
    reregisteredWith = masterId;
  }
  void disconnected(SchedulerDriver&) override { ++disconnects; }
  void resourceOffers(SchedulerDriver& d, const std::vector<wire::Offer>& offers) override {
    for (const auto& o : offers) {
      ++offerCount;
      lastOffer = o;
      if (onOffer) onOffer(d, o);
    }
  }
  void offerRescinded(SchedulerDriver&, const std::string& id) override { rescinded.insert(id); }
  void statusUpdate(SchedulerDriver& d, const wire::TaskStatus& s) override {
    updates.push_back(s);
    (void)d.acknowledge(s);
  }
  void agentLost(SchedulerDriver&, const std::string& id) override { lostAgents.insert(id); }

  int countState(wire::TaskState state) const {
    int n = 0;
    for (const auto& u : updates) n += u.state() == state;
    return n;
  }

  std::string frameworkId;
  std::string reregisteredWith;
  int disconnects = 0;
  int offerCount = 0;
  wire::Offer lastOffer;
  std::set<std::string> rescinded;
  std::vector<wire::TaskStatus> updates;
  std::set<std::string> lostAgents;
};

wire::TaskInfo makeTask(const std::string& id, const char* resources) {
  wire::TaskInfo t;
  t.set_task_id(id);
  t.mutable_command()->set_shell("sleep 1000");
  Resources::parse(resources)->toWire(t.mutable_resources());
  return t;
}

wire::Filters refuse(double seconds) {
  wire::Filters f;
  f.set_refuse_seconds(seconds);
  return f;
}

class SchedulerIntegration : public ::testing::Test {
 protected:
  void start(std::vector<std::string> flags) {
    master_ = std::make_unique<MasterProcess>(flags);
    if (!std::getenv("ALLOT_MASTER")) GTEST_SKIP() << "ALLOT_MASTER is not set (run through meson test)";
    ASSERT_NE(master_->port(), 0) << "allot-master did not start";
  }

  FakeAgent& addAgent(const char* resources) {
    agents_.push_back(std::make_unique<FakeAgent>(io_, master_->port(), resources));
    agents_.back()->connect();
    EXPECT_TRUE(runUntil(io_, [&] { return !agents_.back()->agentId.empty(); }, 5s));
    return *agents_.back();
  }

  SchedulerDriver& addFramework(TestFramework& f, const std::string& name, double weight = 1) {
    wire::FrameworkInfo info;
    info.set_name(name);
    info.set_weight(weight);
    drivers_.push_back(std::make_unique<SchedulerDriver>(io_, f, info,
                                                          SchedulerOptions{.master = master_->address()}));
    EXPECT_TRUE(drivers_.back()->start().ok());
    EXPECT_TRUE(runUntil(io_, [&] { return !f.frameworkId.empty(); }, 5s));
    return *drivers_.back();
  }

  void TearDown() override {
    drivers_.clear();
    agents_.clear();
    runFor(io_, 20ms);
    master_.reset();
  }

  asio::io_context io_;
  std::unique_ptr<MasterProcess> master_;
  std::vector<std::unique_ptr<FakeAgent>> agents_;
  std::vector<std::unique_ptr<SchedulerDriver>> drivers_;
};

TEST_F(SchedulerIntegration, OffersArriveAndAcceptedTasksReachTheAgent) {
  start({});
  FakeAgent& agent = addAgent("cpus:4;mem:4096");
  TestFramework f;
  f.onOffer = [](SchedulerDriver& d, const wire::Offer& o) {
    (void)d.acceptOffer({o.offer_id()}, {makeTask("t1", "cpus:1;mem:512")}, refuse(60));
  };
  addFramework(f, "accepting");
  ASSERT_TRUE(runUntil(io_, [&] { return f.countState(wire::TASK_RUNNING) == 1; }, 5s));
  EXPECT_EQ(agent.running.count("t1"), 1u);
  EXPECT_EQ(f.lastOffer.agent_id(), agent.agentId);
  EXPECT_TRUE(runUntil(io_, [&] { return agent.acknowledgements == 1; }, 5s))
      << "the framework's acknowledgement did not reach the agent";
}

TEST_F(SchedulerIntegration, DeclineIsHonouredForTheRefusalTimeAndNoLonger) {
  start({"--allocation-interval", "0.1"});
  addAgent("cpus:4;mem:4096");
  TestFramework f;
  std::vector<std::chrono::steady_clock::time_point> offerTimes;
  f.onOffer = [&](SchedulerDriver& d, const wire::Offer& o) {
    offerTimes.push_back(std::chrono::steady_clock::now());
    (void)d.declineOffer(o.offer_id(), refuse(1.5));
  };
  addFramework(f, "decliner");
  ASSERT_TRUE(runUntil(io_, [&] { return offerTimes.size() >= 3; }, 8s));
  for (size_t i = 1; i < offerTimes.size(); ++i) {
    auto gap = offerTimes[i] - offerTimes[i - 1];
    EXPECT_GE(gap, 1400ms) << "re-offered inside the refusal time";
    EXPECT_LE(gap, 2500ms) << "not re-offered soon after the refusal time";
  }
}

TEST_F(SchedulerIntegration, UnansweredOffersAreRescindedOnTimeout) {
  start({"--offer-timeout", "0.5"});
  addAgent("cpus:4;mem:4096");
  TestFramework f;  // never answers
  std::string firstOffer;
  f.onOffer = [&](SchedulerDriver&, const wire::Offer& o) {
    if (firstOffer.empty()) firstOffer = o.offer_id();
  };
  addFramework(f, "silent");
  ASSERT_TRUE(runUntil(io_, [&] { return !f.rescinded.empty(); }, 5s));
  EXPECT_EQ(f.rescinded.count(firstOffer), 1u);
  EXPECT_TRUE(runUntil(io_, [&] { return f.offerCount >= 2; }, 5s)) << "not re-offered after rescind";
}

TEST_F(SchedulerIntegration, SilentAgentIsRemovedAndReported) {
  start({"--agent-timeout", "1", "--heartbeat-interval", "0.2"});
  FakeAgent& agent = addAgent("cpus:4;mem:4096");
  TestFramework f;
  f.onOffer = [](SchedulerDriver& d, const wire::Offer& o) {
    (void)d.acceptOffer({o.offer_id()}, {makeTask("t1", "cpus:1;mem:512")}, refuse(60));
  };
  addFramework(f, "watcher");
  ASSERT_TRUE(runUntil(io_, [&] { return f.countState(wire::TASK_RUNNING) == 1; }, 5s));
  runFor(io_, 1500ms);
  EXPECT_TRUE(f.lostAgents.empty()) << "a heartbeating agent was removed";
  agent.goSilent();
  ASSERT_TRUE(runUntil(io_, [&] { return f.lostAgents.count(agent.agentId) == 1; }, 5s));
  EXPECT_EQ(f.countState(wire::TASK_LOST), 1);
  EXPECT_EQ(f.updates.back().reason(), wire::REASON_AGENT_LOST);
}

TEST_F(SchedulerIntegration, LaunchBeyondTheOfferGetsTaskError) {
  start({});
  addAgent("cpus:2;mem:1024");
  TestFramework f;
  f.onOffer = [](SchedulerDriver& d, const wire::Offer& o) {
    (void)d.acceptOffer({o.offer_id()}, {makeTask("huge", "cpus:8;mem:512")}, refuse(60));
  };
  addFramework(f, "greedy");
  ASSERT_TRUE(runUntil(io_, [&] { return f.countState(wire::TASK_ERROR) == 1; }, 5s));
  EXPECT_EQ(f.updates[0].reason(), wire::REASON_INVALID_LAUNCH);
  EXPECT_NE(f.updates[0].message().find("needs"), std::string::npos) << f.updates[0].message();
}

// The paper's example on a real master: 9 CPUs and 18 GB; A's tasks need
// <1 CPU, 4 GB>, B's need <3 CPUs, 1 GB>. Under DRF A runs 3 tasks and B 2.
TEST_F(SchedulerIntegration, TwoCompetingFrameworksReachTheirDrfShares) {
  start({"--allocation-interval", "0.2"});
  auto greedy = [](const char* prefix, const char* demand) {
    return [prefix, demand, n = 0](SchedulerDriver& d, const wire::Offer& o) mutable {
      auto have = Resources::fromWire(o.resources());
      if (have->contains(*Resources::parse(demand))) {
        (void)d.acceptOffer({o.offer_id()}, {makeTask(prefix + std::to_string(n++), demand)},
                            refuse(0));
      } else {
        (void)d.declineOffer(o.offer_id(), refuse(60));
      }
    };
  };
  TestFramework a, b;
  a.onOffer = greedy("a", "cpus:1;mem:4096");
  b.onOffer = greedy("b", "cpus:3;mem:1024");
  // Both register before the agent exists, so neither gets a head start.
  addFramework(a, "A");
  addFramework(b, "B");
  addAgent("cpus:9;mem:18432");
  ASSERT_TRUE(runUntil(io_, [&] {
    return a.countState(wire::TASK_RUNNING) + b.countState(wire::TASK_RUNNING) >= 5;
  }, 10s));
  runFor(io_, 1s);
  EXPECT_EQ(a.countState(wire::TASK_RUNNING), 3);
  EXPECT_EQ(b.countState(wire::TASK_RUNNING), 2);
  const auto& shareA = drivers_[0]->guaranteedShare();
  const auto& shareB = drivers_[1]->guaranteedShare();
  EXPECT_NEAR(shareA.dominant_share(), 2.0 / 3, 0.02);
  EXPECT_NEAR(shareB.dominant_share(), 2.0 / 3, 0.02);
}

TEST_F(SchedulerIntegration, SuppressedFrameworkGetsNoOffersUntilRevived) {
  start({"--allocation-interval", "0.1"});
  addAgent("cpus:4;mem:4096");
  TestFramework f;
  f.onOffer = [](SchedulerDriver& d, const wire::Offer& o) {
    (void)d.setNeedsOffers(false);
    (void)d.declineOffer(o.offer_id(), refuse(0));
  };
  SchedulerDriver& d = addFramework(f, "suppressor");
  ASSERT_TRUE(runUntil(io_, [&] { return f.offerCount == 1; }, 5s));
  runFor(io_, 1s);
  EXPECT_EQ(f.offerCount, 1);
  f.onOffer = nullptr;
  ASSERT_TRUE(d.setNeedsOffers(true).ok());
  EXPECT_TRUE(runUntil(io_, [&] { return f.offerCount == 2; }, 5s));
}

TEST_F(SchedulerIntegration, FinishedTaskResourcesAreReofferedPromptly) {
  start({"--allocation-interval", "30"});
  FakeAgent& agent = addAgent("cpus:1;mem:1024");
  TestFramework f;
  f.onOffer = [](SchedulerDriver& d, const wire::Offer& o) {
    (void)d.acceptOffer({o.offer_id()}, {makeTask("t" + o.offer_id(), "cpus:1;mem:1024")});
  };
  addFramework(f, "cycler");
  ASSERT_TRUE(runUntil(io_, [&] { return f.countState(wire::TASK_RUNNING) == 1; }, 5s));
  auto finishedAt = std::chrono::steady_clock::now();
  agent.finishTask(f.frameworkId, agent.running.begin()->first);
  ASSERT_TRUE(runUntil(io_, [&] { return f.countState(wire::TASK_RUNNING) == 2; }, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - finishedAt, 1s)
      << "freed resources waited for the periodic cycle (30 s)";
}

TEST_F(SchedulerIntegration, GarbageFromOnePeerDoesNotHurtTheOthers) {
  start({"--allocation-interval", "0.1"});
  addAgent("cpus:4;mem:4096");
  TestFramework f;
  f.onOffer = [](SchedulerDriver& d, const wire::Offer& o) {
    (void)d.declineOffer(o.offer_id(), refuse(0.2));
  };
  addFramework(f, "bystander");
  ASSERT_TRUE(runUntil(io_, [&] { return f.offerCount >= 1; }, 5s));
  // A peer announcing a 1 GiB frame, and one sending a truncated frame.
  for (std::string bytes : {std::string("\x40\x00\x00\x00garbage", 11), std::string("\x00\x00\x01\x00ab", 6)}) {
    asio::ip::tcp::socket raw(io_);
    raw.connect({asio::ip::make_address("127.0.0.1"), master_->port()});
    asio::write(raw, asio::buffer(bytes));
    raw.close();
  }
  int before = f.offerCount;
  EXPECT_TRUE(runUntil(io_, [&] { return f.offerCount >= before + 2; }, 5s))
      << "the master stopped serving after a bad frame";
  EXPECT_EQ(f.disconnects, 0);
}

// Soft state: a framework re-registers with a brand-new master (same
// address, nothing persisted) and keeps its id.
TEST_F(SchedulerIntegration, FrameworkReregistersWithANewMaster) {
  start({});
  TestFramework f;
  addFramework(f, "survivor");
  std::string id = f.frameworkId;
  uint16_t port = master_->port();
  master_.reset();
  ASSERT_TRUE(runUntil(io_, [&] { return f.disconnects == 1; }, 5s));
  master_ = std::make_unique<MasterProcess>(std::vector<std::string>{}, port);
  ASSERT_EQ(master_->port(), port) << "could not restart the master on port " << port;
  ASSERT_TRUE(runUntil(io_, [&] { return !f.reregisteredWith.empty(); }, 10s));
  EXPECT_EQ(drivers_[0]->frameworkId(), id);
  addAgent("cpus:1;mem:128");
  EXPECT_TRUE(runUntil(io_, [&] { return f.offerCount >= 1; }, 5s));
}

}  // namespace
}  // namespace allot
