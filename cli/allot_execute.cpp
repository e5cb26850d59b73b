// allot-execute: a one-shot framework on the command line. Registers with
// the master, waits for offers that fit, launches --instances copies of
// --command, prints every state change and exits with the task's exit code.
//
// Exit codes: 0 all tasks FINISHED; the first failing task's exit code
// (128+signal when it was signalled); 137 KILLED; 1 LOST or ERROR; 2 bad
// flags; 124 no master or no fitting offer within --timeout; 130 Ctrl-C.
//
// SIGINT or SIGTERM: kill the tasks and wait for their end, at most
// kInterruptWait (the master may be unreachable); then, or at a second
// signal, exit 130 naming the tasks that may still run.
// With --restart a task that ends is launched again (a new task id,
// <name>-<instance>.r<n>) after a backoff (sdk/health_flags.h); the exit
// code is then that of each instance's last task.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <utility>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "base/asio.h"
#include "proto/task_state.h"
#include "base/flags.h"
#include "sdk/health_flags.h"
#include "base/log.h"
#include "proto/resources.h"
#include "cli/output_followers.h"
#include "ha/detector_factory.h"
#include "sdk/scheduler.h"

namespace {

using namespace allot;

// The default kill grace (3 s) and the updates' way back, with room to spare.
constexpr auto kInterruptWait = std::chrono::seconds(10);

struct Settings {
  std::string master = "127.0.0.1:5050";
  std::string command;
  std::string resources = "cpus:0.5;mem:64";
  int64_t instances = 1;
  std::string name = "allot-execute";
  double killAfterS = 0;
  std::string executor;
  bool executorPerTask = false;
  double timeoutS = 60;
  TlsFiles tls;
  std::string user;
  HealthFlags health;
  std::optional<wire::HealthCheck> healthCheck;
  RestartFlags restart;
  RestartPolicy restartPolicy;
  bool follow = false;
  std::string image;
  std::string volumes;  // "SRC:DST[:ro|rw],..."
  wire::ContainerInfo container;  // from image and volumes
};

const char* stateName(wire::TaskState s) {
  return wire::TaskState_Name(s).c_str() + 5;  // drop "TASK_"
}

int exitCodeOf(const wire::TaskStatus& s) {
  switch (s.state()) {
    case wire::TASK_FINISHED: return 0;
    case wire::TASK_FAILED:
      if (s.has_exit_code() && s.exit_code() != 0) return s.exit_code();
      if (s.has_signal()) return 128 + s.signal();
      return 1;
    case wire::TASK_KILLED: return 137;
    default: return 1;
  }
}

class ExecuteScheduler final : public Scheduler {
 public:
  ExecuteScheduler(asio::io_context& io, const Settings& s, Resources taskResources)
      : io_(io), settings_(s), taskResources_(std::move(taskResources)),
        instances_(static_cast<size_t>(s.instances)) {}

  int exitCode() const { return exitCode_; }
  bool launchedAll() const { return launched_ >= instances_; }
  size_t launched() const { return launched_; }
  void setDriver(SchedulerDriver* driver) { driver_ = driver; }
  // --follow: the running tasks' output goes there.
  void setFollowers(OutputFollowers* followers) { followers_ = followers; }

  void registered(SchedulerDriver&, const std::string& frameworkId, const std::string&) override {
    std::printf("registered as framework %s\n", frameworkId.c_str());
    std::fflush(stdout);
  }

  void resourceOffers(SchedulerDriver& d, const std::vector<wire::Offer>& offers) override {
    for (const auto& offer : offers) {
      std::vector<wire::TaskInfo> tasks;
      auto available = Resources::fromWire(offer.resources());
      while (available && (launched_ < instances_ || !restartsPending_.empty()) && !stopping_ &&
             available->contains(taskResources_)) {
        tasks.push_back(makeTask(offer));
        *available -= taskResources_;
      }
      if (tasks.empty()) {
        wire::Filters f;
        f.set_refuse_seconds(launched_ < instances_ || !restartsPending_.empty() ? 1 : 3600);
        (void)d.declineOffer(offer.offer_id(), f);
        continue;
      }
      (void)d.acceptOffer({offer.offer_id()}, tasks);
    }
    if (launched_ >= instances_ && restartsPending_.empty()) (void)d.setNeedsOffers(false);
  }

