// sharing_bench: the paper's dynamic-sharing experiment (section 6.1,
// Figure 5 in spirit). Four greedy frameworks with different task
// sizes and durations arrive and leave on a schedule; each keeps the cluster
// as busy as its offers allow. Every --sample seconds it writes each
// framework's dominant share (of the resources its RUNNING tasks hold) to
// --out, and at the end prints, per framework, how long (real seconds) after
// arriving to reach 90% of its fair share (1/n of the frameworks then
// present, all of them greedy) and, with --guarantee-share, its guarantee;
// and the work lost to revocation (cpu-seconds of revoked tasks' run time).
//
// The agents are bench/scale's agent_emulator (a task "runs" for the
// seconds in TaskInfo.data and ends at once when killed), so the numbers
// are the master's allocation and revocation, not process start-up.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <unordered_map>

#include "base/asio.h"
#include "base/flags.h"
#include "base/log.h"
#include "proto/resources.h"
#include "sdk/scheduler.h"

namespace {

using namespace allot;
using Steady = std::chrono::steady_clock;

// One framework of the schedule. Times in seconds from the start, before
// --time-scale.
struct Spec {
  const char* name;
  const char* role;
  const char* task;
  double taskSeconds;
  double arriveS;
  double leaveS;
  // Large tasks: hold offers too small for one task (up to this long) and
  // combine them with later offers on the same agent, as an MPI framework
  // gathering whole slots does; 0: decline them at once.
  double holdS = 0;
};

// Task sizes and durations after the paper's four: a Hadoop-like batch of
// small short tasks, an MPI job of large long ones, a Spark-like job of
// memory-heavy short tasks, and a Torque-like queue of medium tasks.
constexpr Spec kSchedule[] = {
    {"hadoop", "hadoop", "cpus:1;mem:1024", 5, 0, 240},
    {"mpi", "mpi", "cpus:4;mem:4096", 40, 30, 180, 5},
    {"spark", "spark", "cpus:1;mem:3072", 3, 60, 240},
    {"torque", "torque", "cpus:2;mem:1024", 20, 90, 210},
};
constexpr size_t kFrameworks = std::size(kSchedule);
constexpr double kEndS = 240;

struct Settings {
  std::string master = "127.0.0.1:5050";
  std::string cluster = "cpus:160;mem:327680";
  std::string out = "sharing.csv";
  double timeScale = 1;
  double sample = 0.5;
  std::string guaranteeFramework;  // name of the framework with a guarantee
  double guaranteeShare = 0;       // its guaranteed dominant share
};

struct Running {
  Resources resources;
  Steady::time_point since;
};

class Greedy final : public Scheduler {
 public:
  Greedy(const Spec& spec, Resources task, double timeScale, const Resources& cluster)
      : spec_(spec), task_(std::move(task)), timeScale_(timeScale), cluster_(cluster) {}

  // A framework of large tasks asks only for agents with a whole task free
  // (a standing filter, paper section 3.2), besides holding offers.
  void registered(SchedulerDriver& d, const std::string&, const std::string&) override {
    if (spec_.holdS <= 0) return;
    wire::StandingFilters filters;
    task_.toWire(filters.mutable_min_free());
    (void)d.setFilters(filters);
  }

  void resourceOffers(SchedulerDriver& d, const std::vector<wire::Offer>& offers) override {
    wire::Filters leftover;
    leftover.set_refuse_seconds(std::min(1.0, timeScale_));
    for (const auto& o : offers) {
      auto offered = Resources::fromWire(o.resources());
      if (!offered) continue;
      Held& held = held_[o.agent_id()];
      held.offerIds.push_back(o.offer_id());
      held.resources += *offered;
      if (held.offerIds.size() == 1) held.since = Steady::now();
      std::vector<wire::TaskInfo> tasks = fill(o.agent_id(), held.resources);
      if (!tasks.empty()) {
        (void)d.acceptOffer(held.offerIds, tasks, leftover);
        held_.erase(o.agent_id());
      } else if (spec_.holdS <= 0) {
        for (const auto& id : held.offerIds) (void)d.declineOffer(id, leftover);
        held_.erase(o.agent_id());
      }
    }
    expireHeld(d);
  }

  // Held offers that did not grow into a task in time go back.
  void expireHeld(SchedulerDriver& d) {
    wire::Filters leftover;
    leftover.set_refuse_seconds(std::min(1.0, timeScale_));
    for (auto it = held_.begin(); it != held_.end();) {
      if (Steady::now() - it->second.since < secondsToDuration(spec_.holdS * timeScale_)) {
        ++it;
        continue;
      }
      for (const auto& id : it->second.offerIds) (void)d.declineOffer(id, leftover);
      it = held_.erase(it);
    }
  }

  // One of an agent's held offers is gone: give back the others of it.
  void offerRescinded(SchedulerDriver& d, const std::string& offerId) override {
    for (auto it = held_.begin(); it != held_.end(); ++it) {
      auto& ids = it->second.offerIds;
      if (std::find(ids.begin(), ids.end(), offerId) == ids.end()) continue;
      for (const auto& id : ids) {
        if (id != offerId) (void)d.declineOffer(id);
      }
      held_.erase(it);
      return;
    }
  }

