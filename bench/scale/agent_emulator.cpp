// agent_emulator: hosts many emulated agents in one process (paper section
// 6.5). Each agent is a real protocol peer with its own TCP connection to
// the master, spread over loopback source addresses 127.0.0.2 and up (one
// address has only ~28k ephemeral ports). Agents register their resources,
// heartbeat a quiet link, and "run" each task by answering RUNNING and, after the
// task's duration (TaskInfo.data holds the seconds as text), FINISHED.
//
// Reconnection, as the real agent's link does it (proto/reconnecting_link.h):
// an attempt (TCP connect, TLS + Hello, registration) that fails, is closed,
// or takes longer than --attempt-timeout is retried after the production
// Backoff (full jitter, --reconnect-min doubling to --reconnect-max, reset by
// a registration); an agent that loses a registered link re-registers with
// its id and secret and, as the real agent does, every task it runs and
// every FINISHED the master has not acknowledged yet (sent again once
// registered: an update sent into a link that died is not lost), so a new
// or restarted master knows them. At most
// --connect-burst agents are mid-attempt or waiting to retry while ramping
// up. The report lines count retries.
//
// Link shards (--shards HOST:PORT,...), as the real agent uses them
// (agent/master_link.h): each agent ranks the shards by rendezvous hashing
// of its own key (proto/shard_placement.h) and connects to its first choice;
// it moves to its next choice when a registered link is lost, or when no
// registration came through its shard for kShardRegistrationTimeout. When
// its shard hands it to a new leader the agent hears nothing unless it has
// updates to send again: then an AgentRegistered it did not ask for, from
// another master, arrives, which it takes as a registration (sending again
// every FINISHED not acknowledged); it never sends its own report again.
// The report lines count both (moves=, handovers=); a line says when every
// agent is registered again after lost links.
#include <netinet/in.h>
#include <sys/resource.h>

#include <algorithm>

#include <cstdio>
#include <ctime>
#include <iostream>
#include <optional>
#include <queue>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "base/asio.h"
#include "base/clock.h"
#include "base/files.h"
#include "base/flags.h"
#include "base/log.h"
#include "proto/connection.h"
#include "proto/shard_placement.h"
#include "proto/reconnecting_link.h"
#include "proto/tls.h"
#include "proto/resources.h"

namespace {

using namespace allot;

using BindAddressNoPort = asio::detail::socket_option::boolean<IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT>;

// The real agent's patience with a shard that does not register it
// (agent/master_link.h).
constexpr auto kShardRegistrationTimeout = std::chrono::seconds(5);

struct Settings {
  std::string master = "127.0.0.1:5050";
  std::string shards;  // HOST:PORT,...: link shards instead of --master
  int64_t agents = 1000;
  std::string resources = "cpus:2;mem:2048";
  int64_t sourceAddresses = 4;
  int64_t connectBurst = 256;
  int64_t firstSource = 2;  // 127.0.0.<firstSource> is the first source address
  // The real agent's defaults (agent/master_link.h, ReconnectingLink).
  double attemptTimeoutS = 10;
  double reconnectMinS = 0.1;
  double reconnectMaxS = 5;
  TlsFiles tls;
};

// A task an emulated agent "runs": RUNNING until it is due, then FINISHED,
// kept until the master acknowledges that update. `serial` tells this
// launch from an earlier one of the same task (killed meanwhile).
struct EmulatedTask {
  wire::RunTask run;
  uint64_t serial = 0;
  wire::TaskState state = wire::TASK_RUNNING;

