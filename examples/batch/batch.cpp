// allot-batch: a work-queue framework. Reads one shell command per line from
// --tasks (blank lines and '#' comments skipped), runs each as a task with
// --resources, retries a task that fails, is lost or errors up to --retries
// times, and prints a progress line after every task that ends.
//
//   allot-batch --master 127.0.0.1:5050 --tasks jobs.txt --retries 2
//
// The last line is a summary for scripts (bench/placement):
//   result tasks=N finished=F failed=X run_s=T running_per_s=R finished_per_s=E
//          first_offer_at=W last_running_at=W end_at=W
// (run_s from the first offer to the last end; running_per_s counts tasks
// reaching RUNNING over the time from the first offer to the last RUNNING;
// *_at are wall-clock seconds, so a script can merge several frameworks).
//
// Exit codes: 0 every task finished; 1 some task failed after its retries;
// 2 bad flags or task file; 124 no master within --timeout.
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <optional>
#include <unordered_map>

#include "base/asio.h"
#include "base/clock.h"
#include "base/flags.h"
#include "base/log.h"
#include "examples/common/example.h"
#include "proto/resources.h"
#include "proto/task_state.h"
#include "sdk/scheduler.h"

namespace {

using namespace allot;

constexpr size_t kTasksMax = 1'000'000;
constexpr size_t kCommandBytesMax = 64 * 1024;

struct Settings {
  std::string master = "127.0.0.1:5050";
  std::string tasksFile;
  std::string resources = "cpus:0.1;mem:32";
  int64_t retries = 2;
  double timeoutS = 60;
  std::string name = "allot-batch";
  bool quiet = false;
};

struct Work {
  std::string command;
  int attempts = 0;
};

Result<std::vector<Work>> readTasks(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"cannot read " + path};
  std::vector<Work> work;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    if (line.size() > kCommandBytesMax)
      return Error{path + ":" + std::to_string(number) + ": command longer than 64 KiB"};
    if (work.size() == kTasksMax) return Error{path + ": more than 1,000,000 tasks"};
    work.push_back({line.substr(first)});
  }
  if (work.empty()) return Error{path + ": no tasks"};
  return work;
}

class BatchScheduler final : public Scheduler {
 public:
  BatchScheduler(asio::io_context& io, std::vector<Work> work, Resources each, int retries,
                 bool quiet)
      : io_(io), work_(std::move(work)), each_(std::move(each)), retries_(retries), quiet_(quiet) {
    for (size_t i = 0; i < work_.size(); ++i) queue_.push_back(i);
  }

  int exitCode() const { return gaveUp_ ? 1 : 0; }

  void resourceOffers(SchedulerDriver& d, const std::vector<wire::Offer>& offers) override {
    if (!firstOffer_) {
      firstOffer_ = SteadyClock::now();
      firstOfferAt_ = wallClockSeconds();
    }
    for (const auto& offer : offers) {
      std::vector<wire::TaskInfo> tasks;
      auto free = Resources::fromWire(offer.resources());
      while (free && !queue_.empty() && free->contains(each_)) {
        tasks.push_back(taskFor(queue_.front(), offer));
        queue_.pop_front();
        *free -= each_;
      }
      if (tasks.empty()) {
        (void)d.declineOffer(offer.offer_id());
        continue;
      }
      (void)d.acceptOffer({offer.offer_id()}, tasks);
    }
    if (queue_.empty()) (void)d.setNeedsOffers(false);
  }

  void statusUpdate(SchedulerDriver& d, const wire::TaskStatus& s) override {
    (void)d.acknowledge(s);
    auto it = running_.find(s.task_id());
    if (it == running_.end()) return;
    if (s.state() == wire::TASK_RUNNING) {
      ++reachedRunning_;
      lastRunning_ = SteadyClock::now();
      lastRunningAt_ = wallClockSeconds();
    }
    if (!isTerminal(s.state())) return;
    size_t index = it->second;
    running_.erase(it);
    if (s.state() == wire::TASK_FINISHED) {
      ++finished_;
    } else if (work_[index].attempts <= retries_) {
      std::printf("task %zu attempt %d %s: retrying\n", index, work_[index].attempts,
                  wire::TaskState_Name(s.state()).c_str());
      queue_.push_back(index);
      (void)d.setNeedsOffers(true);
    } else {
      std::printf("task %zu gave up after %d attempts: %s\n", index, work_[index].attempts,
                  s.message().c_str());
      ++gaveUp_;
    }
    if (!quiet_) {
      std::printf("progress: %zu/%zu finished, %zu failed, %zu running, %zu queued\n", finished_,
                  work_.size(), gaveUp_, running_.size(), queue_.size());
      std::fflush(stdout);
    }
    if (finished_ + gaveUp_ == work_.size()) {
      printSummary();
      d.stop(false);
      asio::post(io_, [this] { io_.stop(); });
    }
  }

