// allot-executor: the built-in command executor (sdk/executor.h).
//
// The agent starts one per framework on a node; every command task of that
// framework runs here as a child in its own process group (inside the
// executor's session, so the agent can kill the whole executor tree), with
// its stdout and stderr in <sandbox>/<task>.stdout and .stderr.
// Each task reports RUNNING, then FINISHED (exit 0), FAILED (exit code or
// signal, REASON_COMMAND_EXITED; REASON_EXEC_FAILED when it could not start)
// or KILLED. Children are supervised through pidfds polled by Asio, never
// waitpid loops. The executor exits on ShutdownExecutor once its tasks are
// gone and their updates acknowledged, or when the agent stays away longer
// than ALLOT_RECOVERY_TIMEOUT_S. A task with a health check is checked
// here (sdk/health_check.h): TCP and HTTP checks in-process, in the
// executor's network namespace (the task's); COMMAND checks started exactly
// as the task's command is (runChild), so they see what the task sees.
// Each change of health is a RUNNING update with `healthy`; past the
// threshold the task is killed (REASON_HEALTH_CHECK_FAILED).
// A task of an image (filesystem/linux) is started inside the image's root
// filesystem, and its COMMAND checks in the task's mount namespace, while
// the executor stays on the node's filesystem (cli/task_root.h).
// In its own PID namespace (namespaces/pid, root tasks) the executor is the namespace's pid 1 and inherits its tasks'
// orphans: it reaps them on SIGCHLD.
#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "base/asio.h"
#include "base/files.h"
#include "base/flags.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "cli/task_logger.h"
#include "cli/task_root.h"
#include "sdk/executor.h"
#include "sdk/health_check.h"

extern char** environ;