  void statusUpdate(SchedulerDriver& d, const wire::TaskStatus& s) override {
    (void)d.acknowledge(s);
    if (s.state() == wire::TASK_RUNNING) {
      if (running_.try_emplace(s.task_id(), Running{task_, Steady::now()}).second) holding_ += task_;
      return;
    }
    bool terminal = s.state() != wire::TASK_STAGING && s.state() != wire::TASK_STARTING;
    auto it = running_.find(s.task_id());
    if (!terminal || it == running_.end()) return;
    if (s.state() == wire::TASK_KILLED && s.reason() == wire::REASON_REVOKED) {
      ++revoked_;
      double ran = std::chrono::duration<double>(Steady::now() - it->second.since).count();
      lostCpuSeconds_ += ran * static_cast<double>(it->second.resources.scalarMillis("cpus")) / 1000;
    }
    holding_ -= it->second.resources;
    running_.erase(it);
  }

  // Forget everything when the framework leaves (the master kills its tasks).
  void left() {
    running_.clear();
    holding_ = Resources();
    held_.clear();
  }

  double share() const {
    double share = 0;
    for (const auto& s : holding_.scalars()) {
      int64_t total = cluster_.scalarMillis(s.name);
      if (total > 0) share = std::max(share, static_cast<double>(s.millis) / total);
    }
    return share;
  }
  const Spec& spec() const { return spec_; }
  uint64_t revoked() const { return revoked_; }
  double lostCpuSeconds() const { return lostCpuSeconds_; }

 private:
  const Spec& spec_;
  Resources task_;
  double timeScale_;
  const Resources& cluster_;
  std::mt19937_64 random_{17};
  uint64_t sequence_ = 0;
  struct Held {
    std::vector<std::string> offerIds;
    Resources resources;
    Steady::time_point since;
  };

  // As many tasks as fit in `have` on `agentId` (at most 64 per offer).
  std::vector<wire::TaskInfo> fill(const std::string& agentId, Resources have) {
    std::vector<wire::TaskInfo> tasks;
    while (have.contains(task_) && tasks.size() < 64) {
      have -= task_;
      wire::TaskInfo& t = tasks.emplace_back();
      t.set_task_id(std::string(spec_.name) + "-" + std::to_string(sequence_++));
      t.set_agent_id(agentId);
      t.mutable_command()->set_shell("emulated");
      task_.toWire(t.mutable_resources());
      double jitter = std::uniform_real_distribution<double>(0.8, 1.2)(random_);
      t.set_data(std::to_string(spec_.taskSeconds * timeScale_ * jitter));
    }
    return tasks;
  }

  std::unordered_map<std::string, Running> running_;  // RUNNING tasks
  Resources holding_;                                 // their resources
  std::unordered_map<std::string, Held> held_;        // offers held, by agent
  uint64_t revoked_ = 0;
  double lostCpuSeconds_ = 0;
};

// Per framework: when it arrived, and when it first reached its targets.
struct Progress {
  bool present = false;
  double arrivedAt = -1;
  double fairTarget = 0;
  double reachedFairAt = -1;
  double reachedGuaranteeAt = -1;
};

class Experiment {
 public:
  Experiment(asio::io_context& io, const Settings& s, Resources cluster)
      : io_(io), s_(s), cluster_(std::move(cluster)), timer_(io) {}

  Status start(std::ofstream* csv) {
    csv_ = csv;
    *csv_ << "t";
    for (const Spec& spec : kSchedule) *csv_ << "," << spec.name;
    *csv_ << "\n";
    for (const Spec& spec : kSchedule) {
      auto task = Resources::parse(spec.task);
      if (!task) return task.error();
      schedulers_.push_back(std::make_unique<Greedy>(spec, *task, s_.timeScale, cluster_));
    }
    drivers_.resize(kFrameworks);
    progress_.resize(kFrameworks);
    started_ = Steady::now();
    tick();
    return okStatus();
  }

  void report() const {
    uint64_t revoked = 0;
    double lost = 0;
    for (size_t i = 0; i < kFrameworks; ++i) {
      const Progress& p = progress_[i];
      const Spec& spec = kSchedule[i];
      // Arrival in schedule seconds; how long it took in real seconds.
      std::printf("sharing: %-7s arrived at %5.1f s: 90%% of its fair share (%.2f) ", spec.name,
                  p.arrivedAt, p.fairTarget);
      if (p.reachedFairAt >= 0) {
        std::printf("after %.2f s", (p.reachedFairAt - p.arrivedAt) * s_.timeScale);
      } else {
        std::printf("never");
      }
      if (spec.name == s_.guaranteeFramework) {
        std::printf("; its guarantee (%.2f) ", s_.guaranteeShare);
        if (p.reachedGuaranteeAt >= 0) {
          std::printf("after %.2f s", (p.reachedGuaranteeAt - p.arrivedAt) * s_.timeScale);
        } else {
          std::printf("never");
        }
      }
      std::printf("; %llu tasks revoked\n", static_cast<unsigned long long>(schedulers_[i]->revoked()));
      revoked += schedulers_[i]->revoked();
      lost += schedulers_[i]->lostCpuSeconds();
    }
    std::printf("sharing: revoked %llu tasks, %.1f cpu-seconds of work lost to revocation\n",
                static_cast<unsigned long long>(revoked), lost);
  }

