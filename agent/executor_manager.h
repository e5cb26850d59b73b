// ExecutorManager: the agent's executors ("containers") and their tasks.
//
// - The first task of a framework's executor on this agent starts it
//   (executor_launch.cpp): its run-as user is looked up and its sandbox
//   <work-dir>/sandboxes/<container>.<ms> (stdout and stderr files there)
//   made on the sandbox thread, off the loop (NSS and the filesystem may
//   block); back on the loop, a few per turn of the loop (startReady:
//   kStartSliceBudget), the isolators' prepare() in table order, then the
//   launcher's startOffLoop() (env of proto/FORMAT.md: the clone on the
//   launcher's thread), and once the pid is back on the loop (onStarted),
//   isolate() and watch(). A kill or the framework's removal while the
//   files are made ends the container before any process starts; one
//   that comes while the clone is under way waits for it and then kills
//   the new process (or ends the container if the clone failed). Command tasks (no
//   ExecutorInfo) share one built-in allot-executor per framework,
//   executor id kCommandExecutorId. Later tasks go to the same executor.
//   A command task that names an image gets an executor of its own.
// - An executor or task that names an image has it pulled first
//   (options.pullImage, off the loop), its tasks TASK_STARTING "pulling
//   IMAGE" meanwhile; a failed pull ends them TASK_FAILED with
//   REASON_IMAGE_PULL_FAILED before anything else is made.
// - Executors connect to the Unix socket <work-dir>/agent.sock (accepted
//   and held until they register by ExecutorListener, executor_link.h);
//   tasks wait in the container until its executor registers
//   (registerTimeout). Only a process of the executor's own tree holding
//   its ALLOT_EXECUTOR_SECRET may register as it.
// - Every executor has its own cgroup (the "containment" isolator, first in
//   the isolators): when it ends, its cgroup is killed whole and removed on
//   the worker pool (reap; retried there while a process resists the kill),
//   then the isolators' cleanup() runs on the loop, which never waits.
// - Kill: KillTask is forwarded to the executor (SIGTERM .. SIGKILL after the
//   grace period); if the task is still alive killSlack after the grace, the
//   executor is SIGKILLed and its cgroup reaped. The framework gets
//   TASK_KILLED.
// - An executor that exits (crash, outside kill, limit) produces a terminal
//   update for each task it had not finished: the reason says executor
//   exited (exit code) or signaled (signal), or the limit it hit.
// - An executor left without tasks for idleShutdown is asked to exit.
// - Every change is checkpointed (CheckpointStore) so recover() can re-attach
//   to executors that outlive an agent restart: it watch()es each recorded
//   pid that is still the same process and waits for the executor to
//   reconnect; executors that are gone (or never reconnect) have their
//   tasks reported TASK_LOST.
// Updates go out through Callbacks::onUpdate, which persists them and calls
// `persisted` once they may be relied on: only then is the executor
// acknowledged.
// Thread: the agent's io_context thread.
#pragma once

#include <sys/types.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/agent_sections.h"
#include "agent/checkpoint.h"
#include "agent/container.h"
#include "agent/executor_link.h"
#include "agent/executor_spec.h"
#include "agent/run_as.h"
#include "base/asio.h"
#include "base/clock.h"
#include "base/files.h"
#include "base/result.h"
#include "base/worker_pool.h"
#include "isolators/isolator.h"
#include "launcher/launcher.h"
#include "proto/allot.pb.h"
#include "proto/state.pb.h"