  bool is(const std::string& frameworkId, const std::string& taskId) const {
    return run.task().task_id() == taskId && run.framework().id() == frameworkId;
  }
};

// When a running task of agent `index` ends: one timer serves every task
// of the emulator (a timer per task costs an allocation and a timer queue
// entry per launch).
struct TaskDue {
  std::chrono::steady_clock::time_point at;
  size_t index = 0;
  uint64_t serial = 0;
  bool operator>(const TaskDue& other) const { return at > other.at; }
};

struct Agent {
  std::shared_ptr<Connection> conn;
  std::shared_ptr<asio::ip::tcp::socket> connecting;  // while the TCP connect runs
  std::string id;
  std::string secret;
  std::unique_ptr<asio::steady_timer> heartbeat;
  // Bounds an attempt (connect -> AgentRegistered), then times the retry.
  std::unique_ptr<asio::steady_timer> attempt;
  std::unique_ptr<Backoff> backoff;  // made at the first failure
  // Emulated tasks (an agent runs a few: found by a scan), so a KillTask
  // (a revocation, a drain, a framework's kill) ends them as a real agent
  // would, and a re-registration lists them.
  std::vector<EmulatedTask> tasks;
  std::string masterId;  // the master that last registered this agent
  double interval = 5;
  size_t shardChoice = 0;  // into the agent's ranking of the shards
  std::chrono::steady_clock::time_point shardSince;  // when it moved to that shard
  uint64_t sequence = 0;
  // Traffic in the current heartbeat interval, each way (heartbeats not
  // counted): heartbeats as the real agent sends them (agent/master_link.h).
  bool sent = false;
  bool heard = false;
  int unanswered = 0;  // heartbeats sent since the last frame heard
  uint64_t generation = 0;  // callbacks of an older attempt see a newer value and stop
  bool registered = false;
  bool everRegistered = false;
};

class Emulator {
 public:
  // `shards` empty: every agent links to `master`.
  Emulator(asio::io_context& io, Settings s, HostPort master, std::vector<Endpoint> shards, Resources resources,
           std::shared_ptr<ssl::context> tls)
      : io_(io), s_(std::move(s)), master_(std::move(master)), shards_(std::move(shards)),
        resources_(std::move(resources)), tls_(std::move(tls)), agents_(s_.agents), taskTimer_(io), report_(io) {}

  void start() {
    started_ = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < std::min(s_.connectBurst, s_.agents); ++i) connectNext();
    scheduleReport();
  }

 private:
  void connectNext() {
    if (next_ >= static_cast<size_t>(s_.agents)) return;
    size_t index = next_++;
    Agent& agent = agents_[index];
    agent.heartbeat = std::make_unique<asio::steady_timer>(io_);
    agent.attempt = std::make_unique<asio::steady_timer>(io_);
    agent.shardSince = std::chrono::steady_clock::now();
    attemptConnect(index);
  }

  // Where agent `index` connects: --master, or its current choice of shard
  // (its ranking is recomputed: a few hashes, and no per-agent copy).
  HostPort target(size_t index) const {
    if (shards_.empty()) return master_;
    std::vector<Endpoint> ranked = rankShards(shards_, shardKey(index));
    const Endpoint& e = ranked[agents_[index].shardChoice % ranked.size()];
    return HostPort{e.host, e.port};
  }
  std::string shardKey(size_t index) const {
    return "emu-" + std::to_string(s_.firstSource) + "-" + std::to_string(index);
  }

  // The real agent's rule: on to the next shard when a registered link is
  // lost, or when its shard has not registered it for a while.
  void maybeMoveOn(Agent& agent, bool lostRegisteredLink) {
    if (shards_.size() < 2) return;
    auto now = std::chrono::steady_clock::now();
    if (!lostRegisteredLink && now - agent.shardSince < kShardRegistrationTimeout) return;
    ++agent.shardChoice;
    agent.shardSince = now;
    ++moves_;
  }

  void attemptConnect(size_t index) {
    Agent& agent = agents_[index];
    uint64_t generation = ++agent.generation;
    auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
    // 127.0.0.2, 127.0.0.3, ...: every loopback address has its own ports.
    auto source = asio::ip::make_address_v4(0x7f000000u + s_.firstSource + index % s_.sourceAddresses);
    boost::system::error_code ec;
    socket->open(asio::ip::tcp::v4(), ec);
    // The port is chosen at connect, by the whole 4-tuple: a bind to port 0
    // would search every port bound on the host for a free one (most of a
    // core once 100,000 agent links are open).
    if (!ec) socket->set_option(BindAddressNoPort(true), ec);
    if (!ec) socket->bind({source, 0}, ec);
    if (ec) {
      std::cerr << "agent_emulator: agent " << index << ": socket from " << source << ": "
                << ec.message() << "\n";
      std::exit(1);
    }
    agent.connecting = socket;
    agent.attempt->expires_after(secondsToDuration(s_.attemptTimeoutS));
    agent.attempt->async_wait([this, index, generation](const boost::system::error_code& ec) {
      // A registration that arrived while this expiry was queued stands.
      if (!ec && !agents_[index].registered) fail(index, generation, "attempt timed out");
    });
    HostPort peer = target(index);
    asio::ip::tcp::endpoint to(asio::ip::make_address(peer.host), peer.port);
    socket->async_connect(to, [this, socket, index, generation](const boost::system::error_code& ec) {
      if (generation != agents_[index].generation) return;
      agents_[index].connecting.reset();
      if (ec) return fail(index, generation, "connect: " + ec.message());
      boost::system::error_code ignored;
      socket->set_option(asio::ip::tcp::no_delay(true), ignored);
      attach(index, generation, std::move(*socket));
    });
  }

