// libFuzzer target for the agent's input paths, structure-aware: a real
// Agent (agent/agent.h) on the fakes of tests/agent/fakes.h (FakeLauncher,
// FakeIsolator: no root, no processes), its master link connected over
// loopback to this harness playing the master, and executors played by this
// harness on the agent's real executor socket. An input is a script of
// (selector, Envelope) steps (tests/fuzz/envelope_script.h): mutated valid
// master->agent envelopes (RunTask, KillTask, StatusAcknowledgement,
// ShutdownFramework, AgentRegistered...) and executor->agent envelopes
// (RegisterExecutor, StatusUpdate), plus executor links opened, closed and
// executor processes exiting. Every envelope crosses the real framing,
// Connection and validation code.
//
// The fake launcher hands this process's pid to one live container at a
// time, so an executor link from the harness passes the agent's
// process-tree check as that container's executor (and as no other).
//
// Placeholders: "$fw", "$exec", "$secret" (the pid-owning container's ids
// and secret), "$task" and "$update" (ids from the agent's status updates).
//
// Any crash, CHECK, sanitizer report or hang is a bug (built with ASan +
// UBSan by run_agent_fuzz.sh).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "agent/agent.h"
#include "proto/connection.h"
#include "proto/resources.h"
#include "tests/agent/fakes.h"
#include "tests/fuzz/envelope_script.h"

