// The gauges /metrics shows (tasks by state, agents draining), which the
// master keeps as its state changes: after every step they must equal a
// full walk of the state (MasterStateView::snapshot, here in the test).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "master/state_view.h"
#include "tests/master/master_fixture.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::MasterTest;
using testing::kAgentPeer;
using testing::kFrameworkPeer;
using testing::kOtherFrameworkPeer;

constexpr PeerId kSecondAgentPeer = 7;

// The value of the line that starts with `series ` in the text format.
double valueOf(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + 1 + series.size() + 1));
}

class MasterGaugesTest : public MasterTest {
 protected:
  // Scrapes the gauges and checks them against a walk of the whole state;
  // returns the scraped tasks by state name (every state, zeros included).
  std::map<std::string, double> scrapeAndCompare() {
    master_->refreshGauges();
    std::string text = master_->metrics().serialize();
    state::State walk = MasterStateView::snapshot(*master_);
    std::map<std::string, double> walked, scraped;
    for (int s = wire::TaskState_MIN; s <= wire::TaskState_MAX; ++s) {
      if (wire::TaskState_IsValid(s)) walked[wire::TaskState_Name(static_cast<wire::TaskState>(s))] = 0;
    }
    for (const auto& t : walk.master().tasks()) walked[wire::TaskState_Name(t.state())] += 1;
    double draining = 0;
    for (const auto& a : walk.master().agents()) draining += a.draining() ? 1 : 0;
    for (const auto& [state, n] : walked) {
      scraped[state] = valueOf(text, "allot_master_tasks{state=\"" + state + "\"}");
      EXPECT_EQ(scraped[state], n) << state;
    }
    EXPECT_EQ(valueOf(text, "allot_master_agents_draining"), draining);
    EXPECT_EQ(valueOf(text, "allot_master_agents"), walk.master().agents_size());
    EXPECT_EQ(valueOf(text, "allot_master_frameworks"), walk.master().frameworks_size());
    EXPECT_EQ(valueOf(text, "allot_master_offers_outstanding"), walk.master().offers_size());
    return scraped;
  }

  double draining() {
    master_->refreshGauges();
    return valueOf(master_->metrics().serialize(), "allot_master_agents_draining");
  }

  void update(PeerId agentPeer, const std::string& agentId, const std::string& frameworkId,
              const std::string& taskId, wire::TaskState state) {
    wire::TaskStatus s;
    s.set_task_id(taskId);
    s.set_framework_id(frameworkId);
    s.set_agent_id(agentId);
    s.set_state(state);
    s.set_update_id(taskId + "-" + wire::TaskState_Name(state));
    wire::Envelope e;
    *e.mutable_status_update()->mutable_status() = s;
    master_->peerMessage(agentPeer, e);
  }

  // Launches `ids` on the first offer the framework at `peer` has (an
  // allocation round first); returns that offer's agent.
  std::string launch(PeerId peer, std::vector<std::string> ids) {
    master_->allocate();
    for (PeerId p : {kFrameworkPeer, kOtherFrameworkPeer}) {
      for (const auto& o : offersTo(p)) held_[p].push_back(o);
    }
    if (held_[peer].empty()) {
      ADD_FAILURE() << "no offer for the framework at peer " << peer;
      return "";
    }
    wire::Offer offer = held_[peer].front();
    held_[peer].erase(held_[peer].begin());
    std::vector<wire::TaskInfo> tasks;
    for (const auto& id : ids) tasks.push_back(task(id, "cpus:0.5;mem:64"));
    accept(peer, offer.offer_id(), tasks, 0);
    return offer.agent_id();
  }

  std::map<PeerId, std::vector<wire::Offer>> held_;  // offers taken, not yet used

  void heartbeat(PeerId peer) {
    wire::Envelope e;
    e.mutable_heartbeat();
    master_->peerMessage(peer, e);
  }
};

