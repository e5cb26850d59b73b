// MasterMetrics: the loop's late-tick accounting as /metrics shows it
// (what bench/scale/state_probe.sh reads per window).
#include "master/metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace allot {
namespace {

// The value of the line that starts with `series ` in the text format.
double valueOf(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + 1 + series.size() + 1));
}

TEST(MasterMetrics, LateTicksAreSplitIntoCpuWaitAndTheLoopsOwnTime) {
  MasterMetrics m;
  auto late = [&](const char* section, LoopMetrics::Tick t) {
    m.loop().tick(t);
    m.loop().lateTick(section, t);
  };
  m.loop().tick({0.002, 0.0});      // on time enough: only the histograms
  late("state slice", {0.015, 0.012});  // 12 ms waiting for a CPU, 3 ms the loop's
  late("message", {0.030, 0.0});    // the loop's own 30 ms
  late("none", {0.020, 0.050});     // a wait longer than the lateness counts as all of it
  std::string text = m.serialize();
  EXPECT_NEAR(valueOf(text, "allot_master_loop_late_seconds_total{part=\"cpu_wait\"}"), 0.032, 1e-9);
  EXPECT_NEAR(valueOf(text, "allot_master_loop_late_seconds_total{part=\"loop\"}"), 0.033, 1e-9);
  EXPECT_EQ(valueOf(text, "allot_master_loop_late_ticks_total{section=\"state slice\"}"), 1);
  EXPECT_EQ(valueOf(text, "allot_master_loop_late_ticks_total{section=\"none\"}"), 1);
  EXPECT_EQ(valueOf(text, "allot_master_loop_lateness_seconds_count"), 4);
  EXPECT_EQ(valueOf(text, "allot_master_loop_lateness_seconds_bucket{le=\"0.01\"}"), 1);
  // Own lateness: 2, 3, 30 and 0 ms.
  EXPECT_EQ(valueOf(text, "allot_master_loop_own_lateness_seconds_count"), 4);
  EXPECT_EQ(valueOf(text, "allot_master_loop_own_lateness_seconds_bucket{le=\"0.005\"}"), 3);
  EXPECT_EQ(valueOf(text, "allot_master_loop_own_lateness_seconds_bucket{le=\"0.02\"}"), 3);
  EXPECT_EQ(valueOf(text, "allot_master_loop_own_lateness_seconds_bucket{le=\"0.05\"}"), 4);
}

TEST(MasterMetrics, ScrapesCountTheirLoopTimeByPart) {
  MasterMetrics m;
  m.scraped(0.0002, 0.0003);    // 0.5 ms
  m.scraped(0.000001, 0.004);   // 4 ms, nearly all of it writing the text
  std::string text = m.serialize();
  EXPECT_EQ(valueOf(text, "allot_master_metrics_scrape_seconds_count"), 2);
  EXPECT_EQ(valueOf(text, "allot_master_metrics_scrape_seconds_bucket{le=\"0.0005\"}"), 1);
  EXPECT_EQ(valueOf(text, "allot_master_metrics_scrape_seconds_bucket{le=\"0.005\"}"), 2);
  EXPECT_NEAR(valueOf(text, "allot_master_metrics_scrape_part_seconds_total{part=\"gauges\"}"), 0.000201, 1e-12);
  EXPECT_NEAR(valueOf(text, "allot_master_metrics_scrape_part_seconds_total{part=\"serialize\"}"), 0.0043, 1e-12);
  EXPECT_NEAR(valueOf(text, "allot_master_metrics_scrape_max_seconds"), 0.004001, 1e-12);
}

}  // namespace
}  // namespace allot