  // Ends the current attempt or link of agent `index` (if `generation` is
  // still current) and schedules the next attempt after the backoff.
  void fail(size_t index, uint64_t generation, const std::string& reason) {
    Agent& agent = agents_[index];
    if (generation != agent.generation) return;
    uint64_t next = ++agent.generation;
    if (agent.connecting) agent.connecting->close();
    agent.connecting.reset();
    if (auto conn = std::move(agent.conn)) conn->close(reason);
    agent.heartbeat->cancel();
    maybeMoveOn(agent, agent.registered);
    if (agent.registered) {
      ++disconnects_;
      --registeredNow_;
      allBack_ = false;
      agent.registered = false;
    } else {
      ++failed_;
    }
    if (failed_ + disconnects_ <= 20 || (failed_ + disconnects_) % 1000 == 0) {
      LOG_WARNING("agent " << index << ": " << reason << " (" << failed_ << " failed attempts, "
                           << disconnects_ << " lost links so far)");
    }
    if (!agent.backoff) {
      agent.backoff = std::make_unique<Backoff>(secondsToDuration(s_.reconnectMinS),
                                                secondsToDuration(s_.reconnectMaxS), index + 1);
    }
    ++retries_;
    agent.attempt->expires_after(agent.backoff->next());
    agent.attempt->async_wait([this, index, next](const boost::system::error_code& ec) {
      if (!ec && next == agents_[index].generation) attemptConnect(index);
    });
  }

  void attach(size_t index, uint64_t generation, asio::ip::tcp::socket socket) {
    Agent& agent = agents_[index];
    Connection::Options o;
    o.localRole = wire::ROLE_AGENT;
    o.localName = "emulated-agent-" + std::to_string(index);
    o.tls = tls_;
    // A shard speaks for the master with a certificate of its own role.
    std::string peerRole = shards_.empty() ? "master" : "shard";
    o.requirePeerCertRole = tls_ ? peerRole : "";
    o.peerHelloCertRole = tls_ ? peerRole : "";
    o.handshakeTimeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(secondsToDuration(s_.attemptTimeoutS));
    agent.conn = Connection::create(std::move(socket), o);
    Connection::Handlers h;
    h.onHello = [this, index](const wire::Hello&) { sendRegistration(index); };
    h.onMessage = [this, index](wire::Envelope& e) { onMessage(index, e); };
    h.onClose = [this, index, generation](const std::string& reason) {
      fail(index, generation, "link closed: " + reason);
    };
    agent.conn->start(std::move(h));
  }

  void sendRegistration(size_t index) {
    Agent& agent = agents_[index];
    wire::Envelope e;
    auto* reg = e.mutable_register_agent();
    auto* info = reg->mutable_info();
    info->set_id(agent.id);
    info->set_hostname("emu-" + std::to_string(index));
    resources_.toWire(info->mutable_resources());
    reg->set_agent_secret(agent.secret);
    listTasks(agent, reg);
    (void)agent.conn->send(e);
  }