  void statusUpdate(SchedulerDriver& d, const wire::TaskStatus& s) override {
    (void)d.acknowledge(s);
    follow(s);
    auto& last = states_[s.task_id()];
    bool terminal = isTerminal(s.state());
    if (s.has_healthy() && !terminal) printHealth(s);
    if (last == s.state() && !terminal) return;
    last = s.state();
    std::string line = "task " + s.task_id() + " " + stateName(s.state());
    if (s.has_exit_code()) line += " exit code " + std::to_string(s.exit_code());
    if (s.has_signal()) line += " signal " + std::to_string(s.signal());
    if (s.reason() != wire::REASON_NONE && s.state() != wire::TASK_FINISHED) {
      line += " (" + wire::Reason_Name(s.reason()).substr(7) + ")";
    }
    if (!s.message().empty()) line += ": " + s.message();
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    if (!terminal || !done_.insert(s.task_id()).second) return;
    if (maybeRestart(s)) return;
    if (exitCode_ == 0) exitCode_ = exitCodeOf(s);
    ++instancesDone_;
    if (instancesDone_ == instances_ || (stopping_ && done_.size() + restarted_ == launched_)) {
      finish();
    }
  }

  // Kills sent while the master was unreachable were refused: again now.
  void reregistered(SchedulerDriver&, const std::string&) override {
    if (stopping_) sendKills();
  }

  void follow(const wire::TaskStatus& s) {
    if (!followers_) return;
    if (isTerminal(s.state())) return followers_->ended(s.task_id());
    if (s.state() != wire::TASK_RUNNING || !driver_) return;
    auto agent = agentOf_.find(s.task_id());
    if (agent == agentOf_.end()) return;
    auto hp = parseHostPort(agent->second);
    if (agent->second.empty() || !hp) {
      std::fprintf(stderr, "allot-execute: task %s: its agent serves no HTTP endpoint; output not followed\n",
                   s.task_id().c_str());
    } else if (!followers_->start(driver_->frameworkId(), s.task_id(), *hp)) {
      std::fprintf(stderr, "allot-execute: task %s: already following %zu tasks; output not followed\n",
                   s.task_id().c_str(), OutputFollowers::kFollowedTasksMax);
    }
    agentOf_.erase(agent);
  }

  void agentLost(SchedulerDriver&, const std::string& agentId) override {
    std::printf("agent %s lost\n", agentId.c_str());
  }

  void error(SchedulerDriver&, const std::string& message) override {
    std::fprintf(stderr, "allot-execute: master: %s\n", message.c_str());
    // A fatal error (e.g. the ACLs refused the registration): nothing more
    // will happen, so exit instead of waiting for --timeout.
    if (driver_->stopped()) {
      forcedExit_ = 2;
      finish();
    }
  }

  // Ctrl-C or --kill-after: kill what runs, finish when all is terminal.
  void killAll(int exitCode) {
    if (stopping_) return;
    stopping_ = true;
    if (exitCode) forcedExit_ = exitCode;
    restartTimers_.clear();
    instancesDone_ += restartsPending_.size() + restartsWaiting_;
    restartsPending_.clear();
    restartsWaiting_ = 0;
    sendKills();
    if (done_.size() + restarted_ == launched_) finish();
  }

  // Exits now, saying which tasks were not seen to end (they may still run:
  // the master kills them when it ends the framework, after its failover
  // timeout).
  void abandon(const std::string& why) {
    std::string running;
    for (const auto& [id, state] : states_) {
      if (!isTerminal(state)) running += (running.empty() ? "" : ", ") + id;
    }
    std::fprintf(stderr, "allot-execute: %s: exiting%s%s%s\n", why.c_str(),
                 running.empty() ? "" : "; these tasks may still run: ", running.c_str(),
                 running.empty() ? "" : " (the master kills them when this framework's failover "
                                        "timeout passes without it)");
    forcedExit_ = 130;
    finish();
  }

  void finish() {
    if (forcedExit_) exitCode_ = forcedExit_;
    driver_->stop(false);
    asio::post(io_, [this] { io_.stop(); });
  }


 private:
  void sendKills() {
    for (const auto& [id, state] : states_) {
      if (!isTerminal(state)) (void)driver_->killTask(id);
    }
  }

  // Health changes of a running task: "task X healthy: <the check's output>".
  void printHealth(const wire::TaskStatus& s) {
    auto& last = health_[s.task_id()];
    int now = s.healthy() ? 1 : 2;
    if (last == now) return;
    last = now;
    std::printf("task %s %s%s%s\n", s.task_id().c_str(), s.healthy() ? "healthy" : "unhealthy",
                s.message().empty() ? "" : ": ", s.message().c_str());
    std::fflush(stdout);
  }