namespace allot {

struct ExecutorManagerOptions {
  std::string workDir;
  std::string executorPath;  // the built-in allot-executor
  Duration recoveryTimeout = std::chrono::seconds(900);
  Duration registerTimeout = std::chrono::seconds(30);
  Duration defaultKillGrace = std::chrono::seconds(3);
  Duration killSlack = std::chrono::seconds(2);
  Duration idleShutdown = std::chrono::seconds(1);
  Duration shutdownTimeout = std::chrono::seconds(10);
  Duration drainTimeout = std::chrono::seconds(1);  // exit -> last updates read
  size_t executorsMax = 1000;
  size_t tasksPerExecutorMax = 10000;
  size_t pendingConnectionsMax = 256;
  // The worker pool for blocking kernel work (reaping containers).
  size_t workerThreads = 2;
  size_t workerQueueMax = 4096;
  // Jobs waiting for the sandbox thread (new sandboxes, touches of ended
  // ones, GC passes); a launch past it fails with REASON_EXEC_FAILED.
  size_t sandboxQueueMax = 4096;
  // A reap that fails (a process the kill did not end) is retried on the
  // pool after reapRetry, doubling up to reapRetryMax, while the agent runs.
  // After reapFailuresBeforeRefusing failures, the tasks waiting for that
  // executor's replacement fail (REASON_ISOLATION_FAILED) and new ones are
  // refused until it is reaped.
  Duration reapRetry = std::chrono::seconds(1);
  Duration reapRetryMax = std::chrono::seconds(60);
  size_t reapFailuresBeforeRefusing = 3;
  Duration executorHandshakeTimeout = std::chrono::seconds(10);  // connect -> RegisterExecutor
  // Executors run as their framework's user or this one (agent/run_as.h).
  // Empty: no user switch, executors run as the agent's own user (an agent
  // that is not root; in-process tests).
  std::string defaultUser;
  // Command tasks' stdout and stderr: rotated at this size, this many files
  // kept (cli/task_logger.h, through the executor's environment).
  uint64_t taskLogMaxBytes = 10 * 1024 * 1024;
  size_t taskLogFiles = 5;
  // Pulls an image off the loop and calls `done` on the loop, exactly once
  // (the daemon's images::ImagePuller). Unset: the agent runs no
  // filesystem/linux isolator and refuses tasks that name an image.
  using ImageDone = std::function<void(Result<ContainerImage>)>;
  std::function<void(const std::string& reference, ImageDone done)> pullImage;
};

class ExecutorManager {
 public:
  // The loop time one pass of starting ready executors may take (it starts
  // at least one); the rest wait for the loop's next turn.
  static constexpr auto kStartSliceBudget = std::chrono::milliseconds(2);

  struct Callbacks {
    // Persists and forwards one update (update_id set); `persisted` runs (on
    // the loop) when it is durable, with an Error when it was not kept.
    std::function<void(const wire::TaskStatus&, std::function<void(Status)> persisted)> onUpdate;
  };

  ExecutorManager(asio::io_context& io, Launcher& launcher,
                  std::vector<std::unique_ptr<Isolator>>& isolators, CheckpointStore& checkpoints,
                  ExecutorManagerOptions options, Callbacks callbacks);
  ~ExecutorManager();

  // Binds <work-dir>/agent.sock (replacing a stale one) and accepts executors.
  Status listen() { return listener_.listen(); }
  std::string socketPath() const { return listener_.path(); }

  void setAgentId(const std::string& agentId) { agentId_ = agentId; }
  // Where the handlers and isolator calls it runs are timed (the agent's
  // late-tick attribution); none: nothing is timed. Outlives the manager.
  void setLoopSections(AgentSections* sections) {
    sections_ = sections;
    listener_.timeAcceptsAs(&sections->sections(), static_cast<LoopSections::Id>(AgentSection::kExecutorConnect));
  }

  // Re-attaches to the executors of a previous agent run.
  void recover(std::vector<ExecutorCheckpoint> checkpoints);

  // rootAllowed: the master's ACLs let this framework run tasks as root
  // (RunTask.allow_root); see agent/run_as.h for which user runs them.
  void runTask(const wire::FrameworkInfo& framework, wire::TaskInfo task, bool rootAllowed = false);
  void killTask(const wire::KillTask& kill);
  // Answers a RunTask the agent refused (validation) with TASK_ERROR.
  void refuseTask(const std::string& frameworkId, const std::string& taskId, wire::Reason reason,
                  const std::string& why);
  void shutdownFramework(const std::string& frameworkId);