  void onMessage(size_t index, wire::Envelope& e) {
    Agent& agent = agents_[index];
    agent.heard = true;
    agent.unanswered = 0;
    if (e.has_agent_registered() && agent.registered && e.agent_registered().master_id() != agent.masterId) {
      // Handed to a new leader by the shard with the report it kept, and
      // told so for its unacknowledged updates: the new leader holds the
      // agent's state; only what it may have missed goes again.
      agent.masterId = e.agent_registered().master_id();
      agent.id = e.agent_registered().agent_id();
      agent.secret = e.agent_registered().agent_secret();
      agent.interval = e.agent_registered().heartbeat_interval_s();
      ++handovers_;
      sendFinishedUnacknowledged(index);
      return;
    }
    if (e.has_agent_registered()) {
      agent.masterId = e.agent_registered().master_id();
      agent.attempt->cancel();
      agent.id = e.agent_registered().agent_id();
      agent.secret = e.agent_registered().agent_secret();
      agent.interval = e.agent_registered().heartbeat_interval_s();
      if (!agent.registered) ++registeredNow_;
      agent.registered = true;
      if (!allBack_ && registeredNow_ == agents_.size()) reportAllBack();
      agent.shardSince = std::chrono::steady_clock::now();
      if (agent.backoff) agent.backoff->reset();
      heartbeat(index, true);
      sendFinishedUnacknowledged(index);
      if (agent.everRegistered) {
        ++reregistered_;
        return;
      }
      agent.everRegistered = true;
      ++registered_;
      if (registered_ == agents_.size()) {
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
        std::printf("emulator: all %zu agents registered in %.2f s (%.0f registrations/s, %s; "
                    "%zu failed attempts, %zu retries)\n",
                    registered_, s, registered_ / s, tls_ ? "mutual TLS" : "plaintext", failed_,
                    retries_);
        std::fflush(stdout);
      }
      connectNext();
    } else if (e.has_run_task()) {
      runTask(index, std::move(*e.mutable_run_task()));
    } else if (e.has_kill_task()) {
      killTask(index, e.kill_task());
    } else if (e.has_status_acknowledgement()) {
      const wire::StatusAcknowledgement& ack = e.status_acknowledgement();
      auto it = findTask(agent, ack.framework_id(), ack.task_id());
      if (it != agent.tasks.end() && it->state == wire::TASK_FINISHED) eraseTask(agent, it);
    }
  }

  // Every agent registered again after some lost their links: when, on the
  // wall clock (a script compares it with the moment it killed a shard).
  void reportAllBack() {
    allBack_ = true;
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    std::printf("emulator: all %zu agents registered again at %ld.%09ld\n", agents_.size(),
                static_cast<long>(now.tv_sec), static_cast<long>(now.tv_nsec));
    std::fflush(stdout);
  }

  // What the agent runs, as a re-registration carries it (one executor per
  // task), so a new master rebuilds its view.
  void listTasks(const Agent& agent, wire::RegisterAgent* reg) {
    std::unordered_set<std::string> frameworks;
    for (const EmulatedTask& task : agent.tasks) {
      const wire::RunTask& run = task.run;
      if (frameworks.insert(run.framework().id()).second) *reg->add_frameworks() = run.framework();
      auto* ex = reg->add_executors();
      ex->mutable_info()->set_framework_id(run.framework().id());
      ex->mutable_info()->set_executor_id(run.task().task_id());
      // An ended task whose FINISHED is unacknowledged is reported running
      // without resources, as the real agent does (agent/agent.cpp): the
      // master keeps it until that update, sent again, ends it.
      if (task.state == wire::TASK_FINISHED) ex->add_tasks()->set_task_id(run.task().task_id());
      else *ex->add_tasks() = run.task();
      auto* latest = ex->add_latest();
      latest->set_task_id(run.task().task_id());
      latest->set_framework_id(run.framework().id());
      latest->set_agent_id(agent.id);
      latest->set_state(wire::TASK_RUNNING);
    }
  }

  // Every FINISHED not acknowledged yet (sent into a link that died, or
  // the task ended while the agent had no link): sent again now.
  void sendFinishedUnacknowledged(size_t index) {
    for (const EmulatedTask& task : agents_[index].tasks) {
      if (task.state != wire::TASK_FINISHED) continue;
      sendStatus(index, task.run.framework().id(), task.run.task().task_id(), wire::TASK_FINISHED);
    }
  }

  // The real agent's rule (agent/master_link.h): at the end of an interval
  // in which the agent sent nothing or heard nothing, a heartbeat, or the
  // link dropped when kMissedHeartbeatsMax (3) in a row went unanswered.
  // The first interval is spread so 50k agents do not beat in lockstep.
  void heartbeat(size_t index, bool first) {
    Agent& agent = agents_[index];
    double interval = agent.interval > 0 ? agent.interval : 1;
    double delay = first ? std::uniform_real_distribution<double>(0, interval)(random_) : interval;
    agent.sent = agent.heard = false;
    agent.heartbeat->expires_after(secondsToDuration(delay));
    agent.heartbeat->async_wait([this, index, generation = agent.generation](const boost::system::error_code& ec) {
      Agent& agent = agents_[index];
      if (ec || !agent.registered || generation != agent.generation) return;
      if (!agent.sent || !agent.heard) {
        if (agent.unanswered >= 3) return fail(index, generation, "master did not answer 3 heartbeats");
        wire::Envelope e;
        e.mutable_heartbeat()->set_sequence(++agent.sequence);
        (void)agent.conn->send(e);
        ++agent.unanswered;
      }
      heartbeat(index, false);
    });
  }

