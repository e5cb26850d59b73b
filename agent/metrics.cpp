#include "agent/metrics.h"

#include <algorithm>

#include <prometheus/text_serializer.h>

#include "proto/task_state.h"

namespace allot {

namespace p = prometheus;

namespace {

p::Gauge* addGauge(p::Registry& registry, const char* name, const char* help) {
  return &p::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

AgentMetrics::AgentMetrics() : registry_(std::make_shared<p::Registry>()), loop_(*registry_, "agent") {
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

std::string AgentMetrics::serialize() const {
  auto families = registry_->Collect();
  loop_.collect(families);
  return p::TextSerializer().Serialize(families);
}

}  // namespace allot
