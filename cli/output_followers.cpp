#include "cli/output_followers.h"

#include <cstdio>

namespace allot {

OutputFollowers::~OutputFollowers() {
  for (auto& t : threads_) {
    if (t.joinable()) t.detach();  // finish() gave up on it; the process exits
  }
}

bool OutputFollowers::start(const std::string& frameworkId, const std::string& taskId, const HostPort& agent) {
  if (tasks_.count(taskId)) return true;
  if (tasks_.size() >= kFollowedTasksMax) return false;
  auto ended = std::make_shared<std::atomic<bool>>(false);
  tasks_[taskId] = ended;
  for (bool err : {false, true}) {
    TaskOutput where{agent, tls_, frameworkId, taskId, err};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++running_;
    }
    threads_.emplace_back([this, where, ended] { run(where, ended); });
  }
  return true;
}

void OutputFollowers::ended(const std::string& taskId) {
  if (auto it = tasks_.find(taskId); it != tasks_.end()) it->second->store(true);
}

void OutputFollowers::run(TaskOutput where, std::shared_ptr<std::atomic<bool>> ended) {
  FILE* stream = where.stderrStream ? stderr : stdout;
  LinePrefixer lines("[" + where.task + "] ", [stream](const std::string& line) {
    std::fputs(line.c_str(), stream);
    std::fflush(stream);
  });
  OutputPosition from;  // the whole output, from its first byte
  FollowFailure failure = FollowFailure::kNone;
  Status st = followTaskOutput(where, &from, [&] { return ended->load(); },
                               [&](std::string_view bytes) { lines.feed(bytes); }, &failure);
  lines.flush();
  if (!st) {
    std::fprintf(stderr, "allot-execute: following %s's %s: %s\n", where.task.c_str(),
                 where.stderrStream ? "stderr" : "stdout", st.error().describe().c_str());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  --running_;
  done_.notify_all();
}

bool OutputFollowers::finish(std::chrono::milliseconds max) {
  for (auto& [id, ended] : tasks_) ended->store(true);
  std::unique_lock<std::mutex> lock(mutex_);
  bool all = done_.wait_for(lock, max, [this] { return running_ == 0; });
  lock.unlock();
  if (!all) return false;
  for (auto& t : threads_) t.join();
  threads_.clear();
  return true;
}

}  // namespace allot
