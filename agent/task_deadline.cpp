// Maximum task duration (paper 4.4), enforced by the agent for
// every executor, custom or built-in: when a short task outlives its
// max_duration_s, the agent kills it like a KillTask (the executor is asked
// first; after the kill grace the whole executor is killed), and its
// terminal update carries REASON_MAX_DURATION.
#include "agent/executor_manager_types.h"
#include "base/log.h"

namespace allot {

void ExecutorManager::armMaxDuration(Container& c, Task& t) {
  double limitS = t.info.max_duration_s();
  if (!(limitS > 0) || t.durationTimer) return;
  t.durationTimer = std::make_unique<asio::steady_timer>(io_);
  std::string taskId = t.info.task_id();
  // The timer lives in the task: a task that ends first cancels it.
  armTimer(c, *t.durationTimer, secondsToDuration(std::min(limitS, 1e7)), [this, taskId, limitS](Container& c) {
    auto it = c.tasks.find(taskId);
    if (it == c.tasks.end() || it->second.killing) return;
    LOG_INFO("task " << taskId << " of framework " << c.framework.id() << " exceeded its max_duration_s of "
                     << limitS << " s; killing it");
    wire::KillTask kill;
    kill.set_framework_id(c.framework.id());
    kill.set_task_id(taskId);
    kill.set_reason(wire::REASON_MAX_DURATION);
    killTask(kill);
  });
}

// An executor reports TASK_KILLED for a kill it was asked for; the reason
// is the one the agent or master gave (revocation, max duration).
void ExecutorManager::applyKillReason(const Container& c, wire::TaskStatus* status) const {
  if (status->state() != wire::TASK_KILLED) return;
  auto it = c.tasks.find(status->task_id());
  if (it == c.tasks.end() || !it->second.killing) return;
  if (it->second.killReason == wire::REASON_KILLED_BY_FRAMEWORK) return;
  status->set_reason(it->second.killReason);
  if (status->message().empty() || it->second.killReason == wire::REASON_REVOKED ||
      it->second.killReason == wire::REASON_AGENT_DRAINED) {
    switch (it->second.killReason) {
      case wire::REASON_REVOKED: status->set_message("revoked by the allocation module"); break;
      case wire::REASON_AGENT_DRAINED:
        status->set_message("the agent was drained (allotctl drain) and its deadline passed");
        break;
      case wire::REASON_MAX_DURATION: status->set_message("task exceeded its max_duration_s"); break;
      default: break;
    }
  }
}

}  // namespace allot
