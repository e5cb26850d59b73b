// AgentMetrics' export of the loop's sections: per section that ran, a
// histogram of single runs and the longest run, in the Prometheus text
// format a scraper (bench/hog/launch_probe.py) reads.
#include <gtest/gtest.h>

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
  metrics.exportSections(&sections);
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

}  // namespace
}  // namespace allot
