// AgentRegistry: records, handles, drains and the silence watch
// (master/agent_registry.h).
#include "master/agent_registry.h"

#include <gtest/gtest.h>

namespace allot {
namespace {

TEST(AgentRegistry, AddsAnAgentOnceAndFindsItById) {
  AgentRegistry agents;
  bool inserted = false;
  AgentRecord& a = agents.add("A-1", &inserted);
  EXPECT_TRUE(inserted);
  EXPECT_EQ(a.id, "A-1");
  EXPECT_FALSE(a.hasHandle());
  EXPECT_FALSE(a.draining());
  a.lastSeen = TimePoint{} + std::chrono::seconds(3);
  AgentRecord& again = agents.add("A-1", &inserted);
  EXPECT_FALSE(inserted);
  EXPECT_EQ(&again, &a);
  EXPECT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents.find("A-1"), &a);
  EXPECT_EQ(agents.find("A-2"), nullptr);
  agents.remove("A-1");
  EXPECT_EQ(agents.find("A-1"), nullptr);
  EXPECT_EQ(agents.size(), 0u);
}

TEST(AgentRegistry, AHandleNamesOnlyTheAgentThatHoldsItNow) {
  AgentRegistry agents;
  AgentRecord& a = agents.add("A-1", nullptr);
  AgentRecord& b = agents.add("A-2", nullptr);
  agents.setHandle(a, 7);
  agents.setHandle(b, 8);
  EXPECT_EQ(agents.byHandle(7), &a);
  EXPECT_EQ(agents.byHandle(8), &b);
  agents.setHandle(a, 9);  // re-registered: a new handle
  EXPECT_EQ(a.handle(), 9u);
  EXPECT_EQ(agents.byHandle(7), nullptr);
  EXPECT_EQ(agents.byHandle(9), &a);
  agents.remove("A-1");
  EXPECT_EQ(agents.byHandle(9), nullptr);
  EXPECT_EQ(agents.byHandle(8), &b);
}

TEST(AgentRegistry, CountsDrainingAgentsWhateverTheOrder) {
  AgentRegistry agents;
  AgentRecord& a = agents.add("A-1", nullptr);
  AgentRecord& b = agents.add("A-2", nullptr);
  agents.drain(a, 100);
  agents.drain(a, 200);  // again, with a new deadline
  EXPECT_EQ(agents.drainingCount(), 1u);
  EXPECT_EQ(a.drainDeadlineS(), 200);
  agents.drain(b, 50);
  EXPECT_EQ(agents.drainingCount(), 2u);
  EXPECT_TRUE(agents.undrain(b));
  EXPECT_FALSE(agents.undrain(b));
  EXPECT_EQ(b.drainDeadlineS(), 0) << "no deadline when not draining";
  EXPECT_EQ(agents.drainingCount(), 1u);
  agents.remove("A-1");  // a draining agent removed is no longer counted
  EXPECT_EQ(agents.drainingCount(), 0u);
}

TEST(AgentRegistry, KeepsOneSilenceWatchEntryPerAgentDueInTimeOrder) {
  using namespace std::chrono_literals;
  AgentRegistry agents;
  const TimePoint t0 = TimePoint{} + 100s;
  AgentRecord& a = agents.add("A-1", nullptr);
  EXPECT_EQ(agents.dueFirst(t0), &a) << "a new agent is due at once";
  AgentRecord& b = agents.add("A-2", nullptr);
  agents.recheckAt(a, t0 + 20s);
  agents.recheckAt(b, t0 + 10s);
  EXPECT_EQ(agents.dueFirst(t0 + 10s), nullptr) << "due only once its time has passed";
  EXPECT_EQ(agents.dueFirst(t0 + 11s), &b);
  agents.recheckAt(b, t0 + 30s);
  EXPECT_EQ(agents.dueFirst(t0 + 21s), &a);
  for (int i = 0; i < 100; ++i) agents.add("A-1", nullptr);  // registered again
  EXPECT_EQ(agents.rechecksQueued(), 2u);
  agents.remove("A-1");
  EXPECT_EQ(agents.rechecksQueued(), 1u);
  EXPECT_EQ(agents.dueFirst(t0 + 25s), nullptr) << "a removed agent is never due";
  AgentRecord& again = agents.add("A-1", nullptr);
  EXPECT_EQ(agents.dueFirst(t0 + 25s), &again);
  EXPECT_EQ(agents.rechecksQueued(), agents.size());
}

}  // namespace
}  // namespace allot
