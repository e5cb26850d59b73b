// allot-service: a long-running service framework. Keeps --instances copies
// of --command running, each with the health check of the --health-* flags
// (sdk/health_flags.h), and replaces every copy that ends: failed, killed
// for its health (HEALTH_CHECK_FAILED), lost with its agent, drained or
// revoked. New copies go to the value of --spread-attribute (an agent
// attribute, e.g. rack) that holds the fewest.
//
// Failover: with --state-file the framework id and secret are kept there;
// a new allot-service with the same file takes the framework over (its
// tasks keep running for --failover-timeout) and reconciles to learn them.
// SIGINT/SIGTERM disconnect and leave the tasks running; --teardown ends
// the framework and its tasks. With a zk:// --master it follows the
// elected master and reconciles after each re-registration.
//
// Prints "instances: R running, H healthy" whenever that changes.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "base/asio.h"
#include "base/flags.h"
#include "base/log.h"
#include "examples/common/example.h"
#include "ha/detector_factory.h"
#include "proto/resources.h"
#include "proto/task_state.h"
#include "sdk/health_flags.h"
#include "sdk/scheduler.h"

namespace {

using namespace allot;
using examples::fail;

constexpr int64_t kInstancesMax = 10000;
// After a (re-)registration, offers are declined this long so that the
// reconciliation's answers name the copies already running first.
constexpr auto kReconcileWait = std::chrono::seconds(2);

struct Settings {
  std::string master = "127.0.0.1:5050";
  std::string command;
  std::string resources = "cpus:0.1;mem:32";
  int64_t instances = 3;
  std::string name = "allot-service";
  std::string spreadAttribute;
  std::string stateFile;
  double failoverTimeoutS = 60;
  bool teardown = false;
  std::string user;
  TlsFiles tls;
  HealthFlags health;
  std::optional<wire::HealthCheck> healthCheck;
};

struct Instance {
  std::string agentId;
  wire::TaskState state = wire::TASK_STAGING;
  std::optional<bool> healthy;
};

// The framework id and secret a failed-over scheduler presents.
struct Identity {
  std::string id, secret;
};

Identity readIdentity(const std::string& path) {
  Identity out;
  std::ifstream in(path);
  in >> out.id >> out.secret;
  return out;
}

void writeIdentity(const std::string& path, const Identity& identity) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << identity.id << "\n" << identity.secret << "\n";
  }
  chmod(tmp.c_str(), 0600);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) LOG_ERROR("cannot write " << path);
}

class ServiceScheduler final : public Scheduler {
 public:
  ServiceScheduler(const Settings& s, Resources taskResources)
      : settings_(s), taskResources_(std::move(taskResources)) {}

  void registered(SchedulerDriver& d, const std::string& frameworkId, const std::string&) override {
    std::printf("registered as framework %s\n", frameworkId.c_str());
    std::fflush(stdout);
    if (!settings_.stateFile.empty()) writeIdentity(settings_.stateFile, {frameworkId, d.frameworkSecret()});
    resync(d);
  }

  void reregistered(SchedulerDriver& d, const std::string& masterId) override {
    std::printf("re-registered with master %s\n", masterId.c_str());
    std::fflush(stdout);
    if (!settings_.stateFile.empty()) writeIdentity(settings_.stateFile, {d.frameworkId(), d.frameworkSecret()});
    resync(d);
  }

  void resourceOffers(SchedulerDriver& d, const std::vector<wire::Offer>& offers) override {
    std::vector<std::optional<Resources>> free;
    for (const auto& o : offers) {
      agentValue_[o.agent_id()] = spreadValue(o);
      auto r = Resources::fromWire(o.resources());
      free.push_back(r ? std::optional<Resources>(*r) : std::nullopt);
    }
    std::map<size_t, std::vector<wire::TaskInfo>> launches;
    while (live() < static_cast<size_t>(settings_.instances) && SteadyClock::now() >= launchAfter_) {
      auto pick = leastLoaded(offers, free);
      if (!pick) break;
      *free[*pick] -= taskResources_;
      launches[*pick].push_back(makeTask(offers[*pick]));
    }
    for (size_t i = 0; i < offers.size(); ++i) {
      auto it = launches.find(i);
      if (it == launches.end()) {
        wire::Filters f;
        f.set_refuse_seconds(SteadyClock::now() < launchAfter_ ? 1 : 5);
        (void)d.declineOffer(offers[i].offer_id(), f);
      } else {
        (void)d.acceptOffer({offers[i].offer_id()}, it->second);
      }
    }
    updateNeedsOffers(d);
  }

