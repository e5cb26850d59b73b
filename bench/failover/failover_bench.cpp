// failover_bench: the paper's experiment 6.6 (master failover). Starts N
// allot-master processes contending in ZooKeeper, emulates A agents and F
// frameworks (real protocol peers, one TCP connection each) that find the
// leader through the ZooKeeper detector (ha/zk_detector.h), runs one
// long-lived task per framework, then kills the leader K times (SIGKILL or
// SIGTERM) and reports, per kill, milliseconds from the signal until:
//   elected     the detector reports a new leader
//   accepting   the new leader answers its first registration
//   agents      every agent has re-registered
//   frameworks  every framework has re-registered
//   offers      the first offer reaches a framework
// and the tasks reported LOST (must be 0). One CSV line per kill on stdout.
//
// Agents and frameworks re-connect to a new leader after a uniform random
// wait in [0, --spread] (the ReconnectingLink's leaderChangeSpread), and
// re-register with their ids, secrets, executors and tasks.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <thread>

#include "base/asio.h"
#include "base/clock.h"
#include "base/flags.h"
#include "base/log.h"
#include "ha/detector_factory.h"
#include "proto/connection.h"
#include "proto/resources.h"

namespace {

using namespace allot;

struct Settings {
  std::string zk;
  std::string masterBinary;
  std::string workDir = "/tmp/allot-failover-bench";
  int64_t masters = 3;
  int64_t agents = 200;
  int64_t frameworks = 200;
  int64_t kills = 5;
  std::string signal = "kill";
  double sessionTimeoutS = 1;
  double spreadS = 1;
  int64_t sourceAddresses = 8;
  double roundTimeoutS = 60;
};

struct Peer {
  std::shared_ptr<Connection> conn;
  std::string id;
  std::string secret;
  bool registered = false;
  uint64_t generation = 0;
  std::unique_ptr<asio::steady_timer> timer;
};

struct MasterProc {
  pid_t pid = -1;
  uint16_t port = 0;
};

double msSince(TimePoint t0) { return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count(); }

class Bench {
 public:
  Bench(asio::io_context& io, Settings s) : io_(io), s_(std::move(s)) {
    agents_.resize(s_.agents);
    frameworks_.resize(s_.frameworks);
    taskResources_ = *Resources::parse("cpus:0.1;mem:16");
  }

  int run() {
    std::filesystem::create_directories(s_.workDir);
    for (int i = 0; i < s_.masters; ++i) {
      masters_.push_back(spawnMaster(i));
      waitFor([&] { return masters_.back().port != 0; }, 10);
      if (masters_.back().port == 0) return fail("master " + std::to_string(i) + " did not start");
      // Masters join in order: the first leads.
      runFor(std::chrono::milliseconds(300));
    }
    auto detector = makeLeaderDetector(io_, s_.zk);
    if (!detector) return fail(detector.error().describe());
    detector_ = std::move(*detector);
    detector_->start([this](const std::optional<Leader>& l) { onLeader(l); });
    if (!waitFor([&] { return registeredAgents() == agents_.size() &&
                              registeredFrameworks() == frameworks_.size() &&
                              running_ + 1 >= frameworks_.size(); }, 120))
      return fail("set-up did not finish: agents=" + std::to_string(registeredAgents()) +
                  " frameworks=" + std::to_string(registeredFrameworks()) +
                  " running=" + std::to_string(running_) + " offers=" + std::to_string(offersSeen_) +
                  " launched=" + std::to_string(launched_.size()) + " runTasks=" + std::to_string(runTasks_));
    std::printf("agents,frameworks,signal,kill,elected_ms,accepting_ms,agents_ms,frameworks_ms,"
                "offers_ms,tasks_lost,load1\n");
    for (int k = 1; k <= s_.kills; ++k) {
      if (int rc = killRound(k); rc != 0) return rc;
    }
    for (auto& m : masters_) stopMaster(m, SIGTERM);
    return 0;
  }

