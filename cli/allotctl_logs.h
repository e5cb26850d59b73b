// allotctl logs TASK [--stderr] [-f|--follow] [--tail N] [--framework ID]:
// a task's stdout (or stderr) from its agent's files API
// (agent/files_api.h). The task and its agent's HTTP address come from the
// master's /state (the leader's, with --master zk://...); the agent is then
// asked directly with the same TLS files (its certificate must have role
// `agent`). --tail N prints the last N lines (read as the file's last
// N * kTailLineBytes bytes, at most a read's limit); -f then prints what
// the task writes until the task ends, across rotations and the agent's
// periodic ends of a follow.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/allotctl_roles.h"
#include "http/client.h"

namespace allot {

inline constexpr size_t kTailLineBytes = 256;

struct LogsRequest {
  std::string task;
  std::string framework;  // empty: the task id is unique among the master's tasks
  bool stderrStream = false;
  bool follow = false;
  int64_t tail = -1;      // lines; < 0: everything
  double timeoutS = 10;
  http::ClientTls agentTls;  // the client's TLS context, serverRole "agent"
};

// "logs TASK [-f]": fills the request from the positional arguments.
// False (with a message on stderr) on a bad command line.
bool parseLogsArgs(const std::vector<std::string>& args, LogsRequest* request);

// Prints the task's output to stdout; errors to stderr.
CtlExit runLogs(const CtlCall& master, const LogsRequest& request);

}  // namespace allot
