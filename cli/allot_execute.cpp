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
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <utility>
#include <iostream>
#include <map>
#include <set>

#include "base/asio.h"
#include "proto/task_state.h"
#include "base/flags.h"
#include "base/log.h"
#include "proto/resources.h"
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

  void registered(SchedulerDriver&, const std::string& frameworkId, const std::string&) override {
    std::printf("registered as framework %s\n", frameworkId.c_str());
    std::fflush(stdout);
  }

  void resourceOffers(SchedulerDriver& d, const std::vector<wire::Offer>& offers) override {
    for (const auto& offer : offers) {
      std::vector<wire::TaskInfo> tasks;
      auto available = Resources::fromWire(offer.resources());
      while (available && launched_ < instances_ && !stopping_ &&
             available->contains(taskResources_)) {
        tasks.push_back(makeTask(offer));
        *available -= taskResources_;
      }
      if (tasks.empty()) {
        wire::Filters f;
        f.set_refuse_seconds(launched_ < instances_ ? 1 : 3600);
        (void)d.declineOffer(offer.offer_id(), f);
        continue;
      }
      (void)d.acceptOffer({offer.offer_id()}, tasks);
    }
    if (launched_ >= instances_) (void)d.setNeedsOffers(false);
  }

  void statusUpdate(SchedulerDriver& d, const wire::TaskStatus& s) override {
    (void)d.acknowledge(s);
    auto& last = states_[s.task_id()];
    bool terminal = isTerminal(s.state());
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
    if (exitCode_ == 0) exitCode_ = exitCodeOf(s);
    if (done_.size() == instances_ ||
        (stopping_ && done_.size() == launched_)) {
      finish();
    }
  }

  // Kills sent while the master was unreachable were refused: again now.
  void reregistered(SchedulerDriver&, const std::string&) override {
    if (stopping_) sendKills();
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
    sendKills();
    if (done_.size() == launched_) finish();
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

  wire::TaskInfo makeTask(const wire::Offer& offer) {
    wire::TaskInfo t;
    std::string id = settings_.name + "-" + std::to_string(launched_++);
    t.set_task_id(id);
    t.set_name(settings_.name);
    t.set_agent_id(offer.agent_id());
    taskResources_.toWire(t.mutable_resources());
    t.mutable_command()->set_shell(settings_.command);
    if (!settings_.executor.empty()) {
      // One executor for all the tasks on an agent, or one each.
      t.mutable_executor()->set_executor_id(settings_.executorPerTask ? id : settings_.name + "-executor");
      t.mutable_executor()->mutable_command()->add_argv(settings_.executor);
      t.mutable_executor()->set_name(settings_.name);
    }
    states_[id] = wire::TASK_STAGING;
    std::printf("task %s launching on %s\n", id.c_str(), offer.hostname().c_str());
    return t;
  }

  asio::io_context& io_;
  const Settings& settings_;
  Resources taskResources_;
  size_t instances_;
  SchedulerDriver* driver_ = nullptr;
  std::map<std::string, wire::TaskState> states_;
  std::set<std::string> done_;
  size_t launched_ = 0;
  bool stopping_ = false;
  int exitCode_ = 0;
  int forcedExit_ = 0;
};

void addFlags(Flags& flags, Settings* s) {
  flags.addString("master", &s->master, "HOST:PORT of the master, or zk://host:port,.../path");
  flags.addString("command", &s->command, "shell command to run (required)");
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
  addTlsFlags(flags, &s->tls);
}

// The resources of each task, or what is wrong with the flags.
Result<Resources> checkSettings(const Settings& s) {
  if (s.command.empty()) return Error{"--command is required"};
  if (s.instances < 1 || s.instances > 100000) return Error{"--instances must be 1..100000"};
  if (!(s.killAfterS >= 0)) return Error{"--kill-after must be >= 0"};
  if (!(s.timeoutS > 0)) return Error{"--timeout must be > 0"};
  if (s.executorPerTask && s.executor.empty()) return Error{"--executor-per-task needs --executor"};
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

// Runs the tasks until they end (or the timeout or an interrupt); the exit code.
int run(const Settings& s, const Resources& resources) {
  asio::io_context io(1);
  ExecuteScheduler scheduler(io, s, resources);
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
  if (s.killAfterS > 0) {
    killTimer.expires_after(secondsToDuration(s.killAfterS));
    killTimer.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) scheduler.killAll(0);
    });
  }
  asio::steady_timer timeout(io);
  timeout.expires_after(secondsToDuration(s.timeoutS));
  bool timedOut = false;
  timeout.async_wait([&](const boost::system::error_code& ec) {
    if (ec || scheduler.launchedAll()) return;
    if (!driver.registered()) {
      std::fprintf(stderr, "allot-execute: no master reachable at %s within %.0f s\n",
                   s.master.c_str(), s.timeoutS);
      timedOut = true;
      io.stop();
      return;
    }
    std::fprintf(stderr, "allot-execute: no offer fitting %s within %.0f s (%zu of %lld launched)\n",
                 s.resources.c_str(), s.timeoutS, scheduler.launched(),
                 static_cast<long long>(s.instances));
    scheduler.killAll(124);
  });
  io.run();
  if (timedOut) return 124;
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