namespace {

using namespace allot;
using namespace allot::fuzz;
using namespace std::chrono_literals;

constexpr size_t kResetEveryDefault = 200;
constexpr size_t kExecutorsMax = 64;
constexpr size_t kRememberedIdsMax = 64;
constexpr int kPumpRoundsMax = 256;

size_t resetEvery() {
  static const size_t every = [] {
    const char* v = std::getenv("ALLOT_FUZZ_RESET_EVERY");
    long n = v ? std::strtol(v, nullptr, 10) : 0;
    return n > 0 ? static_cast<size_t>(n) : kResetEveryDefault;
  }();
  return every;
}

// The live agent's work dir, removed when the fuzz process exits (the
// harness itself lives until then).
std::string& liveWorkDir() {
  static auto* dir = new std::string;  // never destroyed: the atexit handler reads it
  return *dir;
}

void removeLiveWorkDir() {
  std::error_code ec;
  if (!liveWorkDir().empty()) std::filesystem::remove_all(liveWorkDir(), ec);
}

void remember(std::vector<std::string>* ids, const std::string& id) {
  if (id.empty()) return;
  ids->push_back(id);
  if (ids->size() > kRememberedIdsMax) ids->erase(ids->begin());
}

// ---------------------------------------------------------------- seeds

wire::TaskInfo seedTask(const std::string& id, bool customExecutor) {
  wire::TaskInfo t;
  t.set_task_id(id);
  t.set_name(id);
  t.set_agent_id("fuzz-agent");
  Resources::parse("cpus:0.1;mem:32")->toWire(t.mutable_resources());
  if (customExecutor) {
    t.mutable_executor()->set_executor_id("e1");
    t.mutable_executor()->set_framework_id("fw1");
    t.mutable_executor()->mutable_command()->set_shell("exec my-executor");
  } else {
    t.mutable_command()->set_shell("true");
  }
  return t;
}

// Selectors (see Harness::runStep): 0-2 master sends, 3 the executor link
// sends, 4 a new link whose first message is the envelope.
std::vector<Step> seeds() {
  std::vector<Step> out;
  auto add = [&](uint8_t selector, auto build) {
    Step s;
    s.selector = selector;
    build(s.envelope);
    out.push_back(std::move(s));
  };
  for (bool custom : {false, true}) {
    add(0, [custom](wire::Envelope& e) {
      auto* r = e.mutable_run_task();
      r->mutable_framework()->set_id("fw1");
      r->mutable_framework()->set_name("fuzz");
      *r->mutable_task() = seedTask(custom ? "t-ex" : "t1", custom);
    });
  }
  add(0, [](wire::Envelope& e) {
    e.mutable_kill_task()->set_task_id("$task");
    e.mutable_kill_task()->set_framework_id("$fw");
  });
  add(0, [](wire::Envelope& e) {
    auto* a = e.mutable_status_acknowledgement();
    a->set_framework_id("$fw");
    a->set_task_id("$task");
    a->set_update_id("$update");
  });
  add(0, [](wire::Envelope& e) { e.mutable_shutdown_framework()->set_framework_id("$fw"); });
  add(0, [](wire::Envelope& e) { e.mutable_heartbeat_ack()->set_sequence(1); });
  add(0, [](wire::Envelope& e) {
    auto* r = e.mutable_agent_registered();
    r->set_agent_id("fuzz-agent");
    r->set_master_id("fuzz-master");
    r->set_agent_secret("fuzz-secret");
    r->set_heartbeat_interval_s(3600);
  });
  add(0, [](wire::Envelope& e) { e.mutable_error()->set_message("refused"); });
  add(3, [](wire::Envelope& e) {
    auto* s = e.mutable_status_update()->mutable_status();
    s->set_task_id("$task");
    s->set_framework_id("$fw");
    s->set_state(wire::TASK_RUNNING);
    s->set_update_id("u1");
  });
  add(3, [](wire::Envelope& e) {
    auto* s = e.mutable_status_update()->mutable_status();
    s->set_task_id("$task");
    s->set_state(wire::TASK_FINISHED);
    s->set_update_id("u2");
  });
  add(4, [](wire::Envelope& e) {
    auto* r = e.mutable_register_executor();
    r->set_framework_id("$fw");
    r->set_executor_id("$exec");
    r->set_executor_secret("$secret");
    *r->add_tasks() = seedTask("$task", true);
    r->add_unacknowledged()->set_task_id("$task");
  });
  return out;
}

// ---------------------------------------------------------------- peers

// The master's end of the agent's link: registers the agent, answers
// heartbeats, remembers the ids in the agent's status updates.
class FakeMaster {
 public:
  explicit FakeMaster(asio::io_context& io)
      : acceptor_(io, asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0)) {
    acceptNext();
  }
  ~FakeMaster() {
    if (conn_) conn_->close("fuzz master stops");
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  bool linked() const { return conn_ && conn_->open(); }

  void send(const wire::Envelope& e) {
    if (linked()) (void)conn_->send(e);
  }

  std::vector<std::string> tasks, updates, frameworks;

 private:
  void acceptNext() {
    acceptor_.async_accept([this](boost::system::error_code ec, asio::ip::tcp::socket s) {
      if (ec) return;  // the acceptor is closed
      attach(std::move(s));
      acceptNext();
    });
  }

  void attach(asio::ip::tcp::socket s) {
    if (conn_) conn_->close("replaced by a new agent link");
    Connection::Options o;
    o.localRole = wire::ROLE_MASTER;
    o.localName = "fuzz-master";
    o.acceptRoles = {wire::ROLE_AGENT};
    conn_ = Connection::create(std::move(s), o);
    Connection::Handlers h;
    h.onMessage = [this](wire::Envelope& e) { onMessage(e); };
    h.onClose = [](const std::string&) {};
    conn_->start(std::move(h));
  }

  void onMessage(const wire::Envelope& e) {
    wire::Envelope reply;
    if (e.has_register_agent()) {
      auto* r = reply.mutable_agent_registered();
      r->set_agent_id("fuzz-agent");
      r->set_master_id("fuzz-master");
      r->set_agent_secret("fuzz-secret");
      r->set_heartbeat_interval_s(3600);
    } else if (e.has_heartbeat()) {
      reply.mutable_heartbeat_ack()->set_sequence(e.heartbeat().sequence());
    } else if (e.has_status_update()) {
      const wire::TaskStatus& s = e.status_update().status();
      remember(&tasks, s.task_id());
      remember(&updates, s.update_id());
      remember(&frameworks, s.framework_id());
      return;
    } else {
      return;
    }
    (void)conn_->send(reply);
  }

  asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<Connection> conn_;
};

// One executor link on the agent's socket, played by the harness.
class ExecutorPeer {
 public:
  // `first` is sent as soon as the agent's Hello arrives.
  ExecutorPeer(asio::io_context& io, const std::string& path, wire::Envelope first) {
    asio::local::stream_protocol::socket socket(io);
    boost::system::error_code ec;
    socket.connect(asio::local::stream_protocol::endpoint(path), ec);
    if (ec) return;
    Connection::Options o;
    o.localRole = wire::ROLE_EXECUTOR;
    o.localName = "fuzz-executor";
    o.acceptRoles = {wire::ROLE_AGENT};
    conn_ = Connection::create(StreamSocket(std::move(socket)), o);
    Connection::Handlers h;
    h.onHello = [this, first = std::move(first)](const wire::Hello&) { (void)conn_->send(first); };
    h.onMessage = [](wire::Envelope&) {};
    h.onClose = [](const std::string&) {};
    conn_->start(std::move(h));
  }
  ~ExecutorPeer() {
    if (conn_) conn_->close("fuzz executor exits");
  }
  void send(const wire::Envelope& e) {
    if (conn_ && conn_->open()) (void)conn_->send(e);
  }

