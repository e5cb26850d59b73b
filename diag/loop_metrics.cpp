#include "diag/loop_metrics.h"

#include <algorithm>
#include <iterator>
#include <limits>

namespace allot {

namespace p = prometheus;

namespace {

// 1 ms .. 1 s: a tick on time is under 1 ms late, a blocked loop tens of ms.
const p::Histogram::BucketBoundaries kLatenessBuckets{1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5, 1};

// The part of a tick's lateness explained by `part` (a wait or steal
// measured over the whole interval, so possibly longer): within [0, lateness].
double within(double lateS, double partS) { return std::clamp(partS, 0.0, std::max(lateS, 0.0)); }

p::Histogram* histogram(p::Registry& registry, const std::string& name, const std::string& help) {
  return &p::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, kLatenessBuckets);
}

p::Gauge* gauge(p::Registry& registry, const std::string& name, const std::string& help) {
  return &p::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

p::Counter* counter(p::Registry& registry, const std::string& name, const std::string& help) {
  return &p::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

LoopMetrics::LoopMetrics(p::Registry& registry, const std::string& daemon)
    : daemon_(daemon), prefix_("allot_" + daemon + "_loop_") {
  const std::string since = " since the " + daemon + " started.";
  lateness_ = histogram(registry, prefix_ + "lateness_seconds",
                        "How late each tick of the loop's stall meter ran (a blocked loop makes it late).");
  ownLateness_ = histogram(registry, prefix_ + "own_lateness_seconds",
                           "Each tick's lateness less the time the loop's thread waited for a CPU: "
                           "what the loop's own work or blocking delayed it by.");
  latenessMax_ = gauge(registry, prefix_ + "lateness_max_seconds",
                       "The longest lateness of the loop's stall meter" + since);
  lessStealMax_ = gauge(registry, prefix_ + "lateness_less_steal_max_seconds",
                        "The longest lateness of the loop's stall meter less the host's steal time on the "
                        "loop's CPU during it (a virtual machine's vCPU not run by its host; /proc/stat, "
                        "10 ms granularity)" + since);
  lateTicks_ = &p::BuildCounter()
                    .Name(prefix_ + "late_ticks_total")
                    .Help("Ticks of the loop's stall meter 10 ms late or more, by the section of the "
                          "loop's work that took the most time since the previous tick (what made it "
                          "late when none ran: cpu wait, host steal, page fault, late wakeup, none).")
                    .Register(registry);
  auto& lateSeconds = p::BuildCounter()
                          .Name(prefix_ + "late_seconds_total")
                          .Help("The lateness of the ticks 10 ms late or more, summed: part=\"cpu_wait\" the "
                                "loop's thread spent waiting for a CPU, part=\"loop\" the rest (its own "
                                "work or blocking).")
                          .Register(registry);
  lateCpuWait_ = &lateSeconds.Add({{"part", "cpu_wait"}});
  lateLoop_ = &lateSeconds.Add({{"part", "loop"}});
  lateSteal_ = counter(registry, prefix_ + "late_steal_seconds_total",
                       "The host's steal time on the loop's CPU within ticks 10 ms late or more (each "
                       "capped at its tick's lateness): the part of the loop's lateness a virtual "
                       "machine's host caused.");
  stealReadErrors_ = counter(registry, prefix_ + "steal_read_errors_total",
                             "Reads of /proc/stat by the loop's stall meter that failed or were malformed.");
}

void LoopMetrics::tick(const Tick& t) {
  lateness_->Observe(t.lateS);
  ownLateness_->Observe(std::max(t.lateS - within(t.lateS, t.cpuWaitS), 0.0));
  if (t.lateS > latenessMax_->Value()) latenessMax_->Set(t.lateS);
  double lessSteal = t.lateS - within(t.lateS, t.stealS);
  if (lessSteal > lessStealMax_->Value()) lessStealMax_->Set(lessSteal);
}

void LoopMetrics::lateTick(const std::string& section, const Tick& t) {
  lateTicks_->Add({{"section", section}}).Increment();
  double wait = within(t.lateS, t.cpuWaitS);
  lateCpuWait_->Increment(wait);
  lateLoop_->Increment(std::max(t.lateS - wait, 0.0));
  double steal = within(t.lateS, t.stealS);
  if (steal > 0) lateSteal_->Increment(steal);
}

void LoopMetrics::stealReadErrors(uint64_t total) {
  double now = static_cast<double>(total);
  if (now > stealReadErrors_->Value()) stealReadErrors_->Increment(now - stealReadErrors_->Value());
}

std::optional<LoopSections::Taken> LoopMetrics::meterTicked(const LoopStallMeter& meter, double lateS,
                                                            LoopSections& sections) {
  const TickSplit& split = meter.lastSplit();
  Tick t{lateS, meter.lastCpuWaitMs() / 1000, split.hostStealMs / 1000};
  tick(t);
  stealReadErrors(meter.stats().stealReadErrors);
  if (lateS < kLateS) {
    sections.reset();
    return std::nullopt;
  }
  LoopSections::Taken taken = sections.take();
  lateTick(taken.sections.empty() ? split.untimedCause(lateS * 1000) : taken.sections[0].first, t);
  return taken;
}

namespace {

p::ClientMetric runsOf(const std::string& section, const LoopSections::Runs& r) {
  p::ClientMetric m;
  m.label = {{"section", section}};
  m.histogram.sample_count = r.count;
  m.histogram.sample_sum = static_cast<double>(r.ns) / 1e9;
  uint64_t cumulative = 0;
  for (size_t b = 0; b < LoopSections::kRunBuckets; ++b) {
    cumulative += r.buckets[b];
    double bound = b < std::size(LoopSections::kRunBucketsMs) ? LoopSections::kRunBucketsMs[b] / 1000
                                                              : std::numeric_limits<double>::infinity();
    m.histogram.bucket.push_back({cumulative, bound});
  }
  return m;
}

}  // namespace

void LoopMetrics::collect(std::vector<p::MetricFamily>& families) const {
  if (!sections_) return;
  p::MetricFamily runs{prefix_ + "section_seconds",
                       "How long each single run of a section of the " + daemon_ +
                           "'s loop took (its own part when sections nest exclusively), since the " +
                           daemon_ + " started.",
                       p::MetricType::Histogram,
                       {}};
  p::MetricFamily longest{prefix_ + "section_longest_seconds",
                          "The longest single run of a section of the " + daemon_ + "'s loop since the " +
                              daemon_ + " started.",
                          p::MetricType::Gauge,
                          {}};
  for (size_t i = 0; i < sections_->names().size(); ++i) {
    const LoopSections::Runs& r = sections_->runs()[i];
    if (r.count == 0) continue;
    runs.metric.push_back(runsOf(sections_->names()[i], r));
    p::ClientMetric g;
    g.label = {{"section", sections_->names()[i]}};
    g.gauge.value = static_cast<double>(r.longestNs) / 1e9;
    longest.metric.push_back(std::move(g));
  }
  if (runs.metric.empty()) return;
  families.push_back(std::move(runs));
  families.push_back(std::move(longest));
}

}  // namespace allot
