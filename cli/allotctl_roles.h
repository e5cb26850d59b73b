// allotctl's role commands, over the master's /roles endpoints
// (master/http_api.h):
//   allotctl roles                       GET /roles as a table (--json: as is)
//   allotctl role weight ROLE W          POST /api/v1/roles?role=ROLE&weight=W
//   allotctl role quota ROLE RESOURCES   POST /api/v1/roles?role=ROLE&quota=RES
//                                        ("none" removes the quota)
// Checks what it can before asking (weight a number in (0, 1e6], resources
// parse, name <= 64 bytes); the master checks again and answers once the
// change is stored (ZooKeeper or --work-dir; docs/decisions.md). The table
// shows which roles have run-time settings (SET: run-time or flags) and,
// on its last line, where they are stored; --json has run_time and store.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "http/client.h"

namespace allot {

// allotctl's exit codes (cli/allotctl.cpp has the same meaning).
enum class CtlExit : int { kOk = 0, kUsage = 2, kUnreachable = 3, kNotFound = 4, kRefused = 5 };

using CtlCall =
    std::function<Result<http::ClientResponse>(const std::string& method, const std::string& target)>;

// Whether args[0] is a role command ("roles" or "role").
bool isRoleCommand(const std::string& cmd);
// Runs one; messages go to stdout/stderr.
CtlExit runRoleCommand(const CtlCall& call, const std::vector<std::string>& args, bool json);

}  // namespace allot