 private:
  std::shared_ptr<Connection> conn_;
};

// ---------------------------------------------------------------- harness
//
// One agent per fuzz process, reused across inputs and rebuilt (new work
// dir, launcher, isolator) every resetEvery() inputs or when it holds more
// than kExecutorsMax executors. Its work dir is on /dev/shm when there is
// one: checkpoints and the update log are written (and fsynced) for real.

class Harness {
 public:
  Harness() {
    const char* shm = "/dev/shm";
    root_ = std::filesystem::is_directory(shm) ? shm : std::filesystem::temp_directory_path();
  }
  ~Harness() { teardown(); }

  void runInput(std::vector<Step>& steps) {
    if (!agent_ || inputs_ >= resetEvery() || agent_->executors().executorCount() > kExecutorsMax) reset();
    ++inputs_;
    std::mt19937_64 rng(steps.size());
    for (Step& step : steps) {
      if (step.placeholders) substituteAll(&step.envelope, [&](std::string* s) { substitute(s, rng); });
      runStep(step);
      pump();
    }
    executors_.clear();
    pump();
  }

 private:
  void runStep(const Step& step) {
    switch (step.selector % 8) {
      case 0: case 1: case 2: master_->send(step.envelope); break;
      case 3:
        if (executors_.empty()) openRegistered();
        if (!executors_.empty()) executors_.back()->send(step.envelope);
        break;
      case 4: open(step.envelope); break;
      case 5:
        if (launcher_->alive(::getpid())) launcher_->exitWith(::getpid(), step.selector >> 6);
        break;
      case 6:
        if (!executors_.empty()) executors_.pop_back();
        break;
      default: openRegistered(); break;
    }
  }

  // The container holding this process's pid, registered properly (its
  // tasks are then launched on this link).
  void openRegistered() {
    if (!launcher_->alive(::getpid())) return;
    wire::Envelope e;
    auto* r = e.mutable_register_executor();
    r->set_framework_id(launcher_->env(::getpid(), "ALLOT_FRAMEWORK_ID"));
    r->set_executor_id(launcher_->env(::getpid(), "ALLOT_EXECUTOR_ID"));
    r->set_executor_secret(launcher_->env(::getpid(), "ALLOT_EXECUTOR_SECRET"));
    open(e);
  }

  void open(const wire::Envelope& first) {
    if (executors_.size() >= 4) executors_.erase(executors_.begin());
    executors_.push_back(std::make_unique<ExecutorPeer>(io_, socketPath_, first));
  }

