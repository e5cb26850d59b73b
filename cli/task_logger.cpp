#include "cli/task_logger.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "base/rotating_log.h"

namespace allot {

namespace {

uint64_t envNumber(const char* name, uint64_t fallback, uint64_t low, uint64_t high) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < low || v > high) return fallback;
  return v;
}

struct Pipe {
  UniqueFd read, write;
};

Result<Pipe> makePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Error::fromErrno("pipe2");
  // Best effort: an unprivileged user gets up to fs.pipe-max-size.
  (void)fcntl(fds[1], F_SETPIPE_SZ, kTaskPipeBytes);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// In the forked logger: async-signal-safe calls only.
[[noreturn]] void runLogger(int outFd, int errFd, RotatingLog& out, RotatingLog& err) {
  prctl(PR_SET_NAME, "allot-logger", 0, 0, 0);
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Nothing of the executor's (its link to the agent, its event loop) stays
  // open here; 0..2 are the executor's own stdout/stderr for errors.
  // Above 4 first, so that neither dup2 overwrites the other pipe.
  int o = fcntl(outFd, F_DUPFD, 10), e = fcntl(errFd, F_DUPFD, 10);
  if (o < 0 || e < 0 || dup2(o, 3) < 0 || dup2(e, 4) < 0) _exit(1);
  syscall(SYS_close_range, 5U, ~0U, 0U);
  // A file it cannot open (the task put something in its way) is retried at
  // every write; the pipes are drained meanwhile, so the task never blocks.
  (void)out.open();
  (void)err.open();
  _exit(pumpTaskOutput(3, 4, out, err));
}

}  // namespace

TaskLogLimits taskLogLimitsFromEnv() {
  TaskLogLimits l;
  l.maxBytes = envNumber("ALLOT_TASK_LOG_MAX_BYTES", kTaskLogMaxBytesDefault, kLogBytesMin, UINT64_MAX / 2);
  l.files = envNumber("ALLOT_TASK_LOG_FILES", kTaskLogFilesDefault, kLogFilesMin, kLogFilesMax);
  return l;
}

Result<TaskLogger> startTaskLogger(const std::string& stdoutPath, const std::string& stderrPath,
                                   TaskLogLimits limits) {
  // Built before fork: the child allocates nothing.
  RotatingLog out(stdoutPath, limits.maxBytes, limits.files);
  RotatingLog err(stderrPath, limits.maxBytes, limits.files);
  // Opened here to report a failure as the task's; the logger reopens them.
  if (int e = out.open(); e != 0) return Error{"open " + stdoutPath, e};
  if (int e = err.open(); e != 0) return Error{"open " + stderrPath, e};
  out.close();
  err.close();
  auto outPipe = makePipe();
  if (!outPipe) return outPipe.error();
  auto errPipe = makePipe();
  if (!errPipe) return errPipe.error();
  pid_t pid = fork();
  if (pid < 0) return Error::fromErrno("fork the task logger");
  if (pid == 0) runLogger(outPipe->read.get(), errPipe->read.get(), out, err);
  setpgid(pid, pid);
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    Error e = Error::fromErrno("pidfd_open for the task logger");
    kill(pid, SIGKILL);
    (void)waitpid(pid, nullptr, 0);
    return e;
  }
  TaskLogger logger;
  logger.pid = pid;
  logger.pidfd = UniqueFd(pidfd);
  logger.taskStdout = std::move(outPipe->write);
  logger.taskStderr = std::move(errPipe->write);
  return logger;
}

}  // namespace allot