  void statusUpdate(SchedulerDriver& d, const wire::TaskStatus& s) override {
    (void)d.acknowledge(s);
    if (s.task_id().rfind(settings_.name + "-", 0) != 0) return;
    if (isTerminal(s.state())) {
      killed_.erase(s.task_id());
      if (instances_.erase(s.task_id())) {
        std::string reason = wire::Reason_Name(s.reason()).substr(7);
        std::printf("task %s ended %s (%s): %s; replacing it\n", s.task_id().c_str(),
                    wire::TaskState_Name(s.state()).c_str() + 5, reason.c_str(), s.message().c_str());
      }
    } else if (!killed_.count(s.task_id())) {
      Instance& in = instances_[s.task_id()];  // adopts tasks learned by reconciliation
      if (!s.agent_id().empty()) in.agentId = s.agent_id();
      in.state = s.state();
      if (s.has_healthy()) in.healthy = s.healthy();
      trimExtras(d);
    }
    report();
    updateNeedsOffers(d);
  }

  void agentLost(SchedulerDriver& d, const std::string& agentId) override {
    // Its tasks were reported LOST already; any still listed are killed in
    // case the agent comes back, and replaced now.
    for (auto it = instances_.begin(); it != instances_.end();) {
      if (it->second.agentId != agentId) {
        ++it;
        continue;
      }
      kill(d, it->first);
      it = instances_.erase(it);
    }
    std::printf("agent %s lost\n", agentId.c_str());
    report();
    updateNeedsOffers(d);
  }

  void error(SchedulerDriver& d, const std::string& message) override {
    std::fprintf(stderr, "allot-service: master: %s\n", message.c_str());
  }

 private:
  // After (re-)registration: learn every task of the framework the master
  // knows (a failed-over scheduler starts knowing none) and ask for offers.
  void resync(SchedulerDriver& d) {
    launchAfter_ = SteadyClock::now() + kReconcileWait;
    (void)d.reconcile({});
    updateNeedsOffers(d);
  }

  std::string spreadValue(const wire::Offer& o) const {
    if (settings_.spreadAttribute.empty()) return "";
    for (const auto& a : o.attributes()) {
      if (a.name() == settings_.spreadAttribute) return a.value();
    }
    return "";
  }

  size_t live() const { return instances_.size(); }

  std::map<std::string, size_t> loadByValue() const {
    std::map<std::string, size_t> load;
    for (const auto& [id, in] : instances_) {
      auto v = agentValue_.find(in.agentId);
      if (v != agentValue_.end()) ++load[v->second];
    }
    return load;
  }

  // The offer with room for one more copy whose spread value holds the
  // fewest copies (the first such offer on a tie).
  std::optional<size_t> leastLoaded(const std::vector<wire::Offer>& offers,
                                    const std::vector<std::optional<Resources>>& free) const {
    auto load = loadByValue();
    std::optional<size_t> best;
    size_t bestLoad = SIZE_MAX;
    for (size_t i = 0; i < offers.size(); ++i) {
      if (!free[i] || !free[i]->contains(taskResources_)) continue;
      size_t l = load[spreadValue(offers[i])];
      if (l < bestLoad) {
        best = i;
        bestLoad = l;
      }
    }
    return best;
  }

  wire::TaskInfo makeTask(const wire::Offer& offer) {
    wire::TaskInfo t;
    std::string id = settings_.name + "-" + std::to_string(startMs_) + "-" + std::to_string(sequence_++);
    t.set_task_id(id);
    t.set_name(settings_.name);
    t.set_agent_id(offer.agent_id());
    t.set_long_lived(true);
    taskResources_.toWire(t.mutable_resources());
    t.mutable_command()->set_shell(settings_.command);
    if (settings_.healthCheck) *t.mutable_health_check() = *settings_.healthCheck;
    instances_[id].agentId = offer.agent_id();
    std::printf("task %s launching on %s\n", id.c_str(), offer.hostname().c_str());
    return t;
  }

  // More copies than wanted (e.g. a partitioned agent's came back): the
  // newest are killed.
  void trimExtras(SchedulerDriver& d) {
    while (instances_.size() > static_cast<size_t>(settings_.instances)) {
      auto newest = std::prev(instances_.end());
      std::printf("task %s is one too many; killing it\n", newest->first.c_str());
      kill(d, newest->first);
      instances_.erase(newest);
    }
  }

  // Kills a copy no longer counted; its late updates are ignored.
  void kill(SchedulerDriver& d, const std::string& taskId) {
    if (killed_.size() >= static_cast<size_t>(kInstancesMax)) killed_.clear();
    killed_.insert(taskId);
    (void)d.killTask(taskId);
  }

  void updateNeedsOffers(SchedulerDriver& d) {
    bool want = live() < static_cast<size_t>(settings_.instances);
    if (want != needsOffers_) {
      needsOffers_ = want;
      (void)d.setNeedsOffers(want);
    }
  }

