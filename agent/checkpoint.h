// CheckpointStore: what the agent launched, kept under <work-dir>/meta so a
// restarted agent can re-attach to its executors (SPEC section 5).
//
//   meta/agent_id                   the id the master gave this agent
//   meta/agent_secret               the secret that came with it (0600)
//   meta/executors/<container>.0|.1 two slots per live executor, named by
//                                   containerName() (base/files.h)
//
// Executor checkpoints alternate between two slot files, each overwritten
// in place and carrying a sequence number and its own length: a write torn
// by a crash leaves the other slot, one version older, and load() takes
// the newest slot that is whole. No file is created per write (creating
// and deleting inodes is what costs on a journaling file system). They are
// written by one background thread in the order asked for, off the loop,
// and not fsync'd: they only matter to executors that outlive the agent,
// and none outlives a crash of the node. A checkpoint lost with a crashed
// agent is harmless: recovery trusts what a reconnecting executor reports.
// The agent id is written synchronously (temp file, fsync, rename).
// Thread: methods on the agent's loop thread.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "proto/allot.pb.h"

namespace allot {

struct ExecutorCheckpoint {
  std::string container;  // containerName(framework, executor), base/files.h
  wire::FrameworkInfo framework;
  wire::ExecutorInfo executor;
  pid_t pid = 0;
  uint64_t startTime = 0;  // /proc/<pid>/stat field 22: guards against pid reuse
  uint64_t sequence = 0;   // set by the store's writer: newer slots win
  std::string sandbox;
  std::string secret;  // the executor's ALLOT_EXECUTOR_SECRET (hex; "" in old checkpoints)
  // The image layers its root stands on (64 hex each, bottom first; none
  // without an image): held in the layer store again after a restart.
  std::vector<std::string> imageLayers;
  std::vector<wire::TaskInfo> tasks;                  // live (non-terminal) tasks
  std::map<std::string, wire::TaskStatus> latest;     // by task id
};

// Named limit on queued background writes; past it saveExecutor() writes
// synchronously (back-pressure instead of unbounded memory).
inline constexpr size_t kCheckpointQueueMax = 4096;
// Layers read back from one checkpoint (an image has at most
// images::kImageLayersMax).
inline constexpr size_t kCheckpointLayersMax = 128;

class CheckpointStore {
 public:
  explicit CheckpointStore(std::string metaDir);
  ~CheckpointStore();  // finishes every queued write

  // Creates meta/ and meta/executors/ and starts the writer thread.
  Status init();
  // Waits until every queued write is on disk (for tests and shutdown).
  void flush();

  Status saveAgentId(const std::string& agentId);
  // Empty when the agent never registered.
  Result<std::string> loadAgentId() const;
  // The secret the master handed out with the id (meta/agent_secret, mode
  // 0600): presented when re-registering that id over a plaintext link.
  Status saveAgentSecret(const std::string& secret);
  Result<std::string> loadAgentSecret() const;

  Status saveExecutor(const ExecutorCheckpoint& checkpoint);
  Status removeExecutor(const std::string& container);
  // The newest whole slot of every executor; executors with no readable
  // slot are logged, their files renamed to *.corrupt and skipped.
  std::vector<ExecutorCheckpoint> loadExecutors();

 private:
  struct Job {
    std::string container;
    std::optional<ExecutorCheckpoint> checkpoint;  // empty: remove the executor
  };
  std::string executorPath(const std::string& container) const;
  std::string adoptName(const std::string& found, const ExecutorCheckpoint& c,
                        const std::vector<std::string>& paths);
  void enqueue(Job job);
  void writerLoop();
  void perform(Job& job);

  std::string dir_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Job> jobs_;
  std::map<std::string, uint64_t> nextSequence_;  // by container
  bool busy_ = false;
  bool stopping_ = false;
  std::thread writer_;
};

// Serialization, exposed for tests.
std::string encodeCheckpoint(const ExecutorCheckpoint& checkpoint);
Result<ExecutorCheckpoint> decodeCheckpoint(const std::string& bytes);

}  // namespace allot
