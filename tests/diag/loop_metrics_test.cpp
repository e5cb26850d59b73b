// LoopMetrics: one export of the loop's diagnostics for every daemon; how a
// stall meter's tick is counted and attributed to the loop's sections.
#include "diag/loop_metrics.h"

#include <gtest/gtest.h>

#include <prometheus/text_serializer.h>

#include <string>
#include <thread>

namespace allot {
namespace {

using namespace std::chrono_literals;

std::string serialize(prometheus::Registry& registry, const LoopMetrics& loop) {
  auto families = registry.Collect();
  loop.collect(families);
  return prometheus::TextSerializer().Serialize(families);
}

// The value of the line that starts with `series ` in the text format.
double valueOf(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + 1 + series.size() + 1));
}

std::string replaceAll(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

TEST(LoopMetrics, EveryDaemonExportsTheSameSeriesUnderItsOwnName) {
  LoopSections sections({"handler"});
  { auto timed = sections.time(0); }
  prometheus::Registry masterRegistry, agentRegistry;
  LoopMetrics master(masterRegistry, "master"), agent(agentRegistry, "agent");
  master.exportSections(&sections);
  agent.exportSections(&sections);
  for (LoopMetrics* m : {&master, &agent}) {
    LoopMetrics::Tick t{0.015, 0.004, 0.002};
    m->tick(t);
    m->lateTick("handler", t);
  }
  std::string masterText = serialize(masterRegistry, master);
  std::string agentText = serialize(agentRegistry, agent);
  EXPECT_NE(masterText.find("allot_master_loop_section_seconds_count{section=\"handler\"} 1"), std::string::npos)
      << masterText;
  EXPECT_EQ(replaceAll(masterText, "master", "agent"), agentText);
}

TEST(LoopMetrics, ALateTicksLatenessIsSplitIntoCpuWaitStealAndTheLoopsOwnTime) {
  prometheus::Registry registry;
  LoopMetrics m(registry, "agent");
  LoopMetrics::Tick t{0.030, 0.010, 0.040};  // steal beyond the lateness counts as all of it
  m.tick(t);
  m.lateTick("message", t);
  std::string text = serialize(registry, m);
  EXPECT_NEAR(valueOf(text, "allot_agent_loop_late_seconds_total{part=\"cpu_wait\"}"), 0.010, 1e-9);
  EXPECT_NEAR(valueOf(text, "allot_agent_loop_late_seconds_total{part=\"loop\"}"), 0.020, 1e-9);
  EXPECT_NEAR(valueOf(text, "allot_agent_loop_late_steal_seconds_total"), 0.030, 1e-9);
  EXPECT_NEAR(valueOf(text, "allot_agent_loop_lateness_less_steal_max_seconds"), 0, 1e-9);
  EXPECT_NEAR(valueOf(text, "allot_agent_loop_lateness_max_seconds"), 0.030, 1e-9);
  EXPECT_EQ(valueOf(text, "allot_agent_loop_own_lateness_seconds_bucket{le=\"0.02\"}"), 1);
  EXPECT_EQ(valueOf(text, "allot_agent_loop_late_ticks_total{section=\"message\"}"), 1);
}

TEST(LoopMetrics, AMetersTickOnTimeResetsTheSectionsALateOneIsAttributed) {
  asio::io_context io;
  LoopStallMeter meter(io, {});  // not started: its split and stats are empty
  LoopSections sections({"fast", "slow"});
  prometheus::Registry registry;
  LoopMetrics m(registry, "master");

  { auto timed = sections.time(0); }
  EXPECT_FALSE(m.meterTicked(meter, 0.002, sections)) << "on time";
  EXPECT_TRUE(sections.take().sections.empty()) << "an on-time tick resets the sums";

  { auto timed = sections.time(0); }
  {
    auto timed = sections.time(1);
    std::this_thread::sleep_for(2ms);
  }
  auto late = m.meterTicked(meter, 0.015, sections);
  ASSERT_TRUE(late);
  ASSERT_EQ(late->sections.size(), 2u);
  EXPECT_EQ(late->sections[0].first, "slow");
  EXPECT_EQ(m.meterTicked(meter, 0.012, sections)->sections.size(), 0u) << "taken: the sums start again";

  std::string text = serialize(registry, m);
  EXPECT_EQ(valueOf(text, "allot_master_loop_late_ticks_total{section=\"slow\"}"), 1);
  EXPECT_EQ(valueOf(text, "allot_master_loop_late_ticks_total{section=\"none\"}"), 1)
      << "no section ran and the split explains nothing: " << text;
  EXPECT_EQ(valueOf(text, "allot_master_loop_lateness_seconds_count"), 3);
}

TEST(LoopMetrics, SectionsThatNeverRanAreLeftOut) {
  LoopSections sections({"never ran"});
  prometheus::Registry registry;
  LoopMetrics m(registry, "agent");
  m.exportSections(&sections);
  std::string text = serialize(registry, m);
  EXPECT_EQ(text.find("allot_agent_loop_section_seconds"), std::string::npos) << text;
  EXPECT_EQ(text.find("never ran"), std::string::npos);
}

}  // namespace
}  // namespace allot
