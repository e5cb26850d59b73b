#include "agent/metrics.h"

#include <algorithm>

#include <prometheus/text_serializer.h>

#include <limits>

#include "proto/task_state.h"

namespace allot {

namespace p = prometheus;

namespace {

p::Gauge* addGauge(p::Registry& registry, const char* name, const char* help) {
  return &p::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

AgentMetrics::AgentMetrics() : registry_(std::make_shared<p::Registry>()) {
  launches_ = &p::BuildCounter()
                   .Name("allot_agent_tasks_launched_total")
                   .Help("Tasks the master asked this agent to run.")
                   .Register(*registry_)
                   .Add({});
  launchSeconds_ = &p::BuildHistogram()
                        .Name("allot_agent_launch_seconds")
                        .Help("Time from RunTask to the task's TASK_RUNNING update.")
                        .Register(*registry_)
                        .Add({}, p::Histogram::BucketBoundaries{0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                                0.25, 0.5, 1, 2.5, 5, 10});
  updates_ = &p::BuildCounter()
                  .Name("allot_agent_status_updates_total")
                  .Help("Status updates made on this agent, by state.")
                  .Register(*registry_);
  limits_ = &p::BuildCounter()
                 .Name("allot_agent_limit_events_total")
                 .Help("Tasks ended by an enforced limit (memory/OOM, pids, disk), by reason.")
                 .Register(*registry_);
  for (auto reason : {wire::REASON_MEMORY_LIMIT, wire::REASON_PIDS_LIMIT, wire::REASON_DISK_LIMIT}) {
    limits_->Add({{"reason", wire::Reason_Name(reason)}});
  }
  auto gauge = [this](const char* name, const char* help) { return addGauge(*registry_, name, help); };
  executors_ = gauge("allot_agent_executors", "Executors this agent supervises.");
  liveTasks_ = gauge("allot_agent_tasks_live", "Tasks not yet ended on this agent.");
  pendingUpdates_ = gauge("allot_agent_pending_updates",
                          "Status updates persisted and not yet acknowledged by their framework.");
  registered_ = gauge("allot_agent_registered", "1 while registered with a master.");
  registerLoopMetrics();
}

// The loop's stall meter: lateness, its host steal, late ticks by section.
void AgentMetrics::registerLoopMetrics() {
  auto gauge = [this](const char* name, const char* help) { return addGauge(*registry_, name, help); };
  loopLateness_ = &p::BuildHistogram()
                       .Name("allot_agent_loop_lateness_seconds")
                       .Help("How late each tick of the loop's stall meter ran (a blocked loop makes it late).")
                       .Register(*registry_)
                       .Add({}, p::Histogram::BucketBoundaries{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                                               0.5, 1});
  loopLatenessMax_ = gauge("allot_agent_loop_lateness_max_seconds",
                           "The longest lateness of the loop's stall meter since the agent started.");
  loopLessStealMax_ = gauge("allot_agent_loop_lateness_less_steal_max_seconds",
                            "The longest lateness of the loop's stall meter since the agent started, less "
                            "the host's steal time on the loop's CPU during it (a virtual machine's vCPU "
                            "not run by its host; /proc/stat, 10 ms granularity).");
  loopLateSteal_ = &p::BuildCounter()
                        .Name("allot_agent_loop_late_steal_seconds_total")
                        .Help("The host's steal time on the loop's CPU within ticks 10 ms late or more "
                              "(each capped at its tick's lateness): the part of the loop's lateness a "
                              "virtual machine's host caused.")
                        .Register(*registry_)
                        .Add({});
  stealReadErrors_ = &p::BuildCounter()
                          .Name("allot_agent_loop_steal_read_errors_total")
                          .Help("Reads of /proc/stat by the loop's stall meter that failed or were malformed.")
                          .Register(*registry_)
                          .Add({});
  lateTicks_ = &p::BuildCounter()
                    .Name("allot_agent_loop_late_ticks_total")
                    .Help("Ticks of the loop's stall meter 10 ms late or more, by the section of the "
                          "loop's work (a handler, an isolator call) that took the most time since the "
                          "previous tick.")
                    .Register(*registry_);
}

void AgentMetrics::lateTick(const std::string& section) { lateTicks_->Add({{"section", section}}).Increment(); }

void AgentMetrics::loopTick(double lateSeconds, double stealSeconds) {
  loopLateness_->Observe(lateSeconds);
  if (lateSeconds > loopLatenessMax_->Value()) loopLatenessMax_->Set(lateSeconds);
  double steal = std::clamp(stealSeconds, 0.0, std::max(lateSeconds, 0.0));
  if (lateSeconds - steal > loopLessStealMax_->Value()) loopLessStealMax_->Set(lateSeconds - steal);
  if (steal > 0) loopLateSteal_->Increment(steal);
}

void AgentMetrics::stealReadErrors(uint64_t total) {
  double now = static_cast<double>(total);
  if (now > stealReadErrors_->Value()) stealReadErrors_->Increment(now - stealReadErrors_->Value());
}

void AgentMetrics::taskRequested(const std::string& frameworkId, const std::string& taskId) {
  launches_->Increment();
  if (launching_.size() < kLaunchesTrackedMax) {
    launching_[frameworkId + "/" + taskId] = std::chrono::steady_clock::now();
  }
}

void AgentMetrics::statusUpdate(const wire::TaskStatus& status) {
  updates_->Add({{"state", wire::TaskState_Name(status.state())}}).Increment();
  auto r = status.reason();
  if (r == wire::REASON_MEMORY_LIMIT || r == wire::REASON_PIDS_LIMIT || r == wire::REASON_DISK_LIMIT) {
    limits_->Add({{"reason", wire::Reason_Name(r)}}).Increment();
  }
  if (status.state() != wire::TASK_RUNNING && !isTerminal(status.state())) return;
  auto it = launching_.find(status.framework_id() + "/" + status.task_id());
  if (it == launching_.end()) return;
  if (status.state() == wire::TASK_RUNNING) {
    launchSeconds_->Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second).count());
  }
  launching_.erase(it);
}

namespace {

// The sections' run histograms and longest runs, as two families.
std::vector<p::MetricFamily> sectionFamilies(const LoopSections& sections) {
  p::MetricFamily runs{"allot_agent_loop_section_seconds",
                       "How long each single run of a section of the agent's loop took (its own part: "
                       "nested sections not counted), since the agent started.",
                       p::MetricType::Histogram,
                       {}};
  p::MetricFamily longest{"allot_agent_loop_section_longest_seconds",
                          "The longest single run of a section of the agent's loop since the agent started.",
                          p::MetricType::Gauge,
                          {}};
  for (size_t i = 0; i < sections.names().size(); ++i) {
    const LoopSections::Runs& r = sections.runs()[i];
    if (r.count == 0) continue;
    p::ClientMetric m;
    m.label = {{"section", sections.names()[i]}};
    m.histogram.sample_count = r.count;
    m.histogram.sample_sum = static_cast<double>(r.ns) / 1e9;
    uint64_t cumulative = 0;
    for (size_t b = 0; b < LoopSections::kRunBuckets; ++b) {
      cumulative += r.buckets[b];
      double bound = b < std::size(LoopSections::kRunBucketsMs) ? LoopSections::kRunBucketsMs[b] / 1000
                                                                : std::numeric_limits<double>::infinity();
      m.histogram.bucket.push_back({cumulative, bound});
    }
    runs.metric.push_back(std::move(m));
    p::ClientMetric g;
    g.label = {{"section", sections.names()[i]}};
    g.gauge.value = static_cast<double>(r.longestNs) / 1e9;
    longest.metric.push_back(std::move(g));
  }
  return {std::move(runs), std::move(longest)};
}

}  // namespace

std::string AgentMetrics::serialize() const {
  auto families = registry_->Collect();
  if (sections_) {
    for (auto& f : sectionFamilies(*sections_)) {
      if (!f.metric.empty()) families.push_back(std::move(f));
    }
  }
  return p::TextSerializer().Serialize(families);
}

}  // namespace allot