  // Every framework, executor and live task, for RegisterAgent.
  void fillRegistration(wire::RegisterAgent* registration) const;

  // Fills one ExecutorUsage per running executor from the isolators
  // (nothing without isolators: there is no cgroup to measure).
  void collectUsage(wire::UsageReport* report) const;

  // Every executor with its limits, usage, cgroups and tasks, for GET
  // /state (executor_state.cpp).
  void fillState(state::AgentState* out) const;

  // Where a task's files are, for the files API (agent/files_api.h): its
  // container's sandbox while the task runs, or the sandbox it ran in for
  // the last kEndedTasksRemembered tasks that ended in this agent run.
  // `commandExecutor`: its output is <task>.stdout/.stderr
  // (taskOutputFile), else its executor's stdout/stderr.
  struct TaskSandbox {
    std::string container;  // its name (base/files.h containerName)
    std::string sandbox;
    std::string principal;  // FrameworkInfo.principal, set by the master
    bool commandExecutor = false;
  };
  static constexpr size_t kEndedTasksRemembered = 4096;
  std::optional<TaskSandbox> taskSandbox(const std::string& frameworkId, const std::string& taskId) const;
  // Whether the task still runs in that container (a follower at the end of
  // its file asks this at every poll: a map lookup).
  bool taskRunsIn(const std::string& container, const std::string& taskId) const;

  size_t executorCount() const { return containers_.size(); }
  size_t liveTaskCount() const;

  // One pass of the sandbox GC (agent/gc.h) on the sandbox thread: removes
  // the sandboxes under <work-dir>/sandboxes that no container uses and
  // that are older than maxAge; logs what it did, on the loop.
  void collectSandboxes(std::chrono::seconds maxAge);

 private:
  struct Prepared;

  // Lifecycle (executor_manager.cpp).
  Container* find(const std::string& frameworkId, const std::string& executorId);
  Container* byName(const std::string& name, uint64_t generation);
  Container& create(const wire::FrameworkInfo& framework, const wire::ExecutorInfo& executor);
  bool runsTask(const std::string& frameworkId, const std::string& taskId) const;
  // The executor process of `c` (executor_spec.h).
  LaunchSpec launchSpec(const Container& c) const;
  // The launch (executor_launch.cpp).
  void startExecutor(const wire::FrameworkInfo& framework, const wire::ExecutorInfo& executor,
                     wire::TaskInfo task, bool rootAllowed);
  void launch(Container& c);
  void pullImage(Container& c);
  void onPulled(Container& c, Result<ContainerImage> image);
  void onPrepared(Container& c, Prepared prepared);
  void postStarts();
  void startReady();
  void startProcess(Container& c);
  void onStarted(Container& c, const std::string& executable, Result<pid_t> pid);
  bool isolate(Container& c);
  std::function<void(const Limitation&)> limitWatcher(const Container& c);
  void addTask(Container& c, wire::TaskInfo task);
  // The end of a container, one path (executor_end.cpp): endContainer is
  // the one way to end it on purpose; failContainer records a failure the
  // agent decided (container.h's precedence) and ends it.
  void endContainer(Container& c, const std::string& why);
  void failContainer(Container& c, wire::TaskState state, wire::Reason reason, const std::string& why);
  void killProcess(Container& c, const std::string& why);
  void onExit(const std::string& name, uint64_t generation, const ExitInfo& exit);
  void postFinalize(Container& c);
  void finalize(Container& c);
  void reap(Container& c);
  void onReaped(Container& c, const Status& st);
  void failWaitingTasks(Container& c);
  std::string unreapedReason(const Container& c) const;
  void destroy(Container& c);
  // Running containers (executor_manager.cpp).
  void maybeIdle(Container& c);
  void sendShutdown(Container& c);
  void updateLimits(Container& c);
  void checkpoint(Container& c);
  void writeCheckpoint(Container& c);
  // Container::arm, timed as the loop's kContainerTimer section.
  void armTimer(Container& c, Container::Timer which, Duration after, std::function<void(Container&)> fn);
  void armTimer(Container& c, asio::steady_timer& timer, Duration after, std::function<void(Container&)> fn);

