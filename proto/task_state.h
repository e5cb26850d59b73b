// Task-state helpers shared by every side of the protocol.
#pragma once

#include "proto/allot.pb.h"

namespace allot {

// The executor id of the framework's built-in command executor, as the
// agent names it and reports it in RegisterAgent and every TaskStatus.
inline constexpr const char* kCommandExecutorId = "allot-command-executor";

// FINISHED, FAILED, KILLED, LOST and ERROR end a task; nothing follows them.
inline bool isTerminal(wire::TaskState state) {
  return state == wire::TASK_FINISHED || state == wire::TASK_FAILED ||
         state == wire::TASK_KILLED || state == wire::TASK_LOST || state == wire::TASK_ERROR;
}

}  // namespace allot
