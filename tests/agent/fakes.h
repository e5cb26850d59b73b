// Fakes of the agent's seams for unit tests without root: a Launcher that
// starts nothing (the test decides when a "process" exits) and an Isolator
// that records every call and can report a limit. Both implement the real
// interfaces (launcher/launcher.h, isolators/isolator.h); production code
// has no branch for them.
// Thread: the test's io_context thread.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "isolators/isolator.h"
#include "launcher/launcher.h"

namespace allot {

class FakeLauncher final : public Launcher {
 public:
  struct Process {
    LaunchSpec spec;  // empty for a watched (adopted) process
    ExitCallback onExit;
    bool alive = true;
    std::vector<int> signals;
  };

  explicit FakeLauncher(asio::io_context& io) : io_(io) {}

  // The next launch returns `pid` (e.g. the test's own pid, so that a
  // connection from the test passes the agent's process-tree check).
  void nextPid(pid_t pid) { nextPid_ = pid; }
  // The next launch fails with this error.
  void failNext(std::string why) { failNext_ = std::move(why); }
  // The next startOffLoop() returns a pid, then that child "fails a setup
  // step": it exits 127 with ExitInfo::setupError = why (a launcher that
  // reports a failed step with the exit, launcher.h).
  void failSetupNext(std::string why) { failSetupNext_ = std::move(why); }

  // What startOffLoop() answers: launch(), and the setup failure asked for.
  Result<pid_t> startNow(const LaunchSpec& spec, ExitCallback onExit) {
    auto pid = launch(spec, std::move(onExit));
    if (pid && failSetupNext_) {
      ExitInfo e;
      e.statusKnown = e.exited = true;
      e.exitCode = 127;
      e.setupError = *failSetupNext_;
      failSetupNext_.reset();
      exit(*pid, e);
    }
    return pid;
  }

  // Held: startOffLoop() keeps each start (as a clone under way on the
  // real launcher's thread) until releaseStarts(), which completes them in
  // order, each from the loop; not held: they complete before returning.
  void holdStarts(bool hold) { holdStarts_ = hold; }
  size_t heldStarts() const { return held_.size(); }
  // The value of NAME in the environment of held start `i`.
  std::string heldEnv(size_t i, const std::string& name) const { return envOf(held_.at(i).spec, name); }
  void releaseStarts() {
    auto held = std::move(held_);
    held_.clear();
    for (auto& h : held) {
      asio::post(io_, [this, h = std::move(h)]() mutable { h.onStarted(startNow(h.spec, std::move(h.onExit))); });
    }
  }

  void startOffLoop(const LaunchSpec& spec, ExitCallback onExit, StartCallback onStarted) override {
    if (!holdStarts_) return onStarted(startNow(spec, std::move(onExit)));
    held_.push_back(Held{spec, std::move(onExit), std::move(onStarted)});
  }

  Result<pid_t> launch(const LaunchSpec& spec, ExitCallback onExit) override {
    if (failNext_) {
      std::string why = *failNext_;
      failNext_.reset();
      return Error{why};
    }
    pid_t pid = nextPid_ ? nextPid_ : fakePid_++;
    nextPid_ = 0;
    launched_.push_back(pid);
    processes_[pid] = Process{spec, std::move(onExit)};
    return pid;
  }

  Status watch(pid_t pid, ExitCallback onExit) override {
    processes_[pid] = Process{{}, std::move(onExit)};
    watched_.push_back(pid);
    return okStatus();
  }

  // SIGKILL ends the fake process (its exit is reported from the loop);
  // other signals are only recorded.
  Status signal(pid_t pid, int sig) override {
    auto it = processes_.find(pid);
    if (it == processes_.end() || !it->second.alive) return Error{"no such process", ESRCH};
    it->second.signals.push_back(sig);
    if (sig == SIGKILL) {
      ExitInfo e;
      e.pid = pid;
      e.statusKnown = true;
      e.signal = SIGKILL;
      exit(pid, e);
    }
    return okStatus();
  }

  size_t supervisedCount() const override {
    size_t n = 0;
    for (const auto& [pid, p] : processes_) n += p.alive;
    return n;
  }

  // Ends process `pid` as `info` says; onExit runs from the loop, once.
  void exit(pid_t pid, ExitInfo info) {
    Process& p = processes_.at(pid);
    if (!p.alive) return;
    p.alive = false;
    info.pid = pid;
    asio::post(io_, [cb = p.onExit, info] { cb(info); });
  }
  void exitWith(pid_t pid, int code) {
    ExitInfo e;
    e.statusKnown = e.exited = true;
    e.exitCode = code;
    exit(pid, e);
  }

  const Process& process(pid_t pid) const { return processes_.at(pid); }
  bool alive(pid_t pid) const { return processes_.count(pid) && processes_.at(pid).alive; }
  const std::vector<pid_t>& launched() const { return launched_; }
  const std::vector<pid_t>& watched() const { return watched_; }

