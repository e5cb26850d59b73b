#include "bench/failover/emulated_peers.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <utility>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/asio.h"
#include "base/clock.h"
#include "base/log.h"
#include "bench/failover/shared_detector.h"
#include "ha/detector_factory.h"
#include "proto/reconnecting_link.h"
#include "proto/resources.h"

namespace allot {
namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count();
}

void event(char kind, const std::string& value) {
  std::printf("%c %lld %s\n", kind, static_cast<long long>(nowNs()), value.c_str());
  std::fflush(stdout);
}

// The loop thread's time on a CPU and waiting for one (run queue), in ns
// since it started (/proc/thread-self/schedstat); zeros if unreadable.
std::pair<int64_t, int64_t> loopSchedNs() {
  long long onCpu = 0, waiting = 0;
  if (FILE* f = std::fopen("/proc/thread-self/schedstat", "r")) {
    if (std::fscanf(f, "%lld %lld", &onCpu, &waiting) != 2) onCpu = waiting = 0;
    std::fclose(f);
  }
  return {onCpu, waiting};
}

struct AgentPeer {
  std::unique_ptr<ReconnectingLink> link;
  size_t index = 0;
  std::string id;
  std::string secret;
  bool registered = false;
  // Re-registered with as RUNNING: the running tasks and, as the real agent
  // does, those whose terminal update is not acknowledged yet.
  std::vector<wire::RunTask> tasks;
  std::unordered_set<std::string> ended;   // task ids of finished tasks
  std::vector<wire::TaskStatus> pending;   // sent, not yet acknowledged
};

struct FrameworkPeer {
  std::unique_ptr<ReconnectingLink> link;
  size_t index = 0;
  std::string id;
  std::string secret;
  bool registered = false;
  bool launched = false;
  std::string agentId;  // where its tasks run
  // Reconciliation after kill `reconcileRound`: the tasks still to be
  // confirmed RUNNING by an explicit answer.
  std::unordered_set<std::string> unconfirmed;
  size_t asked = 0;
};

class Worker {
 public:
  Worker(asio::io_context& io, const WorkerSettings& s, std::unique_ptr<LeaderDetector> detector)
      : io_(io), s_(s), detector_(io, std::move(detector), static_cast<size_t>(s.fanoutChunk),
                  static_cast<size_t>(s.fanoutEqualPasses)), startTimer_(io), retryTimer_(io),
        input_(io, ::dup(STDIN_FILENO)) {
    taskResources_ = *Resources::parse("cpus:0.1;mem:16");
    agentResources_ = *Resources::parse("cpus:2;mem:2048");
    for (int64_t i = s.workerIndex; i < s.agents; i += s.workers) {
      agents_.push_back(std::make_unique<AgentPeer>());
      agents_.back()->index = static_cast<size_t>(i);
    }
    for (int64_t i = s.workerIndex; i < s.frameworks; i += s.workers) {
      frameworks_.push_back(std::make_unique<FrameworkPeer>());
      frameworks_.back()->index = static_cast<size_t>(i);
    }
  }

  ~Worker() {
    for (auto& a : agents_) a->link.reset();
    for (auto& f : frameworks_) f->link.reset();
    watch_.reset();
  }

  void start() {
    // When this worker's detector learns of each leader (the links hear it
    // in the same callback).
    watch_ = detector_.view();
    watch_->start([this](const std::optional<Leader>& leader) {
      if (leader) event('D', std::to_string(leader->endpoint.port) + diagnostics());
    });
    detector_.onToldAll([this](const std::optional<Leader>& leader) {
      if (leader) event('G', std::to_string(leader->endpoint.port) + diagnostics());
    });
    detector_.start();
    readCommand();
    scheduleRetry();
    startSome(0);
  }

