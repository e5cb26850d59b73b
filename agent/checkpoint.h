// CheckpointStore: what the agent launched, kept under <work-dir>/meta so a
// restarted agent can re-attach to its executors (SPEC section 5).
//
//   meta/agent_id                   the id the master gave this agent
//   meta/executors/<container>      one file per live executor
//
// Every write is atomic (temp file, fdatasync, rename): a crash leaves the
// old or the new version, never a mix. Thread: the agent's loop thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "proto/allot.pb.h"

namespace allot {

struct ExecutorCheckpoint {
  std::string container;  // file-safe "<framework>.<executor>" name
  wire::FrameworkInfo framework;
  wire::ExecutorInfo executor;
  pid_t pid = 0;
  uint64_t startTime = 0;  // /proc/<pid>/stat field 22: guards against pid reuse
  std::string sandbox;
  std::vector<wire::TaskInfo> tasks;                  // live (non-terminal) tasks
  std::map<std::string, wire::TaskStatus> latest;     // by task id
};

class CheckpointStore {
 public:
  explicit CheckpointStore(std::string metaDir);

  // Creates meta/ and meta/executors/.
  Status init();

  Status saveAgentId(const std::string& agentId);
  // Empty when the agent never registered.
  Result<std::string> loadAgentId() const;

  Status saveExecutor(const ExecutorCheckpoint& checkpoint);
  Status removeExecutor(const std::string& container);
  // Every readable executor checkpoint; unreadable ones are logged, renamed
  // to *.corrupt and skipped.
  std::vector<ExecutorCheckpoint> loadExecutors() const;

 private:
  std::string executorPath(const std::string& container) const;

  std::string dir_;
};

// Serialization, exposed for tests.
std::string encodeCheckpoint(const ExecutorCheckpoint& checkpoint);
Result<ExecutorCheckpoint> decodeCheckpoint(const std::string& bytes);

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot);
// an Error when the process does not exist.
Result<uint64_t> processStartTime(pid_t pid);

}  // namespace allot
