// A custom executor for the policy tests: its tasks only "run" (it starts
// no process for them), it never enforces max_duration_s, and it ends a
// task when the agent asks. So a task that ends with REASON_MAX_DURATION
// was ended by the agent's own deadline.
#include <cstdio>
#include <set>

#include "base/asio.h"
#include "sdk/executor.h"

namespace {

using namespace allot;

class Sleepy final : public Executor {
 public:
  void launchTask(ExecutorDriver& d, const wire::TaskInfo& task) override {
    running_.insert(task.task_id());
    report(d, task.task_id(), wire::TASK_RUNNING);
  }
  void killTask(ExecutorDriver& d, const std::string& taskId, double) override {
    if (running_.erase(taskId)) report(d, taskId, wire::TASK_KILLED);
  }
  void shutdown(ExecutorDriver& d, double) override {
    for (const auto& id : running_) report(d, id, wire::TASK_KILLED);
    running_.clear();
    d.stop();
  }

 private:
  static void report(ExecutorDriver& d, const std::string& taskId, wire::TaskState state) {
    wire::TaskStatus s;
    s.set_task_id(taskId);
    s.set_state(state);
    (void)d.sendStatus(s);
  }
  std::set<std::string> running_;
};

}  // namespace

int main() {
  auto options = ExecutorOptions::fromEnvironment();
  if (!options) {
    std::fprintf(stderr, "sleepy-executor: %s\n", options.error().describe().c_str());
    return 2;
  }
  asio::io_context io;
  Sleepy executor;
  ExecutorDriver driver(io, executor, *options);
  if (!driver.start()) return 1;
  io.run();
  return 0;
}