 private:
  double now() const { return std::chrono::duration<double>(Steady::now() - started_).count(); }

  void tick() {
    double t = now() / s_.timeScale;  // schedule time
    for (size_t i = 0; i < kFrameworks; ++i) {
      arriveOrLeave(i, t);
      if (progress_[i].present) schedulers_[i]->expireHeld(*drivers_[i]);
    }
    sample(t);
    if (t >= kEndS) {
      for (auto& d : drivers_) {
        if (d) d->stop();
      }
      io_.stop();
      return;
    }
    timer_.expires_after(secondsToDuration(s_.sample * s_.timeScale));
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) tick();
    });
  }

  void arriveOrLeave(size_t i, double t) {
    const Spec& spec = kSchedule[i];
    Progress& p = progress_[i];
    if (!p.present && !drivers_[i] && t >= spec.arriveS) {
      wire::FrameworkInfo info;
      info.set_name(spec.name);
      info.set_role(spec.role);
      drivers_[i] = std::make_unique<SchedulerDriver>(io_, *schedulers_[i], info,
                                                      SchedulerOptions{.master = s_.master});
      if (auto st = drivers_[i]->start(); !st) {
        std::cerr << "sharing_bench: " << spec.name << ": " << st.error().describe() << "\n";
        std::exit(1);
      }
      p.present = true;
      p.arrivedAt = t;
      p.fairTarget = 0.9 / static_cast<double>(presentCount());
    } else if (p.present && t >= spec.leaveS) {
      drivers_[i]->stop();  // unregisters: the master kills its tasks
      schedulers_[i]->left();
      p.present = false;
    }
  }

  size_t presentCount() const {
    size_t n = 0;
    for (const Progress& p : progress_) n += p.present;
    return n;
  }

  void sample(double t) {
    *csv_ << t;
    for (size_t i = 0; i < kFrameworks; ++i) {
      double share = progress_[i].present ? schedulers_[i]->share() : 0;
      *csv_ << "," << share;
      Progress& p = progress_[i];
      if (!p.present) continue;
      if (p.reachedFairAt < 0 && share >= p.fairTarget) p.reachedFairAt = t;
      if (kSchedule[i].name == s_.guaranteeFramework && p.reachedGuaranteeAt < 0 &&
          share >= s_.guaranteeShare) {
        p.reachedGuaranteeAt = t;
      }
    }
    *csv_ << "\n";
    csv_->flush();
  }

  asio::io_context& io_;
  const Settings& s_;
  Resources cluster_;
  asio::steady_timer timer_;
  std::ofstream* csv_ = nullptr;
  Steady::time_point started_;
  std::vector<std::unique_ptr<Greedy>> schedulers_;
  std::vector<std::unique_ptr<SchedulerDriver>> drivers_;
  std::vector<Progress> progress_;
};

}  // namespace

int main(int argc, char** argv) {
  setLogProgram("sharing_bench");
  Settings s;
  Flags flags("sharing_bench", "Four frameworks arrive and leave; writes their shares over time.");
  flags.addString("master", &s.master, "HOST:PORT of the master");
  flags.addString("cluster", &s.cluster, "the cluster's total resources (for shares)");
  flags.addString("out", &s.out, "CSV of shares over time");
  flags.addDouble("time-scale", &s.timeScale, "multiplies every time of the schedule (0.1: 24 s run)");
  flags.addDouble("sample", &s.sample, "sampling interval, schedule seconds");
  flags.addString("guarantee-framework", &s.guaranteeFramework,
                  "framework whose guarantee to track (hadoop, mpi, spark, torque)");
  flags.addDouble("guarantee-share", &s.guaranteeShare, "its guaranteed dominant share");
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  auto cluster = Resources::parse(s.cluster);
  if (!cluster || !(s.timeScale > 0) || !(s.sample > 0)) {
    std::cerr << "sharing_bench: bad --cluster, --time-scale or --sample\n";
    return 2;
  }
  std::ofstream csv(s.out);
  if (!csv) {
    std::cerr << "sharing_bench: cannot write " << s.out << "\n";
    return 2;
  }
  asio::io_context io(1);
  Experiment experiment(io, s, *cluster);
  if (auto st = experiment.start(&csv); !st) {
    std::cerr << "sharing_bench: " << st.error().describe() << "\n";
    return 2;
  }
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) { io.stop(); });
  io.run();
  experiment.report();
  return 0;
}
