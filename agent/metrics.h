// AgentMetrics: the agent's Prometheus metrics (prometheus-cpp core), served
// by GET /metrics. The Agent reports two events: a RunTask arrived
// (taskRequested) and a status update was made (statusUpdate); from them
// come launch latency (RunTask -> TASK_RUNNING), updates by state and limit
// events (OOM, pids, disk) by reason. Gauges are set from the Agent when
// scraped (agent/http_api.cpp). The loop's diagnostics (its stall meter and
// sections, agent/agent_sections.h) are allot_agent_loop_*
// (diag/loop_metrics.h).
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

#include "diag/loop_metrics.h"
#include "proto/allot.pb.h"

namespace allot {

class AgentMetrics {
 public:
  static constexpr size_t kLaunchesTrackedMax = 100000;

  AgentMetrics();

  void taskRequested(const std::string& frameworkId, const std::string& taskId);
  void statusUpdate(const wire::TaskStatus& status);
  LoopMetrics& loop() { return loop_; }

  prometheus::Gauge& executors() { return *executors_; }
  prometheus::Gauge& liveTasks() { return *liveTasks_; }
  prometheus::Gauge& pendingUpdates() { return *pendingUpdates_; }
  prometheus::Gauge& registered() { return *registered_; }

  std::string serialize() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  LoopMetrics loop_;
  prometheus::Counter* launches_;
  prometheus::Histogram* launchSeconds_;
  prometheus::Family<prometheus::Counter>* updates_;
  prometheus::Family<prometheus::Counter>* limits_;
  prometheus::Gauge* executors_;
  prometheus::Gauge* liveTasks_;
  prometheus::Gauge* pendingUpdates_;
  prometheus::Gauge* registered_;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> launching_;
};

}  // namespace allot