namespace {

using namespace allot;

constexpr double kDefaultGraceS = 3;
constexpr size_t kTasksMax = 10000;
constexpr auto kQuiescenceCheck = std::chrono::milliseconds(20);
// Bounds one SIGCHLD's reaping (the rest waits for the next SIGCHLD).
constexpr int kMaxReapsPerSignal = 4096;
// How long an ended task's status waits for its logger to write the last
// output (a process that escaped the task's group may hold the pipes).
constexpr auto kLoggerDrain = std::chrono::seconds(2);

// Everything the child needs, built before fork: after fork only
// async-signal-safe calls are made.
struct ChildPlan {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string workDir;
  std::string stdoutPath;
  std::string stderrPath;
  // The task logger's pipes (cli/task_logger.h); -1: open the paths.
  int stdoutFd = -1;
  int stderrFd = -1;
  // The image's root the child enters (cli/task_root.h); null: the node's
  // filesystem. A check joins its task's mount namespace (mntNsFd).
  TaskRoot* root = nullptr;
  int mntNsFd = -1;
};

void reportStep(int step, void* errorFd) {
  int report[2] = {step, errno};
  (void)!write(*static_cast<int*>(errorFd), report, sizeof report);
  _exit(127);
}

[[noreturn]] void runChild(const ChildPlan& plan, std::vector<char*>& argv,
                           std::vector<char*>& envp, int errorFd) {
  auto fail = [&](int step) { reportStep(step, &errorFd); };
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  int out = plan.stdoutFd >= 0 ? plan.stdoutFd
                               : open(plan.stdoutPath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (out < 0 || dup2(out, 1) < 0) fail(1);
  int err = plan.stderrFd >= 0 ? plan.stderrFd
                               : open(plan.stderrPath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (err < 0 || dup2(err, 2) < 0) fail(1);
  int in = open("/dev/null", O_RDONLY);
  if (in < 0 || dup2(in, 0) < 0) fail(1);
  if (plan.root) enterTaskRoot(*plan.root, plan.mntNsFd, reportStep, &errorFd);
  // The executor's descriptors (its link to the agent, the checks'
  // sockets, other tasks' pidfds) are not the task's: closed at exec.
  syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  if (!plan.workDir.empty() && chdir(plan.workDir.c_str()) != 0) fail(2);
  execvpe(argv[0], argv.data(), envp.data());
  fail(3);
  _exit(127);
}

const char* stepName(int step) {
  if (step >= kTaskRootStepBase) return taskRootStepName(step);
  switch (step) {
    case 1: return "opening the task's stdout/stderr";
    case 2: return "changing into the sandbox";
    default: return "exec";
  }
}

class CommandExecutor final : public Executor {
 public:
  // Only its namespace's pid 1 inherits orphans: anywhere else SIGCHLD
  // stays ignored (no signal, pipe write and waitid per task that ends:
  // the pidfd watch alone finishes a task).
  CommandExecutor(asio::io_context& io, std::optional<TaskRoot> root)
      : io_(io), quiescenceTimer_(io), root_(std::move(root)), sigchld_(io) {
    if (getpid() == 1) {
      sigchld_.add(SIGCHLD);
      reapOrphans();
    }
  }

  void setDriver(ExecutorDriver* driver) { driver_ = driver; }
  int exitCode() const { return exitCode_; }

  void launchTask(ExecutorDriver& d, const wire::TaskInfo& task) override {
    if (children_.count(task.task_id())) return;  // a resent launch
    if (shuttingDown_) return report(task.task_id(), wire::TASK_KILLED, wire::REASON_KILLED_BY_FRAMEWORK, "executor is shutting down");
    if (children_.size() >= kTasksMax) {
      return report(task.task_id(), wire::TASK_FAILED, wire::REASON_EXEC_FAILED,
                    "executor runs its limit of " + std::to_string(kTasksMax) + " tasks");
    }
    const wire::CommandInfo& cmd = task.command();
    if (cmd.shell().empty() && cmd.argv().empty()) {
      return report(task.task_id(), wire::TASK_FAILED, wire::REASON_EXEC_FAILED,
                    "task has no command (neither shell nor argv)");
    }
    auto started = start(task, planFor(task, task.command()));
    if (!started) {
      return report(task.task_id(), wire::TASK_FAILED, wire::REASON_EXEC_FAILED,
                    started.error().describe());
    }
    report(task.task_id(), wire::TASK_RUNNING, wire::REASON_NONE, "");
    startHealthCheck(*children_[task.task_id()]);
  }

  void killTask(ExecutorDriver&, const std::string& taskId, double graceS) override {
    auto it = children_.find(taskId);
    if (it == children_.end()) {
      // Not running here (already ended or never launched): the agent still
      // wants a terminal answer.
      return report(taskId, wire::TASK_KILLED, wire::REASON_KILLED_BY_FRAMEWORK, "task was not running");
    }
    beginKill(*it->second, graceS, wire::REASON_KILLED_BY_FRAMEWORK);
  }

  void shutdown(ExecutorDriver& d, double graceS) override {
    shuttingDown_ = true;
    for (auto& [id, child] : children_) {
      beginKill(*child, d.stopped() ? 0.001 : graceS, wire::REASON_KILLED_BY_FRAMEWORK);
    }
    checkQuiescence();
  }

 private:
  // Starts a task's check commands as the task's own command is started
  // (same environment, sandbox, runChild), with their output in a pipe.
  class TaskCheckProcesses final : public CheckProcesses {
   public:
    TaskCheckProcesses(CommandExecutor& executor, const wire::TaskInfo& task) : executor_(executor), task_(task) {}
    Result<CheckProcess> spawn(const wire::CommandInfo& command) override {
      return executor_.spawnCheck(task_, command);
    }
    siginfo_t reap(const CheckProcess& process) override { return executor_.reapCheck(process.pid); }

   private:
    CommandExecutor& executor_;
    const wire::TaskInfo& task_;
  };

  struct Child {
    wire::TaskInfo task;
    pid_t pid = 0;
    std::unique_ptr<asio::posix::stream_descriptor> pidfd;
    std::unique_ptr<asio::steady_timer> killTimer;
    std::unique_ptr<asio::steady_timer> durationTimer;
    bool killing = false;
    wire::Reason killReason = wire::REASON_NONE;
    pid_t loggerPid = 0;
    std::unique_ptr<asio::posix::stream_descriptor> loggerPidfd;
    std::unique_ptr<asio::steady_timer> drainTimer;
    std::string killMessage;
    // Declared in this order so the checker goes before its processes.
    std::unique_ptr<TaskCheckProcesses> checkProcesses;
    std::unique_ptr<HealthChecker> health;
  };

  void startHealthCheck(Child& child) {
    const wire::HealthCheck& check = child.task.health_check();
    if (check.type() == wire::HealthCheck::NONE) return;
    child.checkProcesses = std::make_unique<TaskCheckProcesses>(*this, child.task);
    auto probe = makeProbe(io_, check, child.checkProcesses.get());
    if (!probe) return;
    std::string taskId = child.task.task_id();
    child.health = std::make_unique<HealthChecker>(
        io_, HealthCheckSettings::of(check), std::move(probe),
        [this, taskId](const HealthVerdict& v) { reportHealth(taskId, v); },
        [this, taskId](const std::string& output) { onUnhealthy(taskId, output); });
    child.health->start();
  }

  void reportHealth(const std::string& taskId, const HealthVerdict& verdict) {
    wire::TaskStatus s;
    s.set_task_id(taskId);
    s.set_state(wire::TASK_RUNNING);
    s.set_healthy(verdict.healthy);
    s.set_message(verdict.output);
    if (auto st = driver_->sendStatus(s); !st) LOG_ERROR("status of " << taskId << ": " << st.error().describe());
  }

  void onUnhealthy(const std::string& taskId, const std::string& output) {
    auto it = children_.find(taskId);
    if (it == children_.end() || it->second->killing) return;
    Child& child = *it->second;
    uint32_t failures = HealthCheckSettings::of(child.task.health_check()).failuresMax;
    LOG_INFO("task " << taskId << ": health check failed " << failures << " times; killing it");
    beginKill(child, 0, wire::REASON_HEALTH_CHECK_FAILED);
    child.killMessage = "health check failed " + std::to_string(failures) + " times in a row: " + output;
  }

  Result<CheckProcess> spawnCheck(const wire::TaskInfo& task, const wire::CommandInfo& command) {
    ChildPlan plan = planFor(task, command);
    UniqueFd mntNs;
    if (root_) {
      auto it = children_.find(task.task_id());
      if (it == children_.end()) return Error{"task " + task.task_id() + " is not running"};
      std::string path = "/proc/" + std::to_string(it->second->pid) + "/ns/mnt";
      mntNs = UniqueFd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!mntNs) return Error::fromErrno("open " + path);
      plan.mntNsFd = mntNs.get();
    }
    int pipeFds[2];
    if (pipe2(pipeFds, O_CLOEXEC) != 0) return Error::fromErrno("pipe2");
    UniqueFd readEnd(pipeFds[0]), writeEnd(pipeFds[1]);
    // Only the reader's end is non-blocking: the command writes as to a file.
    if (fcntl(readEnd.get(), F_SETFL, O_NONBLOCK) != 0) return Error::fromErrno("fcntl O_NONBLOCK");
    plan.stdoutFd = writeEnd.get();
    plan.stderrFd = writeEnd.get();
    auto forked = forkPlan(plan, "the health check of task " + task.task_id());
    if (!forked) return forked.error();
    checkPids_.insert(forked->first);
    return CheckProcess{forked->first, std::move(forked->second), std::move(readEnd)};
  }

  // A check's status: from reapOrphans when it was first (pid 1), else
  // waited for here (the check has exited or was just killed).
  siginfo_t reapCheck(pid_t pid) {
    siginfo_t info{};
    if (auto it = reapedChecks_.find(pid); it != reapedChecks_.end()) {
      info = it->second;
      reapedChecks_.erase(it);
      return info;
    }
    checkPids_.erase(pid);
    while (waitid(P_PID, pid, &info, WEXITED) != 0 && errno == EINTR) {
    }
    return info;
  }

  // `cmd`: the task's command, or one of its health check.
  ChildPlan planFor(const wire::TaskInfo& task, const wire::CommandInfo& cmd) {
    ChildPlan plan;
    if (!cmd.shell().empty()) {
      plan.argv = {"/bin/sh", "-c", cmd.shell()};
    } else {
      plan.argv.assign(cmd.argv().begin(), cmd.argv().end());
    }
    std::map<std::string, std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      auto eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : cmd.environment()) env[k] = v;
    env["ALLOT_TASK_ID"] = task.task_id();
    for (const auto& [k, v] : env) plan.env.push_back(k + "=" + v);
    plan.workDir = driver_->options().sandboxDir;
    std::string dir = (plan.workDir.empty() ? std::string(".") : plan.workDir) + "/";
    if (root_) {
      plan.root = &*root_;
      plan.workDir.clear();  // the root's working directory
    }
    plan.stdoutPath = dir + taskOutputFile(task.task_id(), "stdout");
    plan.stderrPath = dir + taskOutputFile(task.task_id(), "stderr");
    return plan;
  }

  Result<pid_t> start(const wire::TaskInfo& task, ChildPlan plan) {
    auto logger = startTaskLogger(plan.stdoutPath, plan.stderrPath, logLimits_);
    if (!logger) return Error{"opening the task's stdout/stderr: " + logger.error().describe()};
    plan.stdoutFd = logger->taskStdout.get();
    plan.stderrFd = logger->taskStderr.get();
    auto pid = startTask(task, plan);
    // The task holds the write ends now (or never will): the logger ends at
    // end of file once the task's processes are gone.
    logger->taskStdout.reset();
    logger->taskStderr.reset();
    if (!pid) {
      siginfo_t info{};
      waitid(P_PIDFD, logger->pidfd.get(), &info, WEXITED);
      return pid.error();
    }
    Child& child = *children_.at(task.task_id());
    child.loggerPid = logger->pid;
    child.loggerPidfd = std::make_unique<asio::posix::stream_descriptor>(io_, logger->pidfd.release());
    return pid;
  }

  // Forks a child that runs the plan and waits until it has exec'd; a
  // failure before the exec comes back as an Error (the child reaped).
  Result<std::pair<pid_t, UniqueFd>> forkPlan(const ChildPlan& plan, const std::string& what) {
    std::vector<char*> argv, envp;
    for (const auto& a : plan.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : plan.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    int pipeFds[2];
    if (pipe2(pipeFds, O_CLOEXEC) != 0) return Error::fromErrno("pipe2");
    UniqueFd readEnd(pipeFds[0]), writeEnd(pipeFds[1]);
    pid_t pid = fork();
    if (pid < 0) return Error::fromErrno("fork");
    if (pid == 0) runChild(plan, argv, envp, writeEnd.get());
    setpgid(pid, pid);  // also in the parent: no window where a kill misses the group
    writeEnd.reset();
    int report[2] = {0, 0};
    ssize_t n;
    do {
      n = read(readEnd.get(), report, sizeof report);
    } while (n < 0 && errno == EINTR);
    UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    if (!pidfd || n == static_cast<ssize_t>(sizeof report)) {
      Error e = !pidfd ? Error::fromErrno("pidfd_open for " + what)
                       : Error{std::string(stepName(report[0])) + " of " + plan.argv[0] + " failed", report[1]};
      kill(-pid, SIGKILL);
      siginfo_t info{};
      waitid(P_PID, pid, &info, WEXITED);
      return e;
    }
    return std::make_pair(pid, std::move(pidfd));
  }

  Result<pid_t> startTask(const wire::TaskInfo& task, const ChildPlan& plan) {
    auto forked = forkPlan(plan, "task " + task.task_id());
    if (!forked) return forked.error();
    pid_t pid = forked->first;
    auto child = std::make_unique<Child>();
    child->task = task;
    child->pid = pid;
    child->pidfd = std::make_unique<asio::posix::stream_descriptor>(io_, forked->second.release());
    watchExit(*child);
    armMaxDuration(*child);
    taskOfPid_[pid] = task.task_id();
    children_[task.task_id()] = std::move(child);
    return pid;
  }

  void watchExit(Child& child) {
    std::string taskId = child.task.task_id();
    child.pidfd->async_wait(asio::posix::stream_descriptor::wait_read,
                            [this, taskId](const boost::system::error_code& ec) {
                              if (!ec) onExit(taskId);
                            });
  }

  void armMaxDuration(Child& child) {
    if (!(child.task.max_duration_s() > 0)) return;
    child.durationTimer = std::make_unique<asio::steady_timer>(io_);
    child.durationTimer->expires_after(secondsToDuration(child.task.max_duration_s()));
    std::string taskId = child.task.task_id();
    child.durationTimer->async_wait([this, taskId](const boost::system::error_code& ec) {
      auto it = children_.find(taskId);
      if (ec || it == children_.end()) return;
      beginKill(*it->second, 0, wire::REASON_MAX_DURATION);
    });
  }

  void beginKill(Child& child, double graceS, wire::Reason reason) {
    if (child.killing && graceS > 0) return;
    child.killing = true;
    child.killReason = reason;
    if (child.health) child.health->stop();  // no verdict about a task being killed
    if (graceS <= 0) graceS = child.task.kill_grace_s() > 0 ? child.task.kill_grace_s() : kDefaultGraceS;
    kill(-child.pid, SIGTERM);
    child.killTimer = std::make_unique<asio::steady_timer>(io_);
    child.killTimer->expires_after(secondsToDuration(graceS));
    pid_t pid = child.pid;
    std::string taskId = child.task.task_id();
    child.killTimer->async_wait([this, pid, taskId](const boost::system::error_code& ec) {
      if (!ec && children_.count(taskId)) kill(-pid, SIGKILL);
    });
  }

  void onExit(const std::string& taskId) {
    auto it = children_.find(taskId);
    if (it == children_.end()) return;
    Child& child = *it->second;
    siginfo_t info{};
    int waited = waitid(P_PIDFD, child.pidfd->native_handle(), &info, WEXITED | WNOHANG);
    // A readiness wait may end before the task exits (Asio's reactor can
    // wake a wait spuriously): a task still running is watched again.
    if (waited == 0 && info.si_pid == 0) return watchExit(child);
    if (waited != 0) LOG_WARNING("waitid for task " << taskId << ": " << std::strerror(errno));
    kill(-child.pid, SIGKILL);  // leftovers of the task's process group
    if (child.health) child.health->stop();  // no verdicts while its logger drains
    wire::TaskStatus s;
    s.set_task_id(taskId);
    if (info.si_code == CLD_EXITED) {
      s.set_exit_code(info.si_status);
    } else {
      s.set_signal(info.si_status);
    }
    if (child.health && child.health->healthy()) s.set_healthy(*child.health->healthy());
    if (child.killing) {
      s.set_state(wire::TASK_KILLED);
      s.set_reason(child.killReason);
      s.set_message(child.killReason == wire::REASON_MAX_DURATION ? "task exceeded its max_duration_s"
                    : !child.killMessage.empty()                  ? child.killMessage
                                                                  : "task killed");
    } else if (info.si_code == CLD_EXITED && info.si_status == 0) {
      s.set_state(wire::TASK_FINISHED);
      s.set_reason(wire::REASON_COMMAND_EXITED);
      s.set_message("command exited with status 0");
    } else {
      s.set_state(wire::TASK_FAILED);
      s.set_reason(wire::REASON_COMMAND_EXITED);
      s.set_message(info.si_code == CLD_EXITED
                        ? "command exited with status " + std::to_string(info.si_status)
                        : "command killed by signal " + std::to_string(info.si_status));
    }
    afterLogger(child, std::move(s));
  }

  // The task's status goes out once its logger wrote everything (or after
  // kLoggerDrain), so a reader who sees the task end also sees its output.
  void afterLogger(Child& child, wire::TaskStatus s) {
    if (!child.loggerPidfd) return sendFinal(std::move(s));
    child.drainTimer = std::make_unique<asio::steady_timer>(io_);
    child.drainTimer->expires_after(kLoggerDrain);
    auto done = std::make_shared<bool>(false);
    auto finish = [this, done, taskId = s.task_id(), s](const boost::system::error_code& ec) {
      if (ec == asio::error::operation_aborted || *done) return;
      *done = true;
      auto it = children_.find(taskId);
      if (it == children_.end()) return;
      Child& c = *it->second;
      siginfo_t info{};
      // Drained: reap it; still running: it keeps draining, the
      // executor's cgroup ends it with the container.
      if (waitid(P_PIDFD, c.loggerPidfd->native_handle(), &info, WEXITED | WNOHANG) == 0 && info.si_pid == 0) {
        LOG_WARNING("task " << taskId << ": its output is still open after the task ended");
      }
      sendFinal(s);
    };
    child.drainTimer->async_wait(finish);
    child.loggerPidfd->async_wait(asio::posix::stream_descriptor::wait_read, finish);
  }

  void sendFinal(wire::TaskStatus s) {
    auto it = children_.find(s.task_id());
    if (it == children_.end()) return;
    taskOfPid_.erase(it->second->pid);
    children_.erase(it);
    if (auto st = driver_->sendStatus(s); !st) LOG_ERROR("status of " << s.task_id() << ": " << st.error().describe());
    checkQuiescence();
  }

  void report(const std::string& taskId, wire::TaskState state, wire::Reason reason,
              const std::string& message) {
    wire::TaskStatus s;
    s.set_task_id(taskId);
    s.set_state(state);
    s.set_reason(reason);
    s.set_message(message);
    if (auto st = driver_->sendStatus(s); !st) LOG_ERROR("status of " << taskId << ": " << st.error().describe());
  }

  // Zombies that are no task's (orphans re-parented to the executor as its
  // namespace's pid 1) are reaped here; a task found dead first is
  // finished through onExit, as its pidfd watch would have. Peeking with
  // WNOWAIT leaves a task's status to onExit.
  void reapOrphans() {
    sigchld_.async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;
      for (int reaped = 0; reaped < kMaxReapsPerSignal; ++reaped) {
        siginfo_t info{};
        if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) break;
        if (auto it = taskOfPid_.find(info.si_pid); it != taskOfPid_.end()) {
          std::string taskId = it->second;
          onExit(taskId);
          continue;
        }
        siginfo_t status{};
        waitid(P_PID, info.si_pid, &status, WEXITED | WNOHANG);
        if (checkPids_.erase(info.si_pid) && reapedChecks_.size() < kTasksMax) {
          reapedChecks_[info.si_pid] = status;
        }
      }
      reapOrphans();
    });
  }

  // After a shutdown: exit once no child is left and the agent has every
  // update (or is gone for good).
  void checkQuiescence() {
    if (!shuttingDown_) return;
    if (children_.empty() && (driver_->quiescent() || driver_->stopped())) {
      driver_->stop();
      quiescenceTimer_.expires_after(std::chrono::milliseconds(50));
      quiescenceTimer_.async_wait([this](const boost::system::error_code&) { io_.stop(); });
      return;
    }
    quiescenceTimer_.expires_after(kQuiescenceCheck);
    quiescenceTimer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) checkQuiescence();
    });
  }

  asio::io_context& io_;
  asio::steady_timer quiescenceTimer_;
  ExecutorDriver* driver_ = nullptr;
  TaskLogLimits logLimits_ = taskLogLimitsFromEnv();
  std::optional<TaskRoot> root_;
  std::map<std::string, std::unique_ptr<Child>> children_;
  std::map<pid_t, std::string> taskOfPid_;  // children_'s pids
  // Health check commands running (at most one per task), and those that
  // reapOrphans reaped before their probe asked.
  std::set<pid_t> checkPids_;
  std::map<pid_t, siginfo_t> reapedChecks_;
  asio::signal_set sigchld_;
  bool shuttingDown_ = false;
  int exitCode_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  setLogProgram("allot-executor");
  Flags flags("allot-executor",
              "The built-in command executor. Started by allot-agent with the ALLOT_* "
              "environment of proto/FORMAT.md; runs each task's command in the sandbox.");
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  signal(SIGPIPE, SIG_IGN);
  auto options = ExecutorOptions::fromEnvironment();
  if (!options) {
    LOG_ERROR("cannot start: " << options.error().describe()
                               << " (allot-executor is started by allot-agent)");
    return 2;
  }
  auto root = taskRootFromEnvironment();
  if (!root) {
    LOG_ERROR("cannot start: " << root.error().describe());
    return 2;
  }
  asio::io_context io;
  CommandExecutor executor(io, std::move(*root));
  ExecutorDriver driver(io, executor, *options);
  executor.setDriver(&driver);
  if (auto st = driver.start(); !st) {
    LOG_ERROR("cannot start: " << st.error().describe());
    return 2;
  }
  io.run();
  return executor.exitCode();
}
