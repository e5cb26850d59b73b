#include "base/worker_pool.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/check.h"
#include "base/log.h"

namespace allot {

WorkerPool::WorkerPool(asio::io_context& io, WorkerPoolOptions options)
    : io_(io), options_(options) {
  CHECK(options_.threads > 0);
  for (size_t i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { runWorker(); });
}

WorkerPool::~WorkerPool() {
  alive_.reset();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    jobs_.clear();
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

Status WorkerPool::enqueue(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    if (jobs_.size() >= options_.queueMax) {
      return Error{"worker pool: " + std::to_string(options_.queueMax) + " jobs already waiting"};
    }
    // The guard travels with the job: io_.run() keeps going until its
    // result has been posted.
    jobs_.push_back([job = std::move(job), guard = asio::make_work_guard(io_)]() mutable {
      job();
      guard.reset();
    });
  }
  wake_.notify_one();
  return okStatus();
}

Status lowerToIdlePolicy() {
  // sched_setscheduler with pid 0 acts on the calling thread on Linux.
  sched_param param{};
  param.sched_priority = 0;
  if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) return Error::fromErrno("sched_setscheduler(SCHED_IDLE)");
  return okStatus();
}

void WorkerPool::runWorker() {
  if (options_.name && *options_.name) {
    char name[16] = {};
    std::strncpy(name, options_.name, sizeof name - 1);
    (void)pthread_setname_np(pthread_self(), name);
  }
  if (options_.idlePolicy) {
    // A worker left under the normal policy still works: say so only.
    if (Status st = lowerToIdlePolicy(); !st) LOG_WARNING("worker pool: " << st.error().describe());
  } else if (options_.niceness > 0) {
    // Per thread on Linux: PRIO_PROCESS with a thread id.
    pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
    errno = 0;
    int now = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
    if (errno == 0) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(tid), std::min(now + options_.niceness, 19));
  }
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      ++running_;
    }
    job();
    std::lock_guard lock(mu_);
    --running_;
  }
}

size_t WorkerPool::queued() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

size_t WorkerPool::running() const {
  std::lock_guard lock(mu_);
  return running_;
}

}  // namespace allot
