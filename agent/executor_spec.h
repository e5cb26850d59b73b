// What an executor is and how its process starts, as pure functions of the
// task, the container and the agent's site: the executor a task runs in
// (its own, or the framework's built-in command executor) and the
// LaunchSpec its container's process starts with (proto/FORMAT.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/container.h"
#include "base/clock.h"
#include "launcher/launcher.h"
#include "proto/allot.pb.h"
#include "proto/task_state.h"

namespace allot {

// What the agent tells every executor it starts.
struct ExecutorSite {
  std::string executorPath;  // the built-in allot-executor
  std::string socketPath;    // where executors register (<work-dir>/agent.sock)
  std::string agentId;
  std::string workDir;       // a root task still sees it (the socket is there)
  Duration recoveryTimeout{};
  // Command tasks' output rotation (cli/task_logger.h): the size a file
  // is rotated at, and how many are kept.
  uint64_t taskLogMaxBytes = 0;
  size_t taskLogFiles = 0;
};

// The built-in command executor: an ExecutorInfo without a command.
bool isBuiltinExecutor(const wire::ExecutorInfo& e);

// The executor `task` runs in: its own ExecutorInfo, or the framework's
// built-in command executor (one per run-as user; `defaultUser` is the
// agent's --default-user).
wire::ExecutorInfo executorFor(const wire::FrameworkInfo& framework, const wire::TaskInfo& task,
                               const std::string& defaultUser);

// A command task of an image as its executor runs it: without a command,
// the image's Entrypoint and Cmd (Entrypoint + Cmd, or Cmd alone); the
// image's Env under the task's own environment. An Error when neither
// gives a command.
Result<wire::TaskInfo> withImageConfig(wire::TaskInfo task, const ContainerImage& image);

// The built-in executor of an image builds each task's root (mount,
// pivot_root, setns), which a seccomp filter forbids: the filter moves
// from the executor to its tasks (ALLOT_TASK_SECCOMP, hex), installed once
// they are inside their root (cli/task_root.h).
void moveSeccompToTasks(LaunchSpec& spec);

// What the container's executor process starts with: its command,
// environment, user, sandbox and output files; the isolators add their
// part to `setup` in prepare().
LaunchSpec executorLaunchSpec(const Container& c, const ExecutorSite& site);

}  // namespace allot
