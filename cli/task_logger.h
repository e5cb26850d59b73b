// The command executor's task logger: a process per task that reads the
// task's stdout and stderr from pipes into RotatingLogs (base/rotating_log.h)
// <sandbox>/<task>.stdout and .stderr, so a task writing without end keeps
// at most files * maxBytes of each.
//
// It is forked from the executor (no exec: nothing to find on a path, it
// works in any mount namespace) and lives in the executor's cgroup: its
// memory and the files it writes are the container's, the cgroup's kill
// reaps it with the executor, and it outlives an agent restart as the
// executor does. Its own process group, so signals to the task's group
// leave it to drain the pipes: it ends at end of file on both, once the
// task and everything holding its pipes are gone. The pipes are enlarged
// (kTaskPipeBytes) so a rotation, a rename and an open, never makes the
// task wait.
//
// Limits come from the agent (--task-log-max, --task-log-files) through
// ALLOT_TASK_LOG_MAX_BYTES and ALLOT_TASK_LOG_FILES; without them the
// defaults below.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace allot {

inline constexpr uint64_t kTaskLogMaxBytesDefault = 10 * 1024 * 1024;
inline constexpr size_t kTaskLogFilesDefault = 5;
inline constexpr int kTaskPipeBytes = 1024 * 1024;

struct TaskLogLimits {
  uint64_t maxBytes = kTaskLogMaxBytesDefault;
  size_t files = kTaskLogFilesDefault;
};

// From the environment; out-of-range values fall back to the defaults.
TaskLogLimits taskLogLimitsFromEnv();

struct TaskLogger {
  pid_t pid = 0;
  UniqueFd pidfd;
  UniqueFd taskStdout;  // the pipes' write ends, for the task
  UniqueFd taskStderr;
};

// Forks the logger. The caller gives the write ends to the task (dup2 onto
// 1 and 2) and closes its own copies, then waits for the pidfd.
Result<TaskLogger> startTaskLogger(const std::string& stdoutPath, const std::string& stderrPath,
                                   TaskLogLimits limits);

}  // namespace allot