TEST_F(MasterGaugesTest, TaskCountsFollowLaunchUpdatesKillAgentAndFrameworkRemoval) {
  std::map<std::string, PeerId> peerOf;
  peerOf[registerAgent(kAgentPeer, "cpus:4;mem:4096")] = kAgentPeer;
  std::string a1Secret = agentSecret_;
  peerOf[registerAgent(kSecondAgentPeer, "cpus:4;mem:4096")] = kSecondAgentPeer;
  std::string f1 = registerFramework(kFrameworkPeer);
  std::string f2 = registerFramework(kOtherFrameworkPeer);
  EXPECT_EQ(scrapeAndCompare()["TASK_STAGING"], 0);

  std::string onF1 = launch(kFrameworkPeer, {"t1", "t2", "t3"});
  std::string onF2 = launch(kOtherFrameworkPeer, {"u1", "u2"});
  ASSERT_EQ(master_->taskCount(), 5u);
  // One round offers each agent to one framework: one agent each.
  ASSERT_NE(onF1, onF2);
  PeerId p1 = peerOf[onF1], p2 = peerOf[onF2];
  EXPECT_EQ(scrapeAndCompare()["TASK_STAGING"], 5);

  update(p1, onF1, f1, "t1", wire::TASK_STARTING);
  update(p1, onF1, f1, "t1", wire::TASK_RUNNING);
  update(p1, onF1, f1, "t2", wire::TASK_RUNNING);
  update(p2, onF2, f2, "u1", wire::TASK_STARTING);
  // An update for a task that does not run there changes nothing.
  update(p2, onF2, f1, "t1", wire::TASK_FAILED);
  auto s = scrapeAndCompare();
  EXPECT_EQ(s["TASK_STAGING"], 2);
  EXPECT_EQ(s["TASK_STARTING"], 1);
  EXPECT_EQ(s["TASK_RUNNING"], 2);
  EXPECT_EQ(s["TASK_FAILED"], 0);

  // A terminal update ends the task: no longer counted (it is a completed
  // task in /state).
  update(p1, onF1, f1, "t2", wire::TASK_FINISHED);
  // The operator's kill asks the agent; the task counts until it ends.
  ASSERT_TRUE(master_->killTask("t1", f1).ok());
  s = scrapeAndCompare();
  EXPECT_EQ(s["TASK_RUNNING"], 1);
  EXPECT_EQ(s["TASK_FINISHED"], 0);
  update(p1, onF1, f1, "t1", wire::TASK_KILLED);
  s = scrapeAndCompare();
  EXPECT_EQ(s["TASK_RUNNING"], 0);
  EXPECT_EQ(s["TASK_KILLED"], 0);
  ASSERT_EQ(master_->taskCount(), 3u);

  // The second framework's agent goes and is removed after its timeout:
  // u1 and u2 are lost and forgotten.
  master_->peerClosed(p2);
  clock_.advance(16s);
  heartbeat(p1);
  master_->tick();
  ASSERT_EQ(master_->agentCount(), 1u);
  ASSERT_EQ(master_->taskCount(), 1u);
  s = scrapeAndCompare();
  EXPECT_EQ(s["TASK_STAGING"], 1);
  EXPECT_EQ(s["TASK_STARTING"], 0);

  // The remaining agent re-registers without t3: lost, forgotten.
  hello(kAgentPeer + 20, wire::ROLE_AGENT);
  wire::Envelope again;
  again.mutable_register_agent()->mutable_info()->set_id(onF1);
  again.mutable_register_agent()->mutable_info()->set_hostname("node");
  again.mutable_register_agent()->set_agent_secret(p1 == kAgentPeer ? a1Secret : agentSecret_);
  Resources::parse("cpus:4;mem:4096")->toWire(again.mutable_register_agent()->mutable_info()->mutable_resources());
  master_->peerMessage(kAgentPeer + 20, again);
  ASSERT_EQ(outbox_.take(kAgentPeer + 20, wire::Envelope::kAgentRegistered).size(), 1u);
  ASSERT_EQ(master_->taskCount(), 0u);
  s = scrapeAndCompare();
  for (const auto& [state, n] : s) EXPECT_EQ(n, 0) << state;

  // A framework torn down with tasks (launched, one running): none left.
  held_.clear();  // the re-registration rescinded them
  outbox_.take(kFrameworkPeer, wire::Envelope::kResourceOffers);
  std::string onAgain = launch(kFrameworkPeer, {"v1", "v2"});
  ASSERT_EQ(onAgain, onF1);
  ASSERT_EQ(master_->taskCount(), 2u);
  update(kAgentPeer + 20, onF1, f1, "v1", wire::TASK_RUNNING);
  s = scrapeAndCompare();
  EXPECT_EQ(s["TASK_RUNNING"], 1);
  EXPECT_EQ(s["TASK_STAGING"], 1);
  wire::Envelope bye;
  bye.mutable_unregister_framework();
  master_->peerMessage(kFrameworkPeer, bye);
  ASSERT_EQ(master_->taskCount(), 0u);
  s = scrapeAndCompare();
  for (const auto& [state, n] : s) EXPECT_EQ(n, 0) << state;
}