 private:
  int fail(const std::string& why) {
    std::cerr << "failover_bench: " << why << "\n";
    for (auto& m : masters_) stopMaster(m, SIGKILL);
    return 1;
  }

  MasterProc spawnMaster(int index) {
    std::string portFile = s_.workDir + "/master" + std::to_string(index) + ".port";
    std::filesystem::remove(portFile);
    MasterProc m;
    std::vector<std::string> args = {s_.masterBinary, "--listen", "127.0.0.1:0", "--port-file",
                                     portFile, "--zk", s_.zk, "--zk-session-timeout",
                                     std::to_string(s_.sessionTimeoutS), "--agent-timeout", "600",
                                     "--failover-timeout", "600", "--stats-interval", "0"};
    std::string log = s_.workDir + "/master" + std::to_string(index) + ".log";
    m.pid = fork();
    if (m.pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // no master outlives the bench
      FILE* out = std::fopen(log.c_str(), "a");
      if (out) dup2(fileno(out), 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 1000 && m.port == 0; ++i) {
      std::ifstream(portFile) >> m.port;
      if (m.port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return m;
  }

  void stopMaster(MasterProc& m, int sig) {
    if (m.pid <= 0) return;
    kill(m.pid, sig);
    int status = 0;
    waitpid(m.pid, &status, 0);
    m.pid = -1;
  }

  int killRound(int k) {
    size_t leaderIndex = masters_.size();
    for (size_t i = 0; i < masters_.size(); ++i) {
      if (leader_ && masters_[i].port == leader_->endpoint.port) leaderIndex = i;
    }
    if (leaderIndex == masters_.size()) return fail("no known leader among the masters");
    round_ = Round{};
    round_.active = true;
    round_.oldPort = masters_[leaderIndex].port;
    round_.t0 = SteadyClock::now();
    int sig = s_.signal == "term" ? SIGTERM : SIGKILL;
    kill(masters_[leaderIndex].pid, sig);
    bool done = waitFor([&] { return round_.offers >= 0 && round_.agents >= 0 && round_.frameworks >= 0; },
                        s_.roundTimeoutS);
    round_.active = false;
    double load = 0;
    std::ifstream("/proc/loadavg") >> load;
    std::printf("%zu,%zu,%s,%d,%.0f,%.0f,%.0f,%.0f,%.0f,%zu,%.2f\n", agents_.size(), frameworks_.size(),
                s_.signal.c_str(), k, round_.elected, round_.accepting, round_.agents, round_.frameworks,
                round_.offers, lost_, load);
    std::fflush(stdout);
    if (!done) return fail("round " + std::to_string(k) + " did not recover within --round-timeout");
    stopMaster(masters_[leaderIndex], SIGKILL);
    masters_[leaderIndex] = spawnMaster(static_cast<int>(leaderIndex));
    runFor(std::chrono::milliseconds(500));  // it joins as a standby
    return 0;
  }

  // ---------------------------------------------------------------- leader
  void onLeader(const std::optional<Leader>& leader) {
    bool changed = leader && (!leader_ || leader->endpoint != leader_->endpoint);
    leader_ = leader;
    if (!changed) return;
    if (round_.active && round_.elected < 0 && leader->endpoint.port != round_.oldPort)
      round_.elected = msSince(round_.t0);
    std::uniform_real_distribution<double> spread(0, s_.spreadS);
    for (size_t i = 0; i < agents_.size(); ++i) reconnectLater(agents_[i], i, true, spread(random_));
    for (size_t i = 0; i < frameworks_.size(); ++i) reconnectLater(frameworks_[i], i, false, spread(random_));
  }

  void reconnectLater(Peer& p, size_t index, bool agent, double seconds) {
    uint64_t generation = ++p.generation;
    if (p.conn) p.conn->close("leader changed");
    p.conn.reset();
    p.registered = false;
    if (!p.timer) p.timer = std::make_unique<asio::steady_timer>(io_);
    p.timer->expires_after(secondsToDuration(seconds));
    p.timer->async_wait([this, &p, index, agent, generation](const boost::system::error_code& ec) {
      if (!ec && generation == p.generation) connect(p, index, agent);
    });
  }

  void connect(Peer& p, size_t index, bool agent) {
    if (!leader_) return;
    uint64_t generation = p.generation;
    auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
    boost::system::error_code ec;
    socket->open(asio::ip::tcp::v4(), ec);
    auto source = asio::ip::make_address_v4(0x7f000002u + index % s_.sourceAddresses);
    if (!ec) socket->bind({source, 0}, ec);
    asio::ip::tcp::endpoint to(asio::ip::make_address(leader_->endpoint.host, ec), leader_->endpoint.port);
    socket->async_connect(to, [this, &p, index, agent, socket, generation](const boost::system::error_code& ec) {
      if (generation != p.generation) return;
      if (ec) return reconnectLater(p, index, agent, std::uniform_real_distribution<double>(0.05, 0.5)(random_));
      Connection::Options o;
      o.localRole = agent ? wire::ROLE_AGENT : wire::ROLE_SCHEDULER;
      o.localName = (agent ? "bench-agent-" : "bench-framework-") + std::to_string(index);
      p.conn = Connection::create(std::move(*socket), o);
      Connection::Handlers h;
      h.onHello = [this, &p, index, agent](const wire::Hello&) { agent ? registerAgent(p, index) : registerFramework(p, index); };
      h.onMessage = [this, &p, index, agent](wire::Envelope& e) { agent ? agentMessage(p, e) : frameworkMessage(p, e); };
      h.onClose = [this, &p, index, agent, generation](const std::string&) {
        if (generation != p.generation) return;
        reconnectLater(p, index, agent, std::uniform_real_distribution<double>(0.05, 0.5)(random_));
      };
      p.conn->start(std::move(h));
    });
  }

  void noteAccepting() {
    if (round_.active && round_.accepting < 0 && round_.elected >= 0) round_.accepting = msSince(round_.t0);
  }

  // ---------------------------------------------------------------- agents
  void registerAgent(Peer& p, size_t index) {
    wire::Envelope e;
    auto* r = e.mutable_register_agent();
    r->mutable_info()->set_id(p.id);
    r->mutable_info()->set_hostname("bench-" + std::to_string(index));
    Resources::parse("cpus:2;mem:2048")->toWire(r->mutable_info()->mutable_resources());
    r->set_agent_secret(p.secret);
    auto it = tasksByAgent_.find(p.id);
    if (!p.id.empty() && it != tasksByAgent_.end()) {
      for (const auto& run : it->second) {
        *r->add_frameworks() = run.framework();
        auto* ex = r->add_executors();
        ex->mutable_info()->set_framework_id(run.framework().id());
        ex->mutable_info()->set_executor_id(run.task().task_id());
        *ex->add_tasks() = run.task();
        auto* latest = ex->add_latest();
        latest->set_task_id(run.task().task_id());
        latest->set_framework_id(run.framework().id());
        latest->set_state(wire::TASK_RUNNING);
      }
    }
    (void)p.conn->send(e);
  }

  void agentMessage(Peer& p, const wire::Envelope& e) {
    if (e.has_agent_registered()) {
      noteAccepting();
      p.id = e.agent_registered().agent_id();
      if (!e.agent_registered().agent_secret().empty()) p.secret = e.agent_registered().agent_secret();
      p.registered = true;
      if (round_.active && round_.agents < 0 && registeredAgents() == agents_.size())
        round_.agents = msSince(round_.t0);
    } else if (e.has_run_task()) {
      ++runTasks_;
      tasksByAgent_[p.id].push_back(e.run_task());
      wire::Envelope s;
      auto* st = s.mutable_status_update()->mutable_status();
      st->set_task_id(e.run_task().task().task_id());
      st->set_framework_id(e.run_task().framework().id());
      st->set_agent_id(p.id);
      st->set_state(wire::TASK_RUNNING);
      st->set_update_id(e.run_task().task().task_id() + "/running");
      (void)p.conn->send(s);
    }
  }

  // ---------------------------------------------------------------- frameworks
  void registerFramework(Peer& p, size_t index) {
    wire::Envelope e;
    auto* r = e.mutable_register_framework();
    r->mutable_info()->set_id(p.id);
    r->mutable_info()->set_name("bench-" + std::to_string(index));
    r->mutable_info()->set_failover_timeout_s(600);
    // Framework 0 is the probe that measures "offers flow again": it always
    // wants offers and declines them. The others want offers only until
    // their task runs, as a real framework suppresses them: 200 frameworks
    // declining every agent would cost a new leader 200 x agents offers.
    r->set_needs_offers(index == 0 || !launched_.count(p.id));
    r->set_framework_secret(p.secret);
    (void)p.conn->send(e);
  }

  void frameworkMessage(Peer& p, const wire::Envelope& e) {
    if (e.has_framework_registered()) {
      noteAccepting();
      p.id = e.framework_registered().framework_id();
      if (!e.framework_registered().framework_secret().empty()) p.secret = e.framework_registered().framework_secret();
      p.registered = true;
      if (round_.active && round_.frameworks < 0 && registeredFrameworks() == frameworks_.size())
        round_.frameworks = msSince(round_.t0);
    } else if (e.has_resource_offers()) {
      if (round_.active && round_.offers < 0 && round_.elected >= 0) round_.offers = msSince(round_.t0);
      for (const auto& offer : e.resource_offers().offers()) {
        ++offersSeen_;
        answerOffer(p, offer);
      }
    } else if (e.has_status_update()) {
      const auto& s = e.status_update().status();
      if (s.state() == wire::TASK_RUNNING && s.reason() != wire::REASON_RECONCILIATION) ++running_;
      if (s.state() == wire::TASK_LOST) ++lost_;
      if (s.state() == wire::TASK_ERROR || s.state() == wire::TASK_LOST || s.state() == wire::TASK_FAILED)
        LOG_WARNING("task " << s.task_id() << ": " << wire::TaskState_Name(s.state()) << ": " << s.message());
      if (!s.update_id().empty()) {
        wire::Envelope ack;
        ack.mutable_acknowledge()->set_task_id(s.task_id());
        ack.mutable_acknowledge()->set_agent_id(s.agent_id());
        ack.mutable_acknowledge()->set_update_id(s.update_id());
        (void)p.conn->send(ack);
      }
    }
  }

  void answerOffer(Peer& p, const wire::Offer& offer) {
    wire::Envelope e;
    if (&p == &frameworks_[0]) {
      e.mutable_decline_offers()->add_offer_ids(offer.offer_id());
      e.mutable_decline_offers()->mutable_filters()->set_refuse_seconds(3600);
      (void)p.conn->send(e);
      return;
    }
    auto offered = Resources::fromWire(offer.resources());
    bool fits = offered && offered->contains(taskResources_);
    if (!launched_.count(p.id) && !fits) {  // wait for an agent with room
      e.mutable_decline_offers()->add_offer_ids(offer.offer_id());
      e.mutable_decline_offers()->mutable_filters()->set_refuse_seconds(1);
    } else if (!launched_.count(p.id)) {
      launched_.insert(p.id);
      auto* a = e.mutable_accept_offers();
      a->add_offer_ids(offer.offer_id());
      auto* t = a->add_tasks();
      t->set_task_id(p.id + "-task");
      t->set_agent_id(offer.agent_id());
      t->mutable_command()->set_shell("sleep 1d");
      t->set_long_lived(true);
      taskResources_.toWire(t->mutable_resources());
      a->mutable_filters()->set_refuse_seconds(3600);
      (void)p.conn->send(e);
      wire::Envelope quiet;
      quiet.mutable_set_needs_offers()->set_needs_offers(false);
      e = quiet;
    } else {
      e.mutable_decline_offers()->add_offer_ids(offer.offer_id());
      e.mutable_decline_offers()->mutable_filters()->set_refuse_seconds(3600);
    }
    (void)p.conn->send(e);
  }

  // ---------------------------------------------------------------- loop
  size_t registeredAgents() const { return std::count_if(agents_.begin(), agents_.end(), [](const Peer& p) { return p.registered; }); }
  size_t registeredFrameworks() const { return std::count_if(frameworks_.begin(), frameworks_.end(), [](const Peer& p) { return p.registered; }); }

  bool waitFor(const std::function<bool()>& done, double seconds) {
    auto deadline = SteadyClock::now() + secondsToDuration(seconds);
    while (!done() && SteadyClock::now() < deadline) {
      io_.restart();
      io_.run_for(std::chrono::milliseconds(5));
    }
    return done();
  }
  void runFor(Duration d) { waitFor([] { return false; }, std::chrono::duration<double>(d).count()); }

  struct Round {
    bool active = false;
    uint16_t oldPort = 0;
    TimePoint t0;
    double elected = -1, accepting = -1, agents = -1, frameworks = -1, offers = -1;
  };

  asio::io_context& io_;
  Settings s_;
  std::vector<MasterProc> masters_;
  std::unique_ptr<LeaderDetector> detector_;
  std::optional<Leader> leader_;
  std::vector<Peer> agents_;
  std::vector<Peer> frameworks_;
  std::unordered_map<std::string, std::vector<wire::RunTask>> tasksByAgent_;
  std::unordered_set<std::string> launched_;
  Resources taskResources_;
  size_t running_ = 0;
  size_t offersSeen_ = 0;
  size_t runTasks_ = 0;
  size_t lost_ = 0;
  Round round_;
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace

int main(int argc, char** argv) {
  setLogProgram("failover_bench");
  Settings s;
  Flags flags("failover_bench", "Paper experiment 6.6: master failover through ZooKeeper.");
  flags.addString("zk", &s.zk, "zk://host:port/path of the masters' group");
  flags.addString("master-binary", &s.masterBinary, "path of allot-master");
  flags.addString("work-dir", &s.workDir, "directory for the masters' logs and port files");
  flags.addInt("masters", &s.masters, "masters to run");
  flags.addInt("agents", &s.agents, "emulated agents");
  flags.addInt("frameworks", &s.frameworks, "emulated frameworks (one long-lived task each)");
  flags.addInt("kills", &s.kills, "leader kills");
  flags.addString("signal", &s.signal, "kill (SIGKILL) or term (SIGTERM)");
  flags.addDouble("zk-session-timeout", &s.sessionTimeoutS, "the masters' --zk-session-timeout");
  flags.addDouble("spread", &s.spreadS, "clients reconnect to a new leader within this many seconds");
  flags.addInt("source-addresses", &s.sourceAddresses, "loopback source addresses 127.0.0.2..");
  flags.addDouble("round-timeout", &s.roundTimeoutS, "give up on a round after this many seconds");
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  if (s.zk.empty() || s.masterBinary.empty() || s.masters < 2 || s.agents < 1 || s.frameworks < 1 ||
      s.frameworks > s.agents * 20 || (s.signal != "kill" && s.signal != "term") ||
      s.sourceAddresses < 1 || s.sourceAddresses > 200) {
    std::cerr << "failover_bench: need --zk, --master-binary, --masters >= 2, --signal kill|term\n";
    return 2;
  }
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  signal(SIGPIPE, SIG_IGN);
  asio::io_context io(1);
  Bench bench(io, s);
  return bench.run();
}
