// load_frameworks: hosts many frameworks written with the scheduler SDK in
// one process (paper section 6.5). Each framework takes every offer and
// starts one task on it, lasting N(mean, stddev) seconds (at least 1 s);
// emulated agents read the duration from TaskInfo.data. Prints launch
// throughput and the offer-to-RUNNING latency distribution every 5 s.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <random>
#include <unordered_map>

#include "base/asio.h"
#include "base/flags.h"
#include "base/log.h"
#include "proto/resources.h"
#include "proto/tls.h"
#include "sdk/scheduler.h"
#include "bench/stats.h"

namespace {

using namespace allot;
using Steady = std::chrono::steady_clock;

struct Settings {
  std::string master = "127.0.0.1:5050";
  int64_t frameworks = 200;
  std::string taskResources = "cpus:1;mem:1024";
  double meanS = 30;
  double stddevS = 10;
  TlsFiles tls;  // a `framework` certificate; empty: plaintext
};

struct Stats {
  size_t launched = 0, running = 0, finished = 0, errors = 0;
  size_t errorsNeverRunning = 0;  // of errors: tasks whose RUNNING never came (never started)
  std::vector<double> offerToRunningMs;
};

class LoadFramework final : public Scheduler {
 public:
  LoadFramework(int index, const Settings& s, const Resources& task, Stats& stats,
                std::mt19937_64& random)
      : index_(index), s_(s), task_(task), stats_(stats), random_(random) {}

  void resourceOffers(SchedulerDriver& d, const std::vector<wire::Offer>& offers) override {
    for (const auto& o : offers) {
      auto have = Resources::fromWire(o.resources());
      if (!have || !have->contains(task_)) {
        (void)d.declineOffer(o.offer_id());
        continue;
      }
      wire::TaskInfo t;
      std::string id = std::to_string(index_) + "-" + std::to_string(sequence_++);
      t.set_task_id(id);
      t.set_agent_id(o.agent_id());
      t.mutable_command()->set_shell("emulated");
      task_.toWire(t.mutable_resources());
      double seconds = std::max(1.0, std::normal_distribution<double>(s_.meanS, s_.stddevS)(random_));
      t.set_data(std::to_string(seconds));
      offeredAt_[id] = Steady::now();
      wire::Filters leftover;
      leftover.set_refuse_seconds(1);
      (void)d.acceptOffer({o.offer_id()}, {t}, leftover);
      ++stats_.launched;
    }
  }

  void statusUpdate(SchedulerDriver& d, const wire::TaskStatus& s) override {
    (void)d.acknowledge(s);
    if (s.state() == wire::TASK_RUNNING) {
      auto it = offeredAt_.find(s.task_id());
      if (it != offeredAt_.end()) {
        stats_.offerToRunningMs.push_back(
            std::chrono::duration<double, std::milli>(Steady::now() - it->second).count());
        offeredAt_.erase(it);
      }
      ++stats_.running;
    } else if (s.state() == wire::TASK_FINISHED) {
      ++stats_.finished;
    } else if (s.state() != wire::TASK_STAGING && s.state() != wire::TASK_STARTING) {
      // The first few, each with its reason: what ended them.
      if (++stats_.errors <= 20) {
        std::printf("load: task %s ended %s (%s): %s\n", s.task_id().c_str(), wire::TaskState_Name(s.state()).c_str(),
                    wire::Reason_Name(s.reason()).c_str(), s.message().c_str());
      }
      if (offeredAt_.erase(s.task_id()) > 0) ++stats_.errorsNeverRunning;
    }
  }

 private:
  int index_;
  const Settings& s_;
  const Resources& task_;
  Stats& stats_;
  std::mt19937_64& random_;
  uint64_t sequence_ = 0;
  std::unordered_map<std::string, Steady::time_point> offeredAt_;
};

using bench::percentile;

}  // namespace

int main(int argc, char** argv) {
  setLogProgram("load_frameworks");
  Settings s;
  Flags flags("load_frameworks", "Runs many load-generating frameworks in one process.");
  flags.addString("master", &s.master, "HOST:PORT of the master");
  flags.addInt("frameworks", &s.frameworks, "number of frameworks");
  flags.addString("task-resources", &s.taskResources, "resources of each task");
  flags.addDouble("task-mean", &s.meanS, "mean task duration, seconds");
  flags.addDouble("task-stddev", &s.stddevS, "task duration standard deviation, seconds");
  addTlsFlags(flags, &s.tls);
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  auto task = Resources::parse(s.taskResources);
  if (!task || s.frameworks < 1) {
    std::cerr << "load_frameworks: bad --task-resources or --frameworks\n";
    return 2;
  }
  asio::io_context io(1);
  std::mt19937_64 random(11);
  Stats stats;
  std::vector<std::unique_ptr<LoadFramework>> frameworks;
  std::vector<std::unique_ptr<SchedulerDriver>> drivers;
  for (int i = 0; i < s.frameworks; ++i) {
    frameworks.push_back(std::make_unique<LoadFramework>(i, s, *task, stats, random));
    wire::FrameworkInfo info;
    info.set_name("load-" + std::to_string(i));
    drivers.push_back(std::make_unique<SchedulerDriver>(io, *frameworks.back(), info,
                                                        SchedulerOptions{.master = s.master, .tls = s.tls}));
    if (auto st = drivers.back()->start(); !st) {
      std::cerr << "load_frameworks: " << st.error().describe() << "\n";
      return 2;
    }
  }
  asio::steady_timer report(io);
  size_t lastLaunched = 0;
  std::function<void()> schedule = [&] {
    report.expires_after(std::chrono::seconds(5));
    report.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      std::printf("load: launched=%zu launches_per_s=%.0f running_updates=%zu finished=%zu "
                  "errors=%zu errors_never_running=%zu offer_to_running_ms p50=%.2f p99=%.2f max=%.2f\n",
                  stats.launched, (stats.launched - lastLaunched) / 5.0, stats.running,
                  stats.finished, stats.errors, stats.errorsNeverRunning, percentile(stats.offerToRunningMs, 0.5),
                  percentile(stats.offerToRunningMs, 0.99), percentile(stats.offerToRunningMs, 1.0));
      std::fflush(stdout);
      lastLaunched = stats.launched;
      stats.offerToRunningMs.clear();
      schedule();
    });
  };
  schedule();
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) { io.stop(); });
  io.run();
  return 0;
}