  void sendStatus(size_t index, const std::string& frameworkId, const std::string& taskId,
                  wire::TaskState state, wire::Reason reason = wire::REASON_NONE) {
    // One envelope serves every update: its fields keep their storage.
    wire::Envelope& e = statusScratch_;
    auto* s = e.mutable_status_update()->mutable_status();
    s->Clear();
    s->set_task_id(taskId);
    s->set_framework_id(frameworkId);
    s->set_agent_id(agents_[index].id);
    s->set_state(state);
    s->set_reason(reason);
    if (state == wire::TASK_FINISHED) s->set_exit_code(0);
    s->mutable_update_id()->assign(taskId).append(state == wire::TASK_RUNNING ? "/r" : "/f");
    // Not registered: lost with the link (the emulator keeps no update log).
    if (!agents_[index].registered) return;
    (void)agents_[index].conn->send(e);
    agents_[index].sent = true;
  }

  static std::vector<EmulatedTask>::iterator findTask(Agent& agent, const std::string& frameworkId,
                                                      const std::string& taskId) {
    return std::find_if(agent.tasks.begin(), agent.tasks.end(),
                        [&](const EmulatedTask& t) { return t.is(frameworkId, taskId); });
  }
  static void eraseTask(Agent& agent, std::vector<EmulatedTask>::iterator it) {
    if (it != agent.tasks.end() - 1) *it = std::move(agent.tasks.back());
    agent.tasks.pop_back();
  }

  // The task is moved out of its envelope, not copied: the emulator's CPU
  // per task is a measurement artifact. A second launch of a task it runs
  // replaces it.
  void runTask(size_t index, wire::RunTask&& run) {
    ++launched_;
    Agent& agent = agents_[index];
    sendStatus(index, run.framework().id(), run.task().task_id(), wire::TASK_RUNNING);
    double seconds = std::atof(run.task().data().c_str());
    TaskDue due{std::chrono::steady_clock::now() + secondsToDuration(seconds), index, ++serial_};
    auto it = findTask(agent, run.framework().id(), run.task().task_id());
    EmulatedTask task{std::move(run), due.serial, wire::TASK_RUNNING};
    if (it != agent.tasks.end()) *it = std::move(task);
    else agent.tasks.push_back(std::move(task));
    due_.push(due);
    if (!armedFor_ || due.at < *armedFor_) armTaskTimer();
  }