  // Updates (executor_manager.cpp).
  wire::TaskStatus agentStatus(const std::string& frameworkId, const std::string& executorId,
                               const std::string& taskId, wire::TaskState state,
                               wire::Reason reason, const std::string& message);
  // Persists and forwards an agent-made update, then applies it to `c`.
  void emit(Container* c, wire::TaskStatus status);
  void applyStatus(Container& c, const wire::TaskStatus& status);
  void acceptExecutorUpdate(Container& c, wire::TaskStatus status);
  // executor_files.cpp: the ended tasks taskSandbox() still finds.
  void rememberEnded(const Container& c, const std::string& taskId);

  // Executors' links (executor_registration.cpp; the socket: executor_link.h).
  ExecutorListener::Callbacks listenerCallbacks();
  std::optional<ExecutorBinding> onRegister(const std::shared_ptr<Connection>& conn,
                                            const wire::RegisterExecutor& m, const std::string& owner);
  std::string registrationRefusal(const Container* c, const wire::RegisterExecutor& m,
                                  const std::string& owner) const;
  void acceptUnacknowledged(Container& c, const wire::RegisterExecutor& m);
  void reattach(Container& c, const wire::RegisterExecutor& m);
  void loseUndelivered(Container& c, const wire::RegisterExecutor& m);
  void resume(Container& c);
  void onExecutorMessage(Container& c, wire::Envelope& e);
  void onLinkClosed(Container& c);
  void sendLaunch(Container& c, ContainerTask& t);
  // task_deadline.cpp: max_duration_s for every executor.
  void armMaxDuration(Container& c, ContainerTask& t);
  // False when the executor has no open link (or the send failed).
  bool sendToExecutor(Container& c, const wire::Envelope& e);
  // Times the caller's scope (nothing without setLoopSections).
  LoopSections::Timer timed(AgentSection section) const;
  LoopSections::Timer timed(IsolatorCall call, size_t isolator) const;

  asio::io_context& io_;
  Launcher& launcher_;
  std::vector<std::unique_ptr<Isolator>>& isolators_;
  CheckpointStore& checkpoints_;
  ExecutorManagerOptions options_;
  Callbacks callbacks_;
  std::string agentId_;
  AgentSections* sections_ = nullptr;
  std::string updatePrefix_;
  uint64_t updateSequence_ = 0;
  uint64_t nextGeneration_ = 1;
  std::map<std::string, std::unique_ptr<Container>> containers_;  // by name
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  // Containers (name, generation) whose sandbox is ready, in order, for
  // startReady(); each container at most once, so at most executorsMax.
  std::deque<std::pair<std::string, uint64_t>> readyToStart_;
  bool startsPosted_ = false;
  // Executor clones on the launcher's thread whose answer has not come back.
  size_t startsUnderWay_ = 0;
  ExecutorListener listener_;
  // (framework, task) -> sandbox of recently ended tasks, oldest first in
  // endedOrder_ (at most kEndedTasksRemembered).
  std::map<std::pair<std::string, std::string>, TaskSandbox> endedTasks_;
  std::deque<std::pair<std::string, std::string>> endedOrder_;
  // One thread, so its jobs run in the order they were submitted: a GC
  // pass never sees a sandbox made after its list of those in use, and a
  // touch of an ended sandbox comes before the next pass.
  WorkerPool sandboxPool_;
  WorkerPool pool_;  // last: destroyed (its workers joined) first
};

// `d` for a log line: "%g s" ("2.5 s").
std::string secondsText(Duration d);

}  // namespace allot
