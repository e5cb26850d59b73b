// LoopMetrics: the loop's diagnostics on a daemon's /metrics, the same
// series for every daemon, named allot_<daemon>_loop_* (daemon: "master",
// "agent"):
//   _lateness_seconds                  histogram: every tick's lateness
//   _own_lateness_seconds              histogram: each lateness less its
//                                      thread's wait for a CPU (the loop's
//                                      own work or blocking)
//   _lateness_max_seconds              gauge: the longest lateness
//   _lateness_less_steal_max_seconds   gauge: the longest lateness less the
//                                      host's steal within it
//   _late_ticks_total{section}         ticks kLateS late or more, by the
//                                      section that took the most time since
//                                      the tick before (TickSplit::
//                                      untimedCause() when none ran)
//   _late_seconds_total{part}          their lateness summed: part="cpu_wait"
//                                      waiting for a CPU, part="loop" the rest
//   _late_steal_seconds_total          the host's steal within them
//   _steal_read_errors_total           failed or malformed /proc/stat reads
//   _section_seconds{section}          histogram of each section's single
//                                      runs (LoopSections::runs()), read at
//                                      each collect(); sections that never ran
//                                      are left out
//   _section_longest_seconds{section}  gauge: its longest run
// Waits and steal beyond a tick's lateness count as all of it.
//
//   LoopMetrics loop(registry, "agent");
//   loop.exportSections(&sections);
//   LoopStallMeter meter(io, {}, [&](double lateS) {
//     if (auto late = loop.meterTicked(meter, lateS, sections)) log(*late);
//   });
//   ... at a scrape: auto families = registry.Collect(); loop.collect(families);
//
// Thread: the loop's (the sections are read at collect()).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "diag/loop_sections.h"
#include "diag/loop_stall_meter.h"

namespace allot {

class LoopMetrics {
 public:
  // A tick this late or more is attributed to a section (the stall
  // meter's own log threshold).
  static constexpr double kLateS = LoopStallMeter::kLogAtMs / 1000;

  // What one tick of the stall meter measured, in seconds.
  struct Tick {
    double lateS = 0;
    double cpuWaitS = 0;  // the loop's thread waiting for a CPU
    double stealS = 0;    // the host's steal on the loop's CPU (read for late ticks)
  };

  // Registers the series in `registry`, which must outlive this.
  LoopMetrics(prometheus::Registry& registry, const std::string& daemon);
  LoopMetrics(const LoopMetrics&) = delete;
  LoopMetrics& operator=(const LoopMetrics&) = delete;

  // Every tick.
  void tick(const Tick& t);
  // A tick kLateS late or more, attributed to `section`.
  void lateTick(const std::string& section, const Tick& t);
  // The meter's read errors so far (a total, not a delta).
  void stealReadErrors(uint64_t total);

  // The tick `meter` is telling its onTick about (`lateS`): counted as
  // above, and for a tick kLateS late or more attributed to the section of
  // `sections` that took the most time since the tick before, whose sums
  // are returned (for the daemon's log); nullopt for a tick on time (the
  // sums are reset).
  std::optional<LoopSections::Taken> meterTicked(const LoopStallMeter& meter, double lateS,
                                                 LoopSections& sections);

  // The sections whose runs collect() exports (null: none). They must
  // outlive this.
  void exportSections(const LoopSections* sections) { sections_ = sections; }
  // Appends the sections' families (those that ran) to `families`.
  void collect(std::vector<prometheus::MetricFamily>& families) const;

 private:
  std::string daemon_;
  std::string prefix_;
  prometheus::Histogram* lateness_;
  prometheus::Histogram* ownLateness_;
  prometheus::Gauge* latenessMax_;
  prometheus::Gauge* lessStealMax_;
  prometheus::Family<prometheus::Counter>* lateTicks_;
  prometheus::Counter* lateCpuWait_;
  prometheus::Counter* lateLoop_;
  prometheus::Counter* lateSteal_;
  prometheus::Counter* stealReadErrors_;
  const LoopSections* sections_ = nullptr;
};

}  // namespace allot
