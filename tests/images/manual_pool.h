// A WorkerPool (base/worker_pool.h) whose jobs run only when the test says,
// on the test's thread and in the order it says: an order the real workers
// may take by chance, made certain. Results come back on the loop as the
// real pool's do (the test then runs the loop).
#pragma once

#include <functional>
#include <vector>

#include "base/worker_pool.h"

namespace allot::testing {

class ManualPool final : public WorkerPool {
 public:
  // One worker, never handed a job (enqueue below keeps them).
  explicit ManualPool(asio::io_context& io) : WorkerPool(io, {.threads = 1}) {}

  size_t waiting() const { return jobs_.size(); }
  // Runs the jobs queued now, the newest first; jobs they queue wait.
  void runNewestFirst() {
    std::vector<std::function<void()>> jobs = std::move(jobs_);
    jobs_.clear();
    for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) (*it)();
  }

 protected:
  Status enqueue(std::function<void()> job) override {
    jobs_.push_back(std::move(job));
    return okStatus();
  }

 private:
  std::vector<std::function<void()>> jobs_;
};

}  // namespace allot::testing