  // A task of an instance ended: launch the instance again if the policy
  // says so, after its backoff. True when it will be.
  bool maybeRestart(const wire::TaskStatus& s) {
    auto instance = instanceOf_.find(s.task_id());
    if (stopping_ || instance == instanceOf_.end()) return false;
    int64_t& done = restarts_[instance->second];
    if (!settings_.restartPolicy.restarts(s.state(), done)) return false;
    ++done;
    Duration wait = RestartPolicy::backoff(done);
    std::printf("task %s restarting in %.0f s (restart %lld)\n", s.task_id().c_str(),
                std::chrono::duration<double>(wait).count(), static_cast<long long>(done));
    std::fflush(stdout);
    size_t index = instance->second;
    forget(s.task_id());
    // One timer per instance (it has fired before the instance ends again).
    auto& timer = restartTimers_[index];
    timer = std::make_unique<asio::steady_timer>(io_, wait);
    ++restartsWaiting_;
    timer->async_wait([this, index](const boost::system::error_code& ec) {
      if (ec || stopping_) return;
      --restartsWaiting_;
      restartsPending_.push_back(index);
      (void)driver_->setNeedsOffers(true);
    });
    return true;
  }

  // A restarted task's entries go: with restarts the ids are unbounded.
  void forget(const std::string& taskId) {
    states_.erase(taskId);
    done_.erase(taskId);
    health_.erase(taskId);
    instanceOf_.erase(taskId);
    ++restarted_;
  }

  // The next task id: a new instance, or a pending restart of one.
  std::string nextTaskId() {
    size_t index;
    std::string id;
    if (launched_ < instances_) {
      index = launched_;
      id = settings_.name + "-" + std::to_string(index);
    } else {
      index = restartsPending_.front();
      restartsPending_.pop_front();
      id = settings_.name + "-" + std::to_string(index) + ".r" + std::to_string(restarts_[index]);
    }
    ++launched_;
    instanceOf_[id] = index;
    return id;
  }

  wire::TaskInfo makeTask(const wire::Offer& offer) {
    wire::TaskInfo t;
    std::string id = nextTaskId();
    t.set_task_id(id);
    if (settings_.healthCheck) *t.mutable_health_check() = *settings_.healthCheck;
    t.set_name(settings_.name);
    t.set_agent_id(offer.agent_id());
    taskResources_.toWire(t.mutable_resources());
    if (!settings_.command.empty()) t.mutable_command()->set_shell(settings_.command);
    if (!settings_.image.empty() && settings_.executor.empty()) *t.mutable_container() = settings_.container;
    if (!settings_.executor.empty()) {
      if (!settings_.image.empty()) *t.mutable_executor()->mutable_container() = settings_.container;
      // One executor for all the tasks on an agent, or one each.
      t.mutable_executor()->set_executor_id(settings_.executorPerTask ? id : settings_.name + "-executor");
      t.mutable_executor()->mutable_command()->add_argv(settings_.executor);
      t.mutable_executor()->set_name(settings_.name);
    }
    states_[id] = wire::TASK_STAGING;
    agentOf_[id] = offer.agent_http_address();
    std::printf("task %s launching on %s\n", id.c_str(), offer.hostname().c_str());
    return t;
  }