// A new leader learns tasks from the agents' re-registrations with their
// latest states, and again (nothing counted twice) when one re-registers.
TEST_F(MasterGaugesTest, FailoverReregistrationCountsTheReportedStatesOnce) {
  master_ = makeMaster("m2");
  hello(kAgentPeer, wire::ROLE_AGENT);
  wire::Envelope e;
  auto* reg = e.mutable_register_agent();
  reg->mutable_info()->set_id("m1-A1");
  reg->mutable_info()->set_hostname("node");
  Resources::parse("cpus:4;mem:4096")->toWire(reg->mutable_info()->mutable_resources());
  reg->add_frameworks()->set_id("m1-F2");
  auto* ex = reg->add_executors();
  ex->mutable_info()->set_framework_id("m1-F2");
  ex->mutable_info()->set_executor_id("e1");
  const std::pair<const char*, wire::TaskState> reported[] = {
      {"r1", wire::TASK_RUNNING}, {"r2", wire::TASK_RUNNING}, {"s1", wire::TASK_STARTING},
      {"done", wire::TASK_FINISHED}};
  for (const auto& [id, state] : reported) {
    *ex->add_tasks() = task(id, "cpus:0.5;mem:64");
    auto* latest = ex->add_latest();
    latest->set_task_id(id);
    latest->set_framework_id("m1-F2");
    latest->set_state(state);
  }
  // A task without a latest status: counted as staging.
  *ex->add_tasks() = task("new", "cpus:0.5;mem:64");
  master_->peerMessage(kAgentPeer, e);
  ASSERT_EQ(master_->taskCount(), 4u);
  auto s = scrapeAndCompare();
  EXPECT_EQ(s["TASK_RUNNING"], 2);
  EXPECT_EQ(s["TASK_STARTING"], 1);
  EXPECT_EQ(s["TASK_STAGING"], 1);
  EXPECT_EQ(s["TASK_FINISHED"], 0);

  // Again on a new connection, s1 now running: the same records, updated.
  auto registered = outbox_.take(kAgentPeer, wire::Envelope::kAgentRegistered);
  ASSERT_EQ(registered.size(), 1u);
  reg->set_agent_secret(registered[0].agent_registered().agent_secret());
  ex->mutable_latest(2)->set_state(wire::TASK_RUNNING);
  hello(kAgentPeer + 30, wire::ROLE_AGENT);
  master_->peerMessage(kAgentPeer + 30, e);
  ASSERT_EQ(master_->taskCount(), 4u);
  s = scrapeAndCompare();
  EXPECT_EQ(s["TASK_RUNNING"], 3);
  EXPECT_EQ(s["TASK_STARTING"], 0);
  EXPECT_EQ(s["TASK_STAGING"], 1);

  // The scheduler registers, then its framework is torn down: all gone.
  EXPECT_EQ(registerFramework(kFrameworkPeer, "m1-F2"), "m1-F2");
  EXPECT_EQ(scrapeAndCompare()["TASK_RUNNING"], 3);
  wire::Envelope bye;
  bye.mutable_unregister_framework();
  master_->peerMessage(kFrameworkPeer, bye);
  s = scrapeAndCompare();
  for (const auto& [state, n] : s) EXPECT_EQ(n, 0) << state;
}

TEST_F(MasterGaugesTest, DrainingAgentsAreCountedThroughDrainUndrainAndRemoval) {
  std::string a1 = registerAgent(kAgentPeer);
  std::string a1Secret = agentSecret_;
  std::string a2 = registerAgent(kSecondAgentPeer);
  EXPECT_EQ(draining(), 0);
  ASSERT_TRUE(master_->drainAgent(a1, 10s).ok());
  ASSERT_TRUE(master_->drainAgent(a1, 20s).ok());  // again: still one agent
  ASSERT_TRUE(master_->drainAgent(a2, 10s).ok());
  EXPECT_FALSE(master_->drainAgent("no-such-agent", 1s).ok());
  EXPECT_EQ(draining(), 2);
  scrapeAndCompare();
  ASSERT_TRUE(master_->undrainAgent(a2).ok());
  ASSERT_TRUE(master_->undrainAgent(a2).ok());  // not draining: no change
  EXPECT_EQ(draining(), 1);
  scrapeAndCompare();
  // A drained agent that re-registers stays draining, counted once.
  hello(kAgentPeer + 40, wire::ROLE_AGENT);
  wire::Envelope again;
  again.mutable_register_agent()->mutable_info()->set_id(a1);
  again.mutable_register_agent()->mutable_info()->set_hostname("node");
  again.mutable_register_agent()->set_agent_secret(a1Secret);
  Resources::parse("cpus:4;mem:4096")->toWire(again.mutable_register_agent()->mutable_info()->mutable_resources());
  master_->peerMessage(kAgentPeer + 40, again);
  ASSERT_EQ(outbox_.take(kAgentPeer + 40, wire::Envelope::kAgentRegistered).size(), 1u);
  EXPECT_EQ(draining(), 1);
  scrapeAndCompare();
  // The draining agent is removed after its timeout.
  master_->peerClosed(kAgentPeer + 40);
  clock_.advance(16s);
  heartbeat(kSecondAgentPeer);
  master_->tick();
  ASSERT_EQ(master_->agentCount(), 1u);
  EXPECT_EQ(draining(), 0);
  scrapeAndCompare();
}

}  // namespace
}  // namespace allot
