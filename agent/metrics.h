// AgentMetrics: the agent's Prometheus metrics (prometheus-cpp core), served
// by GET /metrics. The Agent reports two events: a RunTask arrived
// (taskRequested) and a status update was made (statusUpdate); from them
// come launch latency (RunTask -> TASK_RUNNING), updates by state and limit
// events (OOM, pids, disk) by reason. The loop's stall meter reports each
// tick's lateness (loopTick). Gauges are set from the Agent when
// scraped (agent/http_api.cpp). The loop's sections (agent/agent_sections.h)
// are exported from their own counts at each scrape (exportSections): per
// section, a histogram of single runs (allot_agent_loop_section_seconds)
// and the longest run (allot_agent_loop_section_longest_seconds), sections
// that never ran left out.
//
// Limits: kLaunchesTrackedMax launches timed at once (more are not timed).
// Thread: the agent's loop thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "base/loop_sections.h"
#include "proto/allot.pb.h"

namespace allot {

class AgentMetrics {
 public:
  static constexpr size_t kLaunchesTrackedMax = 100000;

  AgentMetrics();

  void taskRequested(const std::string& frameworkId, const std::string& taskId);
  void statusUpdate(const wire::TaskStatus& status);
  // One tick of the loop's stall meter ran `lateSeconds` late, of which
  // the host's steal on the loop's CPU may explain `stealSeconds` (read for
  // ticks 10 ms late or more only: TickSplit::hostStealMs).
  void loopTick(double lateSeconds, double stealSeconds = 0);
  // The stall meter's /proc/stat read errors so far (a total, not a delta).
  void stealReadErrors(uint64_t total);
  // A tick 10 ms late or more, attributed to the loop section (agent/
  // agent_sections.h) that took the most time since the previous tick.
  void lateTick(const std::string& section);

  prometheus::Gauge& executors() { return *executors_; }
  prometheus::Gauge& liveTasks() { return *liveTasks_; }
  prometheus::Gauge& pendingUpdates() { return *pendingUpdates_; }
  prometheus::Gauge& registered() { return *registered_; }

  // The loop's sections, read at each serialize() (null: none). They must
  // outlive this.
  void exportSections(const LoopSections* sections) { sections_ = sections; }

  std::string serialize() const;

 private:
  void registerLoopMetrics();

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* launches_;
  prometheus::Histogram* launchSeconds_;
  prometheus::Family<prometheus::Counter>* updates_;
  prometheus::Family<prometheus::Counter>* limits_;
  prometheus::Gauge* executors_;
  prometheus::Gauge* liveTasks_;
  prometheus::Gauge* pendingUpdates_;
  prometheus::Gauge* registered_;
  prometheus::Histogram* loopLateness_;
  prometheus::Gauge* loopLatenessMax_;
  prometheus::Gauge* loopLessStealMax_;
  prometheus::Counter* loopLateSteal_;
  prometheus::Counter* stealReadErrors_;
  prometheus::Family<prometheus::Counter>* lateTicks_;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> launching_;
  const LoopSections* sections_ = nullptr;
};

}  // namespace allot
