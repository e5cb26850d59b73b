// allot-execute --follow: each followed task's stdout and stderr printed as
// they come, every line prefixed with "[task id] " (stdout to stdout,
// stderr to stderr), through the agent's files API (cli/task_output.h).
// One thread per stream (blocking HTTP), at most kFollowedTasksMax tasks.
//
// Thread: start(), ended() and finish() on the caller's (the scheduler's
// loop) thread; the followers print from their own threads, a whole line
// per stdio call.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/task_output.h"

namespace allot {

class OutputFollowers {
 public:
  static constexpr size_t kFollowedTasksMax = 32;

  explicit OutputFollowers(http::ClientTls tls) : tls_(std::move(tls)) {}
  ~OutputFollowers();

  // Starts following a running task; false past the limit.
  bool start(const std::string& frameworkId, const std::string& taskId, const HostPort& agent);
  // The task reached a terminal state: its followers stop after its last output.
  void ended(const std::string& taskId);
  // Waits up to `max` for every follower to print its task's last output.
  // False when some did not (their threads are left running).
  bool finish(std::chrono::milliseconds max);

 private:
  void run(TaskOutput where, std::shared_ptr<std::atomic<bool>> ended);

  http::ClientTls tls_;
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> tasks_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable done_;
  size_t running_ = 0;  // guarded by mutex_
};

}  // namespace allot
