// WorkerPool: a few threads for blocking work (waiting for a cgroup to
// empty, rmdir retried on EBUSY, walking a sandbox for its size) so that
// the daemon's loop never waits for the kernel. Each job runs on a worker;
// its result comes back on the loop (asio::post to the io_context).
//
//   WorkerPool pool(io, {.threads = 2, .queueMax = 1024});
//   pool.submit<Status>([dir] { return removeSlowly(dir); },
//                       [](Status st) { ... on the loop ... });
//
// Contract: a job must not touch loop state (it runs concurrently with the
// loop); its result is delivered exactly once, on the loop, unless the pool
// is destroyed first (then pending results are dropped, running jobs are
// waited for). submit() refuses a job when queueMax jobs are waiting.
// Thread: construct, submit and destroy on the loop's thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/asio.h"
#include "base/result.h"

namespace allot {

// How many nice levels a daemon's background workers (the agent's clone
// thread, reaping and scan workers) run above its loop's thread, so that
// they run when the loop waits and never take its CPU from it.
constexpr int kBackgroundNiceness = 10;

struct WorkerPoolOptions {
  size_t threads = 2;
  size_t queueMax = 1024;  // jobs waiting for a worker
  // Nice levels the workers add to the process's (0: none). Work that may
  // take a while and must not take the CPU from the loop's thread (the
  // master's /state rendering) runs niced; raising one's own needs no
  // privilege.
  int niceness = 0;
  // The workers run under SCHED_IDLE (lowerToIdlePolicy below): a thread of
  // the normal policy that wakes on their CPU takes it from them at once,
  // and they get a CPU only when nothing else wants it (the kernel still
  // gives them a sliver, weight 3 against a nice-0 thread's 1024, so they
  // are never starved for good). What the loop's latency needs; what the
  // workers' own latency pays on a busy machine. niceness is then moot.
  bool idlePolicy = false;
  // The workers' thread name (comm; at most 15 characters), as ps, top and
  // perf show it; empty: the process's.
  const char* name = "";
};

// Puts the calling thread (only it, not its process) under SCHED_IDLE.
// Lowering one's own policy needs no privilege.
Status lowerToIdlePolicy();

class WorkerPool {
 public:
  WorkerPool(asio::io_context& io, WorkerPoolOptions options);
  virtual ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs `work` on a worker, then `done(result)` on the loop. An Error when
  // the queue is full (nothing runs then).
  template <typename T>
  Status submit(std::function<T()> work, std::function<void(T)> done) {
    std::weak_ptr<int> alive = alive_;
    return enqueue([this, alive, work = std::move(work), done = std::move(done)]() mutable {
      auto result = std::make_shared<T>(work());
      asio::post(io_, [alive, done = std::move(done), result] {
        if (!alive.expired()) done(std::move(*result));
      });
    });
  }

  size_t queued() const;
  // Jobs taken by a worker and not finished.
  size_t running() const;

 protected:
  // Hands a job to the workers. The seam for a twin that runs jobs when and
  // in the order a test says (tests/images/manual_pool.h).
  virtual Status enqueue(std::function<void()> job);

 private:
  void runWorker();

  asio::io_context& io_;
  WorkerPoolOptions options_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  size_t running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace allot