  void armTaskTimer() {
    armedFor_ = due_.top().at;
    taskTimer_.expires_at(*armedFor_);
    taskTimer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;  // armed again for an earlier task
      armedFor_.reset();
      finishDueTasks();
    });
  }

  // Every task due ends FINISHED; one killed (or launched again) since
  // left its entry behind, which names an older serial.
  void finishDueTasks() {
    auto now = std::chrono::steady_clock::now();
    while (!due_.empty() && due_.top().at <= now) {
      TaskDue due = due_.top();
      due_.pop();
      Agent& agent = agents_[due.index];
      auto it = std::find_if(agent.tasks.begin(), agent.tasks.end(),
                             [&](const EmulatedTask& t) { return t.serial == due.serial; });
      if (it == agent.tasks.end() || it->state != wire::TASK_RUNNING) continue;
      it->state = wire::TASK_FINISHED;  // kept until acknowledged
      ++finished_;
      sendStatus(due.index, it->run.framework().id(), it->run.task().task_id(), wire::TASK_FINISHED);
    }
    if (!due_.empty()) armTaskTimer();
  }

  // The task ends at once (an emulated task honours SIGTERM immediately).
  void killTask(size_t index, const wire::KillTask& kill) {
    Agent& agent = agents_[index];
    auto it = findTask(agent, kill.framework_id(), kill.task_id());
    if (it == agent.tasks.end() || it->state != wire::TASK_RUNNING) return;
    eraseTask(agent, it);
    ++killed_;
    sendStatus(index, kill.framework_id(), kill.task_id(), wire::TASK_KILLED,
               kill.reason() != wire::REASON_NONE ? kill.reason() : wire::REASON_KILLED_BY_FRAMEWORK);
  }

  void scheduleReport() {
    report_.expires_after(std::chrono::seconds(5));
    report_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      std::printf("emulator: registered=%zu failed=%zu retries=%zu lost_links=%zu reregistrations=%zu "
                  "launched=%zu finished=%zu killed=%zu moves=%zu handovers=%zu\n",
                  registered_, failed_, retries_, disconnects_, reregistered_, launched_, finished_,
                  killed_, moves_, handovers_);
      std::fflush(stdout);
      scheduleReport();
    });
  }

  asio::io_context& io_;
  Settings s_;
  HostPort master_;
  std::vector<Endpoint> shards_;
  Resources resources_;
  std::shared_ptr<ssl::context> tls_;
  std::vector<Agent> agents_;
  wire::Envelope statusScratch_;  // sendStatus's
  // Running tasks by when they end, earliest first, and the one timer for
  // the earliest (armedFor_: when it fires; none while nothing runs).
  std::priority_queue<TaskDue, std::vector<TaskDue>, std::greater<>> due_;
  asio::steady_timer taskTimer_;
  std::optional<std::chrono::steady_clock::time_point> armedFor_;
  uint64_t serial_ = 0;
  asio::steady_timer report_;
  std::mt19937_64 random_{7};
  std::chrono::steady_clock::time_point started_;
  size_t next_ = 0, registered_ = 0, failed_ = 0, retries_ = 0, disconnects_ = 0,
         reregistered_ = 0, launched_ = 0, finished_ = 0, killed_ = 0, moves_ = 0, handovers_ = 0;
  size_t registeredNow_ = 0;  // agents registered at this moment
  bool allBack_ = true;       // false from a lost link until every agent is registered again
};

}  // namespace

int main(int argc, char** argv) {
  setLogProgram("agent_emulator");
  Settings s;
  Flags flags("agent_emulator", "Emulates many allot agents in one process.");
  flags.addString("master", &s.master, "HOST:PORT of the master");
  flags.addString("shards", &s.shards, "HOST:PORT,...: link shards, ranked per agent (instead of --master)");
  flags.addInt("agents", &s.agents, "number of agents");
  flags.addString("resources", &s.resources, "resources of each agent");
  flags.addInt("source-addresses", &s.sourceAddresses, "loopback source addresses (127.0.0.2..)");
  flags.addInt("connect-burst", &s.connectBurst, "connections in flight while ramping up");
  flags.addInt("first-source", &s.firstSource, "last octet of the first source address 127.0.0.X");
  flags.addDouble("attempt-timeout", &s.attemptTimeoutS,
                  "seconds an attempt (connect, TLS + Hello, registration) may take");
  flags.addDouble("reconnect-min", &s.reconnectMinS, "first backoff bound after a failure (seconds)");
  flags.addDouble("reconnect-max", &s.reconnectMaxS, "largest backoff bound (seconds)");
  addTlsFlags(flags, &s.tls);
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  auto tls = tlsContextFromFlags(s.tls, TlsSide::kClient);
  if (!tls) {
    std::cerr << "agent_emulator: " << tls.error().describe() << "\n";
    return 2;
  }
  std::vector<Endpoint> shards;
  if (!s.shards.empty()) {
    auto list = parseShardList(s.shards);
    if (!list) {
      std::cerr << "agent_emulator: --shards: " << list.error().describe() << "\n";
      return 2;
    }
    shards = std::move(*list);
  }
  auto master = parseHostPort(s.master);
  auto resources = Resources::parse(s.resources);
  if (!master || !resources || s.agents < 1 || s.sourceAddresses < 1 || s.firstSource < 1 || s.firstSource + s.sourceAddresses > 254 ||
      !(s.attemptTimeoutS > 0) || !(s.reconnectMinS > 0) || !(s.reconnectMaxS >= s.reconnectMinS)) {
    std::cerr << "agent_emulator: bad --master, --resources, --agents, --source-addresses or timing flag\n";
    return 2;
  }
  raiseFileLimit(262144);
  signal(SIGPIPE, SIG_IGN);
  asio::io_context io(1);
  Emulator emulator(io, s, *master, std::move(shards), *resources, *tls);
  emulator.start();
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) { io.stop(); });
  io.run();
  return 0;
}