  void substitute(std::string* s, std::mt19937_64& rng) {
    auto pick = [&](const std::vector<std::string>& ids, const char* otherwise) {
      *s = ids.empty() ? otherwise : ids[rng() % ids.size()];
    };
    bool owned = launcher_->alive(::getpid());
    if (*s == "$fw") pick(master_->frameworks, "fw1");
    else if (*s == "$task") pick(master_->tasks, "t1");
    else if (*s == "$update") pick(master_->updates, "u1");
    else if (*s == "$exec") *s = owned ? launcher_->env(::getpid(), "ALLOT_EXECUTOR_ID") : "e1";
    else if (*s == "$secret") *s = owned ? launcher_->env(::getpid(), "ALLOT_EXECUTOR_SECRET") : "";
  }

  // Runs every handler that is ready (sockets both ways, posted work, the
  // worker pool's results) until the loop is idle; timers that are not due
  // stay pending.
  void pump() {
    if (!launcher_->alive(::getpid())) launcher_->nextPid(::getpid());
    for (int round = 0, idle = 0; round < kPumpRoundsMax && idle < 2; ++round) {
      if (io_.stopped()) io_.restart();
      idle = io_.poll() == 0 ? idle + 1 : 0;
    }
  }

  void teardown() {
    executors_.clear();
    if (agent_) agent_->stop();
    master_.reset();
    pump();
    agent_.reset();
    if (!workDir_.empty()) std::filesystem::remove_all(workDir_);
    workDir_.clear();
  }

  void reset() {
    if (launcher_) teardown();
    inputs_ = 0;
    std::string tmpl = (root_ / "allot-agent-fuzz-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) std::abort();
    workDir_ = liveWorkDir() = tmpl;
    launcher_ = std::make_unique<FakeLauncher>(io_);
    isolators_.clear();
    isolators_.push_back(std::make_unique<FakeIsolator>());
    master_ = std::make_unique<FakeMaster>(io_);
    AgentConfig config;
    config.master = "127.0.0.1:" + std::to_string(master_->port());
    config.workDir = workDir_;
    config.hostname = "fuzz-node";
    config.resources = *Resources::parse("cpus:8;mem:8192;disk:1024;ports:[31000-32000]");
    config.statusRetry = std::chrono::hours(1);
    config.usageInterval = std::chrono::hours(1);
    config.executors.executorPath = "/nonexistent/allot-executor";  // never started: the launcher is fake
    config.executors.workerThreads = 1;
    agent_ = std::make_unique<Agent>(io_, config, *launcher_, isolators_);
    if (Status st = agent_->start(); !st) std::abort();
    socketPath_ = agent_->executors().socketPath();
    // Registered with the fake master before the first input.
    for (int i = 0; i < 2000 && !agent_->registered(); ++i) {
      if (io_.stopped()) io_.restart();
      io_.run_one_for(5ms);
    }
    if (!agent_->registered()) std::abort();
  }

  asio::io_context io_;
  std::filesystem::path root_;
  std::string workDir_, socketPath_;
  std::unique_ptr<FakeLauncher> launcher_;
  std::vector<std::unique_ptr<Isolator>> isolators_;
  std::unique_ptr<FakeMaster> master_;
  std::unique_ptr<Agent> agent_;
  std::vector<std::unique_ptr<ExecutorPeer>> executors_;
  size_t inputs_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  allot::fuzz::mutationIds() = {"$fw", "$exec", "$secret", "$task", "$update", "root", "nobody", "*"};
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness* harness = [] {
    std::atexit(removeLiveWorkDir);
    return new Harness;  // lives for the process
  }();
  std::vector<Step> steps = parseScript(data, size);
  if (steps.empty()) steps = seeds();
  harness->runInput(steps);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  static const std::vector<Step> pool = seeds();
  return mutateScript(data, size, maxSize, seed, pool);
}