  void report() {
    size_t running = 0, healthy = 0;
    for (const auto& [id, in] : instances_) {
      running += in.state == wire::TASK_RUNNING;
      healthy += in.state == wire::TASK_RUNNING && in.healthy == true;
    }
    if (running == lastRunning_ && healthy == lastHealthy_) return;
    lastRunning_ = running;
    lastHealthy_ = healthy;
    std::printf("instances: %zu running, %zu healthy\n", running, healthy);
    std::fflush(stdout);
  }

  const Settings& settings_;
  Resources taskResources_;
  std::map<std::string, Instance> instances_;         // live copies by task id
  std::map<std::string, std::string> agentValue_;     // agent id -> spread value
  std::set<std::string> killed_;                      // killed, not yet terminal
  TimePoint launchAfter_{};
  int64_t startMs_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  uint64_t sequence_ = 0;
  bool needsOffers_ = true;
  size_t lastRunning_ = SIZE_MAX, lastHealthy_ = SIZE_MAX;
};

// Parses and checks the flags into `s`: -1 to go on, else the exit code.
int parseFlags(int argc, char** argv, Settings& s) {
  Flags flags("allot-service", "Keeps N healthy copies of a command running on an allot cluster.");
  flags.addString("master", &s.master, "HOST:PORT of the master, or zk://host:port,.../path");
  flags.addString("command", &s.command, "shell command of each copy (required)");
  flags.addString("resources", &s.resources, "resources of each copy");
  flags.addInt("instances", &s.instances, "copies to keep running");
  flags.addString("name", &s.name, "framework name and task id prefix");
  flags.addString("spread-attribute", &s.spreadAttribute,
                  "agent attribute whose values share the copies evenly (e.g. rack)");
  flags.addString("state-file", &s.stateFile, "keeps the framework id and secret for a failover");
  flags.addDouble("failover-timeout", &s.failoverTimeoutS, "seconds the master keeps the tasks of a gone scheduler");
  flags.addBool("teardown", &s.teardown, "end the framework of --state-file and its tasks, then exit");
  flags.addString("user", &s.user, "run the copies as this user, if the master's ACLs allow it");
  addTlsFlags(flags, &s.tls);
  addHealthFlags(flags, &s.health);
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  if (s.command.empty() && !s.teardown) return fail("--command is required");
  if (s.instances < 0 || s.instances > kInstancesMax) return fail("--instances must be 0..10000");
  if (!(s.failoverTimeoutS >= 0)) return fail("--failover-timeout must be >= 0");
  if (s.teardown && s.stateFile.empty()) return fail("--teardown needs --state-file");
  auto check = healthCheckOf(s.health);
  if (!check) return fail(check.error().describe());
  s.healthCheck = *check;
  if (s.teardown) s.instances = 0;
  return -1;
}

// --teardown: once registered, unregister (the master kills the tasks).
void tearDownWhenRegistered(asio::io_context& io, asio::steady_timer& timer, SchedulerDriver& driver,
                            const std::string& stateFile) {
  if (driver.registered()) {
    driver.stop(/*failover=*/false);
    std::remove(stateFile.c_str());
    asio::post(io, [&io] { io.stop(); });
    return;
  }
  timer.expires_after(std::chrono::milliseconds(100));
  timer.async_wait([&io, &timer, &driver, &stateFile](const boost::system::error_code& ec) {
    if (!ec) tearDownWhenRegistered(io, timer, driver, stateFile);
  });
}

}  // namespace

int main(int argc, char** argv) {
  examples::startProgram("allot-service", LogLevel::kInfo);
  Settings s;
  if (int rc = parseFlags(argc, argv, s); rc >= 0) return rc;
  auto resources = Resources::parse(s.resources);
  if (!resources) return fail("--resources: " + resources.error().describe());

  asio::io_context io(1);
  ServiceScheduler scheduler(s, *resources);
  wire::FrameworkInfo info;
  info.set_name(s.name);
  info.set_user(s.user);
  info.set_failover_timeout_s(s.failoverTimeoutS);
  SchedulerOptions options{.master = s.master, .tls = s.tls};
  if (!s.stateFile.empty()) {
    Identity identity = readIdentity(s.stateFile);
    info.set_id(identity.id);
    options.frameworkSecret = identity.secret;
  }
  SchedulerDriver driver(io, scheduler, info, options);
  if (auto st = driver.start(); !st) return fail(st.error().describe());
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    driver.stop(/*failover=*/true);  // the tasks keep running for a successor
    io.stop();
  });
  asio::steady_timer teardown(io);
  if (s.teardown) tearDownWhenRegistered(io, teardown, driver, s.stateFile);
  io.run();
  return 0;
}
