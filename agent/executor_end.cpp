// The end of ExecutorManager's containers: one path, whatever ends them (a
// kill, a failure the agent decides, a limit, the framework's removal, the
// executor's own exit), in this file's order:
//   endContainer   the one way to end a container on purpose: its running
//                  process is killed (its exit comes to onExit); one with no
//                  process is finalized; one whose clone is under way is
//                  ended by the clone's answer (onStarted).
//   onExit         exited: the link's last updates are read (until the link
//                  closes, at most drainTimeout), then
//   finalize       why its tasks end is decided once (container.h); each
//                  unfinished task's terminal update goes out; destroying.
//   reap           its cgroups killed and removed on the worker pool,
//   onReaped       retried there while that fails; nothing waits on the loop.
//   destroy        the isolators' cleanup(), its checkpoint and its record
//                  go (gone); the tasks that waited for a replacement start it.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "agent/executor_manager.h"
#include "agent/gc.h"
#include "base/check.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "launcher/process_tree.h"
#include "proto/input_limits.h"

namespace allot {

void ExecutorManager::endContainer(Container& c, const std::string& why) {
  switch (c.requestKill(why)) {
    case KillAction::kNone: return;        // its end is decided already
    case KillAction::kAwaitStart: return;  // onStarted kills what its clone returns
    case KillAction::kFinalize: return postFinalize(c);
    case KillAction::kSignal: return killProcess(c, why);
  }
}

void ExecutorManager::failContainer(Container& c, wire::TaskState state, wire::Reason reason,
                                    const std::string& why) {
  c.recordFailure(state, reason, why);
  endContainer(c, why);
}

void ExecutorManager::killProcess(Container& c, const std::string& why) {
  LOG_WARNING("killing executor " << c.executor.executor_id() << " of framework "
                                  << c.framework.id() << " (pid " << c.pid << "): " << why);
  // Its process tree goes through pidfds on a worker (a /proc scan); the
  // rest of the container (whatever escaped the tree) dies with its cgroup
  // when the executor's exit is finalized.
  // With the pool backed up (a burst of kills) the executor alone is
  // signalled at once: the cgroup still takes the rest.
  auto pidfd = pool_.queued() == 0 ? launcher_.pidfdOf(c.pid) : Result<UniqueFd>(Error{"pool busy"});
  if (!pidfd) {
    (void)launcher_.signal(c.pid, SIGKILL);
    return;
  }
  auto fd = std::make_shared<UniqueFd>(std::move(*pidfd));
  Status queued = pool_.submit<size_t>([fd, pid = c.pid] { return killProcessTree(fd->get(), pid); },
                                       [](size_t) {});
  if (!queued) (void)launcher_.signal(c.pid, SIGKILL);
}

// The launcher reports each process's exit once; a container leaves the
// states with a process only by this exit, so a refusal here means a
// launcher that broke its contract: logged, and the record stays as it is.
void ExecutorManager::onExit(const std::string& name, uint64_t generation, const ExitInfo& exit) {
  Container* c = byName(name, generation);
  if (!c) return;
  if (!exit.setupError.empty()) {
    c->recordFailure(wire::TASK_FAILED, wire::REASON_EXEC_FAILED,
                          "executor " + launchSpec(*c).argv[0] + " could not start: " + exit.setupError);
  }
  if (Status st = c->on(ContainerEvent::kExited, exit); !st) {
    LOG_ERROR("container " << name << ": exit of pid " << exit.pid << ": " << st.error().describe());
    return;
  }
  LOG_INFO("executor " << c->executor.executor_id() << " of framework " << c->framework.id()
                       << ": " << c->life().describeExit());
  if (c->conn && c->conn->open()) {
    // Read what it sent before dying; finalize when the link closes.
    armTimer(*c, Container::Timer::kDrain, options_.drainTimeout, [this](Container& c) { finalize(c); });
    return;
  }
  postFinalize(*c);
}

void ExecutorManager::postFinalize(Container& c) {
  std::weak_ptr<int> alive = alive_;
  asio::post(io_, [this, alive, name = c.name, gen = c.generation] {
    if (alive.expired()) return;
    if (Container* c = byName(name, gen)) finalize(*c);
  });
}

// Decides, once, why the container's unfinished tasks end (the precedence
// of agent/container.h), sends their terminal updates and starts reaping.
// Two ways here may both come (the drain timer and the link's close; a
// kill's finalize and the exit's): the first finalizes, the later ones
// find the end decided (the event refused) and do nothing. A container
// whose process still runs refuses it too: its exit finalizes it.
void ExecutorManager::finalize(Container& c) {
  if (!c.on(ContainerEvent::kFinalized)) return;
  std::vector<std::string> ids;
  for (const auto& [id, t] : c.tasks()) ids.push_back(id);
  for (const auto& id : ids) {
    const ContainerTask& t = c.tasks().at(id);
    wire::TaskStatus s = agentStatus(c.framework.id(), c.executor.executor_id(), id,
                                     wire::TASK_FAILED, wire::REASON_EXECUTOR_EXITED, "");
    Status filled = c.life().fillTerminal(t.killing, t.killReason, &s);
    CHECK(filled);  // finalized just above: the reason is decided
    emit(&c, std::move(s));
  }
  if (c.conn) c.conn->close("executor ended");
  reap(c);
}

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
  armTimer(c, Container::Timer::kReap, wait, [this](Container& c) { reap(c); });
}

std::string ExecutorManager::unreapedReason(const Container& c) const {
  std::string why = "the executor's previous container could not be removed (" +
                    std::to_string(c.reapFailures) + " attempts): " + c.reapError;
  return why.substr(0, limits::kStatusMessageBytesMax);
}

void ExecutorManager::failWaitingTasks(Container& c) {
  for (const auto& t : c.takeWaiting()) {
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
  std::vector<wire::TaskInfo> next = c.takeWaiting();
  bool rootAllowed = c.rootAllowed;
  // Only finalize (then the reap timer) reaps, always in destroying.
  c.take(ContainerEvent::kReaped);
  containers_.erase(c.name);
  for (auto& task : next) runTask(framework, std::move(task), rootAllowed);
}

}  // namespace allot
