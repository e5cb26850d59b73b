// AgentMetrics' export of the loop's sections: per section that ran, a
// histogram of single runs and the longest run, in the Prometheus text
// format a scraper (bench/hog/launch_probe.py) reads; and the loop's
// lateness with the host's steal within it (what agent_bench reads).
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "agent/metrics.h"

namespace allot {
namespace {

using namespace std::chrono_literals;

std::string lineStartingWith(const std::string& text, const std::string& prefix) {
  size_t at = text.find(prefix);
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at);
}

TEST(AgentMetrics, LoopSectionsAreExportedAsHistogramsOfSingleRuns) {
  LoopSections sections({"launcher start", "never ran"}, LoopSections::Nesting::kExclusive);
  { auto fast = sections.time(0); }
  {
    auto slow = sections.time(0);
    std::this_thread::sleep_for(6ms);
  }
  AgentMetrics metrics;
  EXPECT_EQ(metrics.serialize().find("allot_agent_loop_section_seconds"), std::string::npos)
      << "nothing exported before the sections are given";
  metrics.loop().exportSections(&sections);
  std::string text = metrics.serialize();
  EXPECT_NE(text.find("# TYPE allot_agent_loop_section_seconds histogram"), std::string::npos) << text;
  EXPECT_EQ(lineStartingWith(text, "allot_agent_loop_section_seconds_count{section=\"launcher start\"}"),
            "allot_agent_loop_section_seconds_count{section=\"launcher start\"} 2");
  EXPECT_EQ(lineStartingWith(text, "allot_agent_loop_section_seconds_bucket{section=\"launcher start\",le=\"0.005\"}"),
            "allot_agent_loop_section_seconds_bucket{section=\"launcher start\",le=\"0.005\"} 1")
      << "the 6 ms run is past 5 ms: " << text;
  EXPECT_EQ(lineStartingWith(text, "allot_agent_loop_section_seconds_bucket{section=\"launcher start\",le=\"+Inf\"}"),
            "allot_agent_loop_section_seconds_bucket{section=\"launcher start\",le=\"+Inf\"} 2");
  std::string longest = lineStartingWith(text, "allot_agent_loop_section_longest_seconds{section=\"launcher start\"}");
  ASSERT_FALSE(longest.empty()) << text;
  EXPECT_GE(std::stod(longest.substr(longest.rfind(' ') + 1)), 0.006);
  EXPECT_EQ(text.find("never ran"), std::string::npos) << "a section that never ran is left out";
}

// The value of the line that starts with `series ` in the text format.
double valueOf(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + 1 + series.size() + 1));
}

TEST(AgentMetrics, TheHostsStealIsTakenOffTheLoopsLateness) {
  AgentMetrics m;
  auto late = [&](LoopMetrics::Tick t) {
    m.loop().tick(t);
    m.loop().lateTick("none", t);
  };
  m.loop().tick({0.002});          // on time enough, steal not read
  late({0.094, 0, 0.060});         // 60 ms of it the host's
  late({0.020, 0, 0.0});           // 20 ms, none of it the host's
  late({0.012, 0, 0.030});         // steal beyond the lateness counts as all of it
  m.loop().stealReadErrors(0);
  m.loop().stealReadErrors(2);
  m.loop().stealReadErrors(2);     // a total, not a delta
  std::string text = m.serialize();
  EXPECT_NEAR(valueOf(text, "allot_agent_loop_lateness_max_seconds"), 0.094, 1e-9);
  EXPECT_NEAR(valueOf(text, "allot_agent_loop_lateness_less_steal_max_seconds"), 0.034, 1e-9);
  EXPECT_NEAR(valueOf(text, "allot_agent_loop_late_steal_seconds_total"), 0.072, 1e-9);
  EXPECT_EQ(valueOf(text, "allot_agent_loop_steal_read_errors_total"), 2);
  EXPECT_EQ(valueOf(text, "allot_agent_loop_lateness_seconds_count"), 4);
}

}  // namespace
}  // namespace allot