  // The value of NAME in the environment process `pid` was started with.
  std::string env(pid_t pid, const std::string& name) const { return envOf(process(pid).spec, name); }
  static std::string envOf(const LaunchSpec& spec, const std::string& name) {
    for (const auto& kv : spec.env) {
      if (kv.rfind(name + "=", 0) == 0) return kv.substr(name.size() + 1);
    }
    return "";
  }

 private:
  struct Held {
    LaunchSpec spec;
    ExitCallback onExit;
    StartCallback onStarted;
  };

  asio::io_context& io_;
  bool holdStarts_ = false;
  std::vector<Held> held_;
  pid_t fakePid_ = 4'000'000;  // above any pid the host hands out by default
  pid_t nextPid_ = 0;
  std::optional<std::string> failNext_;
  std::optional<std::string> failSetupNext_;
  std::map<pid_t, Process> processes_;
  std::vector<pid_t> launched_;
  std::vector<pid_t> watched_;
};

class FakeIsolator final : public Isolator {
 public:
  struct Record {
    bool prepared = false;
    bool cleanedUp = false;
    pid_t pid = 0;
    std::vector<Resources> limits;  // prepare's, then every update's
    std::string sandbox;            // prepare's
    std::function<void(const Limitation&)> onLimitation;
  };

  std::string_view name() const override { return "fake"; }

  // The next prepare() fails with this error.
  void failPrepare(std::string why) { failPrepare_ = std::move(why); }
  // Every prepare() blocks for this long (a kernel that makes it wait).
  void slowPrepare(std::chrono::milliseconds d) { prepareTakes_ = d; }
  // The next `n` reap jobs fail (a process the kill did not end).
  void failReaps(int n) { reapFailuresLeft_->store(n); }
  // Reap jobs run so far, and on which threads.
  int reaps() const { return reapCount_->load(); }
  bool reapedOnThread(std::thread::id t) const {
    std::lock_guard lock(reapThreads_->mu);
    return reapThreads_->ids.count(t) > 0;
  }

  Status recover(const std::vector<KnownContainer>& known) override {
    recovered_.clear();
    for (const auto& k : known) recovered_.push_back(k.id);
    return okStatus();
  }
  Status prepare(const ContainerId& id, const ContainerConfig& config, ChildSetup*) override {
    if (prepareTakes_.count() > 0) std::this_thread::sleep_for(prepareTakes_);
    Record& r = records_[id.name()] = Record{};
    r.limits.push_back(config.limits);
    r.sandbox = config.sandbox;
    if (failPrepare_) {
      std::string why = *failPrepare_;
      failPrepare_.reset();
      return Error{why};
    }
    r.prepared = true;
    return okStatus();
  }
  Status isolate(const ContainerId& id, pid_t pid) override {
    records_[id.name()].pid = pid;
    return okStatus();
  }
  Status watch(const ContainerId& id, std::function<void(const Limitation&)> onLimitation) override {
    records_[id.name()].onLimitation = std::move(onLimitation);
    return okStatus();
  }
  Status update(const ContainerId& id, const Resources& limits) override {
    records_[id.name()].limits.push_back(limits);
    return okStatus();
  }
  Status usage(const ContainerId&, wire::ResourceUsage* usage) override {
    usage->set_mem_bytes(usage->mem_bytes() + 1);
    return okStatus();
  }
  // Runs on the manager's worker pool: touches only what it captured.
  std::function<Status()> reapJob(const ContainerId& id) override {
    return [left = reapFailuresLeft_, count = reapCount_, threads = reapThreads_, name = id.name()]() -> Status {
      ++*count;
      {
        std::lock_guard lock(threads->mu);
        threads->ids.insert(std::this_thread::get_id());
      }
      if (left->load() > 0) {
        --*left;
        return Error{"/fake/" + name + " still has processes 2 s after the kill"};
      }
      return okStatus();
    };
  }
  Status cleanup(const ContainerId& id) override {
    records_[id.name()].cleanedUp = true;
    ++cleanups_;
    return okStatus();
  }

  // Reports a limit hit by container `name`, as the kernel would.
  void limit(const std::string& name, Limitation l) { records_.at(name).onLimitation(l); }

  bool has(const std::string& name) const { return records_.count(name); }
  const Record& record(const std::string& name) const { return records_.at(name); }
  const std::vector<ContainerId>& recovered() const { return recovered_; }
  size_t cleanups() const { return cleanups_; }

 private:
  std::map<std::string, Record> records_;  // by container name
  std::vector<ContainerId> recovered_;
  std::optional<std::string> failPrepare_;
  std::chrono::milliseconds prepareTakes_{0};
  size_t cleanups_ = 0;
  struct Threads {
    std::mutex mu;
    std::set<std::thread::id> ids;
  };
  std::shared_ptr<std::atomic<int>> reapFailuresLeft_ = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> reapCount_ = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<Threads> reapThreads_ = std::make_shared<Threads>();
};

}  // namespace allot
