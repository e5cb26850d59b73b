// Internal to agent/executor_manager*.cpp: the records ExecutorManager keeps
// per container and per task.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/container.h"
#include "agent/executor_manager.h"
#include "agent/run_as.h"
#include "proto/connection.h"

namespace allot {

struct ExecutorManager::Task {
  wire::TaskInfo info;
  std::optional<wire::TaskStatus> latest;
  bool sent = false;     // LaunchTask went to the executor
  bool killing = false;  // KillTask went to the executor
  double graceS = 0;
  std::unique_ptr<asio::steady_timer> killTimer;
  // Why the agent or master asked for the kill (REVOKED, MAX_DURATION...):
  // the terminal TASK_KILLED carries it, whatever the executor says.
  wire::Reason killReason = wire::REASON_KILLED_BY_FRAMEWORK;
  std::unique_ptr<asio::steady_timer> durationTimer;  // max_duration_s (task_deadline.cpp)
};

struct ExecutorManager::Container {
  explicit Container(asio::io_context& io)
      : registerTimer(io), idleTimer(io), shutdownTimer(io), drainTimer(io), reapTimer(io) {}

  std::string name;
  uint64_t generation = 0;
  ContainerId id;
  wire::FrameworkInfo framework;
  wire::ExecutorInfo executor;
  // Its state and, once it ends, why its tasks end (agent/container.h).
  ContainerLifecycle life;
  pid_t pid = 0;
  uint64_t startTime = 0;
  std::string sandbox;
  std::optional<RunAsUser> user;  // none: the agent's own user
  std::string secret;             // ALLOT_EXECUTOR_SECRET, checked at registration
  bool rootAllowed = false;       // RunTask.allow_root, for the tasks in `next`
  std::shared_ptr<Connection> conn;
  std::map<std::string, Task> tasks;  // live tasks by id
  std::vector<wire::TaskInfo> next;   // for the executor that replaces this one
  asio::steady_timer registerTimer;
  asio::steady_timer idleTimer;
  asio::steady_timer shutdownTimer;
  asio::steady_timer drainTimer;
  asio::steady_timer reapTimer;  // the next reap attempt (executor_end.cpp)
  size_t reapFailures = 0;
  std::string reapError;  // the last failed attempt's
  bool checkpointPending = false;
};

}  // namespace allot