 private:
  // ------------------------------------------------------------ set-up
  // Links start in slices over startSpreadS so the first registration is
  // not one burst (a real fleet's agents start at different times).
  void startSome(size_t from) {
    size_t total = agents_.size() + frameworks_.size();
    size_t slices = 20;
    size_t to = std::min(total, from + (total + slices - 1) / slices);
    for (size_t i = from; i < to; ++i) {
      if (i < frameworks_.size()) startFramework(*frameworks_[i]);
      else startAgent(*agents_[i - frameworks_.size()]);
    }
    if (to >= total) return;
    startTimer_.expires_after(secondsToDuration(s_.startSpreadS / slices));
    startTimer_.async_wait([this, to](const boost::system::error_code& ec) {
      if (!ec) startSome(to);
    });
  }

  ReconnectingLink::Options linkOptions(wire::Role role, const std::string& name) const {
    ReconnectingLink::Options o;  // the defaults agent/master_link.h and sdk/scheduler.h use
    o.localRole = role;
    o.localName = name;
    return o;
  }

  void startAgent(AgentPeer& a) {
    ReconnectingLink::Callbacks cb;
    cb.onConnected = [this, &a](const wire::Hello&) {
      noteHello(*a.link);
      registerAgent(a);
    };
    cb.onMessage = [this, &a](wire::Envelope& e) { agentMessage(a, e); };
    cb.onDisconnected = [this, &a](const std::string&) {
      noteLost();
      setRegistered(a.registered, false, true);
    };
    a.link = std::make_unique<ReconnectingLink>(
        io_, detector_.view(), linkOptions(wire::ROLE_AGENT, "bench-agent-" + std::to_string(a.index)),
        std::move(cb));
    a.link->start();
  }

  void startFramework(FrameworkPeer& f) {
    ReconnectingLink::Callbacks cb;
    cb.onConnected = [this, &f](const wire::Hello&) {
      noteHello(*f.link);
      registerFramework(f);
    };
    cb.onMessage = [this, &f](wire::Envelope& e) { frameworkMessage(f, e); };
    cb.onDisconnected = [this, &f](const std::string&) {
      noteLost();
      setRegistered(f.registered, false, false);
    };
    f.link = std::make_unique<ReconnectingLink>(
        io_, detector_.view(),
        linkOptions(wire::ROLE_SCHEDULER, "bench-framework-" + std::to_string(f.index)), std::move(cb));
    f.link->start();
  }

  // ------------------------------------------------------------ counting
  void setRegistered(bool& flag, bool value, bool agent) {
    if (flag == value) return;
    flag = value;
    size_t& count = agent ? agentsRegistered_ : frameworksRegistered_;
    size_t total = agent ? agents_.size() : frameworks_.size();
    bool wasFull = count == total;
    count += value ? 1 : -1;
    bool full = count == total;
    if (full != wasFull) event(agent ? 'A' : 'F', full ? "1" : "0");
  }

  void noteHello(const ReconnectingLink& link) {
    if (!link.leader()) return;
    uint16_t port = link.leader()->endpoint.port;
    if (port == helloPort_) return;
    helloPort_ = port;
    event('H', std::to_string(port) + diagnostics());
  }

  // 'R' for the first agent, 'S' for the first framework, per leader.
  void noteAccepted(const ReconnectingLink& link, bool agent) {
    if (!link.leader()) return;
    uint16_t port = link.leader()->endpoint.port;
    uint16_t& last = agent ? agentAcceptedPort_ : frameworkAcceptedPort_;
    if (port == last) return;
    last = port;
    event(agent ? 'R' : 'S', std::to_string(port) + diagnostics());
  }

  // ------------------------------------------------------------ diagnosis
  // Where a failover's time goes in this worker: its links lost since the
  // driver's "finish" (sent right before the signal), and the loop
  // thread's CPU time and run-queue wait since then, appended to D, H, R
  // and S events.
  void markRound(int64_t k) {
    lostInRound_ = 0;
    firstLostSeen_ = false;
    round_ = k;
    auto [onCpu, waiting] = loopSchedNs();
    event('K', std::to_string(k) + " " + std::to_string(onCpu) + " " + std::to_string(waiting));
  }

  void noteLost() {
    ++lostInRound_;
    if (firstLostSeen_ || round_ == 0) return;
    firstLostSeen_ = true;
    event('E', std::to_string(round_));
  }

