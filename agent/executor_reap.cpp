// The end of ExecutorManager's containers: the reap (kill whatever is left,
// wait for the kernel to let go of the cgroups) on the worker pool, retried
// there while it fails, then the isolators' cleanup() and the record's
// removal on the loop. Nothing here waits on the loop.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "agent/executor_manager.h"
#include "agent/executor_manager_types.h"
#include "agent/gc.h"
#include "base/log.h"
#include "proto/input_limits.h"

namespace allot {
namespace {

std::string secondsText(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

// What is left of the container is killed and its cgroups removed on the
// worker pool (the kernel may take seconds); the isolators' cleanup and the
// container's record go once that is done, so a replacement executor of
// the same (framework, executor) never shares the cgroup being reaped.
void ExecutorManager::reap(Container& c) {
  std::vector<std::function<Status()>> jobs;
  for (auto& iso : isolators_) {
    if (auto job = iso->reapJob(c.id)) jobs.push_back(std::move(job));
  }
  if (jobs.empty()) return destroy(c);
  std::function<Status()> work = [jobs = std::move(jobs)] {
    Status result;
    for (auto& job : jobs) {
      Status st = job();
      if (!st && result) result = st;
    }
    return result;
  };
  std::weak_ptr<int> alive = alive_;
  Status queued = pool_.submit<Status>(work, [this, alive, name = c.name, gen = c.generation](Status st) {
    if (alive.expired()) return;
    auto timer = timed(AgentSection::kReaped);
    if (Container* c = byName(name, gen)) onReaped(*c, st);
  });
  // A full queue is a failed attempt like any other: retried after a wait.
  if (!queued) onReaped(c, queued);
}

// A reap that failed (a process the kill did not end, e.g. in
// uninterruptible sleep on a hung disk or NFS server) is retried on the
// pool with a doubling wait, for as long as the agent runs: the cgroup can
// only go once the kernel lets the process go. Meanwhile the container
// stays `destroying`; once the failures reach reapFailuresBeforeRefusing,
// the tasks waiting for its replacement fail, and new ones are refused
// (runTask), rather than wait for a kernel that may never answer.
void ExecutorManager::onReaped(Container& c, const Status& st) {
  if (st) return destroy(c);
  ++c.reapFailures;
  c.reapError = st.error().describe();
  Duration wait = options_.reapRetry;
  for (size_t i = 1; i < c.reapFailures && wait < options_.reapRetryMax; ++i) wait *= 2;
  wait = std::min(wait, options_.reapRetryMax);
  std::string what = "container " + c.name + ": reap attempt " + std::to_string(c.reapFailures) +
                     " failed: " + c.reapError + "; retrying in " + secondsText(wait) + " off the loop";
  if (c.reapFailures == options_.reapFailuresBeforeRefusing) {
    LOG_ERROR(what << "; its executor's tasks are refused until it is gone");
    failWaitingTasks(c);
  } else {
    LOG_WARNING(what);
  }
  armTimer(c, c.reapTimer, wait, [this](Container& c) { reap(c); });
}

std::string ExecutorManager::unreapedReason(const Container& c) const {
  std::string why = "the executor's previous container could not be removed (" +
                    std::to_string(c.reapFailures) + " attempts): " + c.reapError;
  return why.substr(0, limits::kStatusMessageBytesMax);
}

void ExecutorManager::failWaitingTasks(Container& c) {
  std::vector<wire::TaskInfo> next = std::move(c.next);
  c.next.clear();
  for (const auto& t : next) {
    emit(nullptr, agentStatus(c.framework.id(), c.executor.executor_id(), t.task_id(), wire::TASK_FAILED,
                              wire::REASON_ISOLATION_FAILED, unreapedReason(c)));
  }
}

void ExecutorManager::destroy(Container& c) {
  if (c.reapFailures > 0) {
    LOG_INFO("container " << c.name << ": reaped after " << c.reapFailures << " failed attempt(s)");
  }
  for (size_t i = isolators_.size(); i-- > 0;) {
    auto timer = timed(IsolatorCall::kCleanup, i);
    if (auto st = isolators_[i]->cleanup(c.id); !st) {
      LOG_ERROR("container " << c.name << ": " << isolators_[i]->name() << " cleanup: " << st.error().describe());
    }
  }
  if (auto st = checkpoints_.removeExecutor(c.name); !st) LOG_ERROR(st.error().describe());
  // The sandbox's age for the GC starts now (utimensat may wait for the
  // journal: on the sandbox thread, before any later GC pass).
  std::function<Status()> touch = [dir = c.sandbox] { return touchDirectory(dir); };
  if (!sandboxPool_.submit<Status>(touch, [](Status) {})) (void)touch();
  wire::FrameworkInfo framework = c.framework;
  std::vector<wire::TaskInfo> next = std::move(c.next);
  bool rootAllowed = c.rootAllowed;
  (void)c.life.on(ContainerEvent::kReaped);
  containers_.erase(c.name);
  for (auto& task : next) runTask(framework, std::move(task), rootAllowed);
}

}  // namespace allot