  void error(SchedulerDriver&, const std::string& message) override {
    std::fprintf(stderr, "allot-batch: master: %s\n", message.c_str());
  }

 private:
  void printSummary() const {
    auto seconds = [this](TimePoint t) {
      return std::chrono::duration<double>(t - *firstOffer_).count();
    };
    double runS = seconds(SteadyClock::now());
    double runningS = seconds(lastRunning_);
    std::printf("result tasks=%zu finished=%zu failed=%zu run_s=%.3f running_per_s=%.0f "
                "finished_per_s=%.0f first_offer_at=%.6f last_running_at=%.6f end_at=%.6f\n",
                work_.size(), finished_, gaveUp_, runS,
                runningS > 0 ? reachedRunning_ / runningS : 0.0,
                runS > 0 ? finished_ / runS : 0.0, firstOfferAt_, lastRunningAt_,
                wallClockSeconds());
    std::fflush(stdout);
  }

  wire::TaskInfo taskFor(size_t index, const wire::Offer& offer) {
    Work& w = work_[index];
    ++w.attempts;
    wire::TaskInfo t;
    t.set_task_id(std::to_string(index) + "-" + std::to_string(w.attempts));
    t.set_name("batch-" + std::to_string(index));
    t.set_agent_id(offer.agent_id());
    each_.toWire(t.mutable_resources());
    t.mutable_command()->set_shell(w.command);
    running_[t.task_id()] = index;
    return t;
  }

  asio::io_context& io_;
  std::vector<Work> work_;
  Resources each_;
  int retries_;
  std::deque<size_t> queue_;
  bool quiet_;
  std::unordered_map<std::string, size_t> running_;  // task id -> work index
  size_t finished_ = 0;
  size_t gaveUp_ = 0;
  size_t reachedRunning_ = 0;
  std::optional<TimePoint> firstOffer_;
  TimePoint lastRunning_{};
  double firstOfferAt_ = 0;
  double lastRunningAt_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  examples::startProgram("allot-batch");
  using examples::fail;
  Settings s;
  Flags flags("allot-batch", "Runs the shell commands of a file as tasks, retrying failures.");
  flags.addString("master", &s.master, "HOST:PORT (or zk://...) of the master");
  flags.addString("tasks", &s.tasksFile, "file with one shell command per line (required)");
  flags.addString("resources", &s.resources, "resources of each task");
  flags.addInt("retries", &s.retries, "times a failed task is tried again");
  flags.addDouble("timeout", &s.timeoutS, "give up when no master answers within this many seconds");
  flags.addString("name", &s.name, "framework name");
  flags.addBool("quiet", &s.quiet, "no progress line per task (retries, give-ups and the summary only)");
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  if (s.tasksFile.empty()) return fail("--tasks is required");
  if (s.retries < 0 || s.retries > 100) return fail("--retries must be 0..100");
  if (!(s.timeoutS > 0)) return fail("--timeout must be > 0");
  auto work = readTasks(s.tasksFile);
  if (!work) return fail(work.error().describe());
  auto each = Resources::parse(s.resources);
  if (!each) return fail("--resources: " + each.error().describe());

  asio::io_context io(1);
  BatchScheduler scheduler(io, std::move(*work), *each, static_cast<int>(s.retries), s.quiet);
  wire::FrameworkInfo info;
  info.set_name(s.name);
  SchedulerDriver driver(io, scheduler, info, SchedulerOptions{.master = s.master});
  examples::Deadline deadline{
      .seconds = s.timeoutS,
      .met = [&] { return driver.registered(); },
      .late = [&] { return "no master at " + s.master + " within " + std::to_string(std::llround(s.timeoutS)) + " s"; }};
  if (int rc = examples::runDriver(io, driver, deadline); rc != 0) return rc;
  return scheduler.exitCode();
}
