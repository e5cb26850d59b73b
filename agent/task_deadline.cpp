// Maximum task duration (paper 4.4), enforced by the agent for
// every executor, custom or built-in: when a short task outlives its
// max_duration_s, the agent kills it like a KillTask (the executor is asked
// first; after the kill grace the whole executor is killed), and its
// terminal update carries REASON_MAX_DURATION.
#include "agent/executor_manager.h"
#include "base/log.h"

namespace allot {

void ExecutorManager::armMaxDuration(Container& c, ContainerTask& t) {
  double limitS = t.info.max_duration_s();
  if (!(limitS > 0) || t.durationTimer) return;
  t.durationTimer = std::make_unique<asio::steady_timer>(io_);
  std::string taskId = t.info.task_id();
  // The timer lives in the task: a task that ends first cancels it.
  armTimer(c, *t.durationTimer, secondsToDuration(std::min(limitS, 1e7)), [this, taskId, limitS](Container& c) {
    const ContainerTask* task = c.task(taskId);
    if (!task || task->killing) return;
    LOG_INFO("task " << taskId << " of framework " << c.framework.id() << " exceeded its max_duration_s of "
                     << limitS << " s; killing it");
    wire::KillTask kill;
    kill.set_framework_id(c.framework.id());
    kill.set_task_id(taskId);
    kill.set_reason(wire::REASON_MAX_DURATION);
    killTask(kill);
  });
}

}  // namespace allot