  asio::io_context& io_;
  const Settings& settings_;
  Resources taskResources_;
  size_t instances_;
  SchedulerDriver* driver_ = nullptr;
  OutputFollowers* followers_ = nullptr;
  std::map<std::string, std::string> agentOf_;  // task -> its agent's HTTP address, until it runs
  std::map<std::string, wire::TaskState> states_;
  std::set<std::string> done_;
  size_t launched_ = 0;
  size_t instancesDone_ = 0;  // instances whose last task ended for good
  std::map<std::string, size_t> instanceOf_;
  std::map<size_t, int64_t> restarts_;  // by instance
  std::deque<size_t> restartsPending_;  // instances waiting for an offer
  size_t restartsWaiting_ = 0;          // instances in their backoff
  std::map<size_t, std::unique_ptr<asio::steady_timer>> restartTimers_;  // by instance
  size_t restarted_ = 0;                // tasks that ended and were launched again
  std::map<std::string, int> health_;   // 1 healthy, 2 unhealthy
  bool stopping_ = false;
  int exitCode_ = 0;
  int forcedExit_ = 0;
};

void addFlags(Flags& flags, Settings* s) {
  flags.addString("master", &s->master, "HOST:PORT of the master, or zk://host:port,.../path");
  flags.addString("command", &s->command, "shell command to run (required without --image)");
  flags.addString("image", &s->image,
                  "run the tasks in a root filesystem from this OCI image, e.g. registry:5000/team/app:1.2 "
                  "(agents with --isolation ...,filesystem/linux; without --command: the image's "
                  "Entrypoint and Cmd)");
  flags.addString("volume", &s->volumes,
                  "with --image: comma-separated SRC:DST[:ro|rw] mounts; SRC an absolute host path the agent "
                  "allows (--volume-allow) or a path in the sandbox; DST absolute in the image (default rw)");
  flags.addString("user", &s->user,
                  "run the tasks as this user, if the master's ACLs allow it (default: the agent's --default-user)");
  flags.addString("resources", &s->resources, "resources of each task");
  flags.addInt("instances", &s->instances, "number of copies to run");
  flags.addString("name", &s->name, "framework and task name prefix");
  flags.addDouble("kill-after", &s->killAfterS, "kill the tasks after this many seconds (0: never)");
  flags.addString("executor", &s->executor, "custom executor binary on the agents (default: built-in)");
  flags.addBool("executor-per-task", &s->executorPerTask,
                "run each task in an executor of its own (needs --executor; default: one per agent)");
  flags.addDouble("timeout", &s->timeoutS, "give up when the tasks have not all launched after this many seconds");
  flags.addBool("follow", &s->follow,
                "print the tasks' stdout and stderr as they come, each line prefixed with its task id "
                "(from the agents' HTTP endpoints)");
  addTlsFlags(flags, &s->tls);
  addHealthFlags(flags, &s->health);
  addRestartFlags(flags, &s->restart);
}

// The resources of each task, or what is wrong with the flags (the health
// check and restart policy filled in).
// --volume "SRC:DST[:ro|rw],..." into the container's volumes.
Status parseVolumes(Settings& s) {
  if (!s.volumes.empty() && s.image.empty()) return Error{"--volume needs --image"};
  s.container.set_image(s.image);
  std::istringstream list(s.volumes);
  std::string item;
  while (std::getline(list, item, ',')) {
    if (item.empty()) continue;
    std::vector<std::string> parts;
    std::istringstream fields(item);
    for (std::string f; std::getline(fields, f, ':');) parts.push_back(f);
    bool modeGiven = parts.size() == 3 && (parts[2] == "ro" || parts[2] == "rw");
    if (!(parts.size() == 2 || modeGiven) || parts[0].empty() || parts[1].empty())
      return Error{"--volume " + item + ": expected SRC:DST[:ro|rw]"};
    wire::Volume* v = s.container.add_volumes();
    v->set_source(parts[0]);
    v->set_container_path(parts[1]);
    v->set_read_only(modeGiven && parts[2] == "ro");
  }
  return okStatus();
}

Result<Resources> checkSettings(Settings& s) {
  if (s.command.empty() && s.image.empty()) return Error{"--command is required (or --image)"};
  if (auto st = parseVolumes(s); !st) return st.error();
  if (s.instances < 1 || s.instances > 100000) return Error{"--instances must be 1..100000"};
  if (!(s.killAfterS >= 0)) return Error{"--kill-after must be >= 0"};
  if (!(s.timeoutS > 0)) return Error{"--timeout must be > 0"};
  if (s.executorPerTask && s.executor.empty()) return Error{"--executor-per-task needs --executor"};
  auto healthCheck = healthCheckOf(s.health);
  if (!healthCheck) return healthCheck.error();
  s.healthCheck = *healthCheck;
  auto restartPolicy = RestartPolicy::of(s.restart);
  if (!restartPolicy) return restartPolicy.error();
  s.restartPolicy = *restartPolicy;
  if (!isZooKeeperUrl(s.master)) {
    if (auto endpoint = parseEndpoint(s.master); !endpoint) {
      return Error{"--master: " + endpoint.error().describe()};
    }
  }
  auto resources = Resources::parse(s.resources);
  if (!resources) return Error{"--resources: " + resources.error().describe()};
  if (resources->scalarMillis("cpus") <= 0 && resources->scalarMillis("mem") <= 0) {
    return Error{"--resources must include some cpus or mem"};
  }
  return resources;
}

// --kill-after: every task is killed once it is up.
void armKillAfter(asio::steady_timer& killTimer, const Settings& s, ExecuteScheduler& scheduler) {
  if (!(s.killAfterS > 0)) return;
  killTimer.expires_after(secondsToDuration(s.killAfterS));
  killTimer.async_wait([&scheduler](const boost::system::error_code& ec) {
    if (!ec) scheduler.killAll(0);
  });
}

// --timeout: without a master the run stops (exit 124, *timedOut); with
// one but not every task launched, the launched ones are killed.
void watchLaunchTimeout(asio::io_context& io, asio::steady_timer& timeout, const Settings& s,
                        ExecuteScheduler& scheduler, SchedulerDriver& driver, bool* timedOut) {
  timeout.expires_after(secondsToDuration(s.timeoutS));
  timeout.async_wait([&io, &s, &scheduler, &driver, timedOut](const boost::system::error_code& ec) {
    if (ec || scheduler.launchedAll()) return;
    if (!driver.registered()) {
      std::fprintf(stderr, "allot-execute: no master reachable at %s within %.0f s\n",
                   s.master.c_str(), s.timeoutS);
      *timedOut = true;
      io.stop();
      return;
    }
    std::fprintf(stderr, "allot-execute: no offer fitting %s within %.0f s (%zu of %lld launched)\n",
                 s.resources.c_str(), s.timeoutS, scheduler.launched(),
                 static_cast<long long>(s.instances));
    scheduler.killAll(124);
  });
}

// Runs the tasks until they end (or the timeout or an interrupt); the exit code.
int run(const Settings& s, const Resources& resources) {
  asio::io_context io(1);
  ExecuteScheduler scheduler(io, s, resources);
  auto clientTls = tlsContextFromFlags(s.tls, TlsSide::kClient);
  if (!clientTls) {
    std::cerr << "allot-execute: " << clientTls.error().describe() << "\n";
    return 2;
  }
  OutputFollowers followers(http::ClientTls{*clientTls, "agent"});
  if (s.follow) scheduler.setFollowers(&followers);
  wire::FrameworkInfo info;
  info.set_name(s.name);
  info.set_failover_timeout_s(10);
  info.set_user(s.user);
  SchedulerDriver driver(io, scheduler, info, SchedulerOptions{.master = s.master, .tls = s.tls});
  scheduler.setDriver(&driver);
  if (auto st = driver.start(); !st) {
    std::cerr << "allot-execute: " << st.error().describe() << "\n";
    return 2;
  }

  asio::signal_set signals(io, SIGINT, SIGTERM);
  asio::steady_timer giveUp(io);
  bool interrupted = false;
  std::function<void(const boost::system::error_code&, int)> onSignal =
      [&](const boost::system::error_code& ec, int) {
    if (ec) return;
    if (std::exchange(interrupted, true)) return scheduler.abandon("interrupted again");
    std::fprintf(stderr, "allot-execute: interrupted; killing tasks (exiting within %lld s; "
                 "interrupt again to exit now)\n", static_cast<long long>(kInterruptWait.count()));
    giveUp.expires_after(kInterruptWait);
    giveUp.async_wait([&](const boost::system::error_code& e) {
      if (!e) scheduler.abandon(driver.registered() ? "tasks not all ended in time" : "no master reachable");
    });
    signals.async_wait(onSignal);
    scheduler.killAll(130);
  };
  signals.async_wait(onSignal);
  asio::steady_timer killTimer(io);
  armKillAfter(killTimer, s, scheduler);
  asio::steady_timer timeout(io);
  bool timedOut = false;
  watchLaunchTimeout(io, timeout, s, scheduler, driver, &timedOut);
  io.run();
  if (timedOut) return 124;
  // The tasks ended: their last output comes within a few answers.
  if (s.follow && !followers.finish(std::chrono::seconds(5))) {
    std::fprintf(stderr, "allot-execute: some output was not read within 5 s\n");
    std::fflush(stdout);
    std::_Exit(scheduler.exitCode());
  }
  return scheduler.exitCode();
}

}  // namespace

int main(int argc, char** argv) {
  setLogProgram("allot-execute");
  if (!getenv("ALLOT_LOG_LEVEL")) setLogLevel(LogLevel::kWarning);
  Settings s;
  Flags flags("allot-execute", "Runs a command (or N copies) on an allot cluster and waits for it.");
  addFlags(flags, &s);
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  auto fail = [](const std::string& m) {
    std::cerr << "allot-execute: " << m << "\n";
    return 2;
  };
  auto resources = checkSettings(s);
  if (!resources) return fail(resources.error().message);
  return run(s, *resources);
}