  std::string diagnostics() const {
    auto [onCpu, waiting] = loopSchedNs();
    return " " + std::to_string(lostInRound_) + " " + std::to_string(onCpu) + " " + std::to_string(waiting);
  }

  // ------------------------------------------------------------ agents
  void registerAgent(AgentPeer& a) {
    wire::Envelope e;
    auto* r = e.mutable_register_agent();
    r->mutable_info()->set_id(a.id);
    r->mutable_info()->set_hostname("bench-" + std::to_string(a.index));
    agentResources_.toWire(r->mutable_info()->mutable_resources());
    r->set_agent_secret(a.secret);
    for (const auto& run : a.tasks) {
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
    (void)a.link->send(e);
  }

  void agentMessage(AgentPeer& a, const wire::Envelope& e) {
    if (e.has_agent_registered()) {
      noteAccepted(*a.link, true);
      a.id = e.agent_registered().agent_id();
      if (!e.agent_registered().agent_secret().empty()) a.secret = e.agent_registered().agent_secret();
      a.link->registered();
      setRegistered(a.registered, true, true);
      resend(a);
    } else if (e.has_run_task()) {
      a.tasks.push_back(e.run_task());
      update(a, e.run_task().task().task_id(), e.run_task().framework().id(), wire::TASK_RUNNING);
    } else if (e.has_status_acknowledgement()) {
      const std::string& id = e.status_acknowledgement().update_id();
      std::erase_if(a.pending, [&](const wire::TaskStatus& s) { return s.update_id() == id; });
      const std::string& task = e.status_acknowledgement().task_id();
      if (a.ended.count(task) && id == task + "/TASK_FINISHED") {
        std::erase_if(a.tasks, [&](const wire::RunTask& r) { return r.task().task_id() == task; });
        a.ended.erase(task);
      }
    }
  }

  void update(AgentPeer& a, const std::string& task, const std::string& framework, wire::TaskState state) {
    wire::TaskStatus s;
    s.set_task_id(task);
    s.set_framework_id(framework);
    s.set_executor_id(task);
    s.set_state(state);
    s.set_update_id(task + "/" + wire::TaskState_Name(state));
    a.pending.push_back(s);
    if (a.registered) send(a, s);
  }

  void send(AgentPeer& a, const wire::TaskStatus& s) {
    wire::Envelope e;
    *e.mutable_status_update()->mutable_status() = s;
    e.mutable_status_update()->mutable_status()->set_agent_id(a.id);
    (void)a.link->send(e);
  }

  void resend(AgentPeer& a) {
    for (const auto& s : a.pending) send(a, s);
  }

  void scheduleRetry() {
    retryTimer_.expires_after(secondsToDuration(s_.statusRetryS));
    retryTimer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      for (auto& a : agents_) {
        if (a->registered) resend(*a);
      }
      scheduleRetry();
    });
  }

  // Ends round k's tasks: TASK_FINISHED, kept until acknowledged.
  void finishRound(int64_t k) {
    std::string suffix = "-r" + std::to_string(k);
    for (auto& a : agents_) {
      for (const auto& run : a->tasks) {
        const std::string& id = run.task().task_id();
        if (!id.ends_with(suffix) || !a->ended.insert(id).second) continue;
        update(*a, id, run.framework().id(), wire::TASK_FINISHED);
      }
    }
  }

  // ------------------------------------------------------------ frameworks
  bool isProbe(const FrameworkPeer& f) const { return f.index == 0; }

  void registerFramework(FrameworkPeer& f) {
    wire::Envelope e;
    auto* r = e.mutable_register_framework();
    r->mutable_info()->set_id(f.id);
    r->mutable_info()->set_name("bench-" + std::to_string(f.index));
    r->mutable_info()->set_failover_timeout_s(600);
    // Frameworks want offers only until their tasks run, as a real
    // framework suppresses them: 200 frameworks declining every agent would
    // cost a new leader 200 x agents offers.
    r->set_needs_offers(isProbe(f) || !f.launched);
    r->set_framework_secret(f.secret);
    (void)f.link->send(e);
  }

  void frameworkMessage(FrameworkPeer& f, const wire::Envelope& e) {
    if (e.has_framework_registered()) {
      noteAccepted(*f.link, false);
      f.id = e.framework_registered().framework_id();
      if (!e.framework_registered().framework_secret().empty()) f.secret = e.framework_registered().framework_secret();
      f.link->registered();
      setRegistered(f.registered, true, false);
    } else if (e.has_resource_offers()) {
      for (const auto& offer : e.resource_offers().offers()) answerOffer(f, offer);
    } else if (e.has_status_update()) {
      onStatus(f, e.status_update().status());
    }
  }

  void onStatus(FrameworkPeer& f, const wire::TaskStatus& s) {
    if (s.reason() == wire::REASON_RECONCILIATION) return reconciled(f, s);
    if (s.state() == wire::TASK_RUNNING && s.reason() != wire::REASON_RECONCILIATION &&
        runningSeen_.insert(s.task_id()).second) {
      event('U', std::to_string(runningSeen_.size()));
    }
    if (s.state() == wire::TASK_LOST) event('L', s.task_id());
    if (s.state() == wire::TASK_FINISHED && finishedSeen_.insert(s.task_id()).second) {
      auto at = s.task_id().rfind("-r");
      event('T', at == std::string::npos ? "0" : s.task_id().substr(at + 2));
    }
    if (s.state() == wire::TASK_ERROR || s.state() == wire::TASK_LOST || s.state() == wire::TASK_FAILED)
      LOG_WARNING("task " << s.task_id() << ": " << wire::TaskState_Name(s.state()) << ": " << s.message());
    if (s.update_id().empty()) return;
    wire::Envelope ack;
    ack.mutable_acknowledge()->set_task_id(s.task_id());
    ack.mutable_acknowledge()->set_agent_id(s.agent_id());
    ack.mutable_acknowledge()->set_update_id(s.update_id());
    (void)f.link->send(ack);
  }

  void answerOffer(FrameworkPeer& f, const wire::Offer& offer) {
    wire::Envelope e;
    Resources wanted = taskResources_;
    for (int64_t k = 0; k < s_.rounds; ++k) wanted += taskResources_;
    auto offered = Resources::fromWire(offer.resources());
    if (isProbe(f) || f.launched || !offered || !offered->contains(wanted)) {
      if (isProbe(f) && f.link->leader() && f.link->leader()->endpoint.port != offerPort_) {
        offerPort_ = f.link->leader()->endpoint.port;
        event('O', std::to_string(offerPort_));
      }
      e.mutable_decline_offers()->add_offer_ids(offer.offer_id());
      // A framework still waiting for room looks again soon.
      e.mutable_decline_offers()->mutable_filters()->set_refuse_seconds(isProbe(f) || f.launched ? 3600 : 1);
      (void)f.link->send(e);
      return;
    }
    f.launched = true;
    f.agentId = offer.agent_id();
    auto* a = e.mutable_accept_offers();
    a->add_offer_ids(offer.offer_id());
    for (int64_t k = 0; k <= s_.rounds; ++k) {
      auto* t = a->add_tasks();
      t->set_task_id(f.id + (k == 0 ? std::string("-long") : "-r" + std::to_string(k)));
      t->set_agent_id(offer.agent_id());
      t->mutable_command()->set_shell("sleep 1d");
      t->set_long_lived(k == 0);
      taskResources_.toWire(t->mutable_resources());
    }
    a->mutable_filters()->set_refuse_seconds(3600);
    (void)f.link->send(e);
    wire::Envelope quiet;
    quiet.mutable_set_needs_offers()->set_needs_offers(false);
    (void)f.link->send(quiet);
  }

  // ------------------------------------------------------------ reconciliation
  // The true state of a framework's task after kill `round_`: round j's task
  // finished at kill j, the long-lived one and later rounds' still run.
  // Nullopt: not one of its tasks.
  std::optional<wire::TaskState> trueState(const FrameworkPeer& f, const std::string& task) const {
    if (task == f.id + "-long") return wire::TASK_RUNNING;
    std::string prefix = f.id + "-r";
    if (!task.starts_with(prefix)) return std::nullopt;
    int64_t j = std::atoll(task.c_str() + prefix.size());
    return j <= reconcileRound_ ? wire::TASK_FINISHED : wire::TASK_RUNNING;
  }

  // Every framework asks twice: explicitly for the tasks it believes run
  // (each answer must be RUNNING), and implicitly (every task the master
  // knows; each answer must be the task's true state).
  void reconcileAll(int64_t round) {
    reconcileRound_ = round;
    for (auto& fp : frameworks_) {
      FrameworkPeer& f = *fp;
      if (isProbe(f) || !f.launched) continue;
      f.unconfirmed.clear();
      wire::Envelope e;
      auto* explicitly = e.mutable_reconcile();
      auto ask = [&](const std::string& task) {
        f.unconfirmed.insert(task);
        auto* ref = explicitly->add_tasks();
        ref->set_task_id(task);
        ref->set_agent_id(f.agentId);
      };
      ask(f.id + "-long");
      for (int64_t j = round + 1; j <= s_.rounds; ++j) ask(f.id + "-r" + std::to_string(j));
      f.asked = f.unconfirmed.size();
      (void)f.link->send(e);
      wire::Envelope implicitly;
      implicitly.mutable_reconcile();
      (void)f.link->send(implicitly);
    }
  }

  void reconciled(FrameworkPeer& f, const wire::TaskStatus& s) {
    if (s.state() == wire::TASK_LOST) event('L', s.task_id());
    if (s.state() != trueState(f, s.task_id())) {
      event('W', s.task_id() + ":" + wire::TaskState_Name(s.state()));
      return;
    }
    if (f.unconfirmed.erase(s.task_id()) && f.unconfirmed.empty()) {
      event('C', std::to_string(f.asked));
    }
  }

  // ------------------------------------------------------------ driver
  void readCommand() {
    asio::async_read_until(input_, command_, '\n', [this](const boost::system::error_code& ec, size_t) {
      if (ec) {
        io_.stop();  // the driver is gone
        return;
      }
      std::istream in(&command_);
      std::string verb;
      int64_t k = 0;
      in >> verb >> k;
      in.ignore(1 << 20, '\n');
      if (verb == "finish") {
        markRound(k);
        finishRound(k);
      }
      if (verb == "reconcile") reconcileAll(k);
      readCommand();
    });
  }

  asio::io_context& io_;
  WorkerSettings s_;
  SharedDetector detector_;
  std::unique_ptr<LeaderDetector> watch_;
  asio::steady_timer startTimer_;
  asio::steady_timer retryTimer_;
  asio::posix::stream_descriptor input_;
  asio::streambuf command_;
  Resources taskResources_;
  Resources agentResources_;
  std::vector<std::unique_ptr<AgentPeer>> agents_;
  std::vector<std::unique_ptr<FrameworkPeer>> frameworks_;
  size_t agentsRegistered_ = 0;
  size_t frameworksRegistered_ = 0;
  uint16_t agentAcceptedPort_ = 0;
  uint16_t frameworkAcceptedPort_ = 0;
  uint16_t helloPort_ = 0;
  uint16_t offerPort_ = 0;
  int64_t reconcileRound_ = 0;
  int64_t round_ = 0;            // the latest "finish" round
  int64_t lostInRound_ = 0;      // links lost since it
  bool firstLostSeen_ = false;
  std::unordered_set<std::string> runningSeen_;
  std::unordered_set<std::string> finishedSeen_;
};

}  // namespace

int runWorker(const WorkerSettings& s) {
  asio::io_context io(1);
  auto detector = makeLeaderDetector(io, s.zk);
  if (!detector) {
    std::cerr << "failover_bench worker: " << detector.error().describe() << "\n";
    return 2;
  }
  Worker worker(io, s, std::move(*detector));
  worker.start();
  io.run();
  return 0;
}

}  // namespace allot
