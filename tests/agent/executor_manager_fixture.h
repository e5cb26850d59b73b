// The fixture of the ExecutorManager unit tests without root
// (executor_manager_test.cpp, executor_manager_setup_test.cpp): a
// FakeLauncher and a FakeIsolator (tests/agent/fakes.h) stand in for
// processes and cgroups; the executor is the test speaking the real
// protocol on the real executor socket. The fake launcher hands out the
// test's own pid, so the agent's process-tree check at accept sees the test
// as the executor.
#pragma once

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "agent/checkpoint.h"
#include "agent/executor_manager.h"
#include "proto/connection.h"
#include "proto/state.pb.h"
#include "tests/agent/fakes.h"
#ifdef ALLOT_HAVE_ISOLATORS
#include "base/uring_poller.h"
#include "isolators/cgroupfs_twin.h"
#include "isolators/isolator_table.h"
#endif

namespace allot {
namespace executor_manager_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kFramework = "fw-1";
constexpr const char* kExecutor = "ex-1";

inline wire::FrameworkInfo framework() {
  wire::FrameworkInfo f;
  f.set_id(kFramework);
  f.set_name("test");
  return f;
}

inline wire::TaskInfo task(const std::string& id, double cpus, const std::string& executorId = kExecutor) {
  wire::TaskInfo t;
  t.set_task_id(id);
  t.set_name(id);
  auto* r = t.add_resources();
  r->set_name("cpus");
  r->set_scalar(cpus);
  t.mutable_executor()->set_executor_id(executorId);
  t.mutable_executor()->mutable_command()->set_shell("exec my-executor");
  return t;
}

// This test as an executor, on the agent's socket.
class TestExecutor {
 public:
  void connect(asio::io_context& io, const std::string& path, wire::RegisterExecutor reg) {
    asio::local::stream_protocol::socket socket(io);
    socket.connect(asio::local::stream_protocol::endpoint(path));
    Connection::Options o;
    o.localRole = wire::ROLE_EXECUTOR;
    o.localName = "test-executor";
    o.acceptRoles = {wire::ROLE_AGENT};
    conn_ = Connection::create(StreamSocket(std::move(socket)), o);
    Connection::Handlers h;
    h.onHello = [this, reg](const wire::Hello&) {
      wire::Envelope e;
      *e.mutable_register_executor() = reg;
      (void)conn_->send(e);
    };
    h.onMessage = [this](wire::Envelope& e) { received_.push_back(e); };
    h.onClose = [this](const std::string&) { closed_ = true; };
    conn_->start(std::move(h));
  }
  void send(const std::string& taskId, wire::TaskState state, const std::string& updateId) {
    wire::Envelope e;
    wire::TaskStatus* s = e.mutable_status_update()->mutable_status();
    s->set_task_id(taskId);
    s->set_state(state);
    s->set_update_id(updateId);
    (void)conn_->send(e);
  }
  void close() { conn_->close("test executor exits"); }

  size_t count(wire::Envelope::BodyCase body) const {
    size_t n = 0;
    for (const auto& e : received_) n += e.body_case() == body;
    return n;
  }
  bool launched(const std::string& taskId) const {
    for (const auto& e : received_) {
      if (e.has_launch_task() && e.launch_task().task().task_id() == taskId) return true;
    }
    return false;
  }
  bool closed() const { return closed_; }

 private:
  std::shared_ptr<Connection> conn_;
  std::vector<wire::Envelope> received_;
  bool closed_ = false;
};

class ExecutorManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot-em-XXXXXX";
    dir_ = mkdtemp(tmpl);
    checkpoints_ = std::make_unique<CheckpointStore>(dir_ + "/meta");
    ASSERT_TRUE(checkpoints_->init());
    options_.workDir = dir_;
    options_.executorPath = "/nonexistent/allot-executor";  // never started: the launcher is fake
    options_.defaultKillGrace = 50ms;
    options_.killSlack = 50ms;
    options_.idleShutdown = 50ms;
    options_.drainTimeout = 50ms;
    options_.shutdownTimeout = 1s;
    start();
  }
  void TearDown() override {
    manager_.reset();
    checkpoints_.reset();
    fs::remove_all(dir_);
  }

  // A new agent run: fresh launcher, isolators (a FakeIsolator unless
  // `real` are given) and manager over the same work dir and checkpoints.
  void start(std::vector<std::unique_ptr<Isolator>> real = {}) {
    manager_.reset();
    isolators_ = std::move(real);
    isolator_ = nullptr;
    if (isolators_.empty()) {
      auto iso = std::make_unique<FakeIsolator>();
      isolator_ = iso.get();
      isolators_.push_back(std::move(iso));
    }
    launcher_ = std::make_unique<FakeLauncher>(io_);
    ExecutorManager::Callbacks callbacks;
    callbacks.onUpdate = [this](const wire::TaskStatus& s, std::function<void(Status)> persisted) {
      updates_.push_back(s);
      asio::post(io_, [persisted] { persisted(okStatus()); });
    };
    manager_ = std::make_unique<ExecutorManager>(io_, *launcher_, isolators_, *checkpoints_, options_,
                                                 std::move(callbacks));
    ASSERT_TRUE(manager_->listen());
    manager_->setAgentId("agent-1");
  }

  bool runUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout = 5s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      if (io_.stopped()) io_.restart();
      io_.run_one_for(10ms);
    }
    return true;
  }
  void runFor(std::chrono::milliseconds d) {
    runUntil([] { return false; }, d);
  }

  // The last update of `taskId`, or nullptr.
  const wire::TaskStatus* last(const std::string& taskId) const {
    for (auto it = updates_.rbegin(); it != updates_.rend(); ++it) {
      if (it->task_id() == taskId) return &*it;
    }
    return nullptr;
  }
  bool reached(const std::string& taskId, wire::TaskState state) const {
    const wire::TaskStatus* s = last(taskId);
    return s && s->state() == state;
  }

  std::string name(const std::string& executorId = kExecutor) const {
    return ContainerId{kFramework, executorId}.name();
  }

  // Runs the loop until the launcher has started `n` executors in all (a
  // container's sandbox is made off the loop first); the last one's pid.
  pid_t waitLaunched(size_t n) {
    EXPECT_TRUE(runUntil([&] { return launcher_->launched().size() >= n; })) << "no launch";
    return launcher_->launched().empty() ? 0 : launcher_->launched().back();
  }

  // Launches `tasks` on executor kExecutor (pid: this test's) and registers
  // `exec` as it; every task reaches TASK_RUNNING.
  pid_t launchRunning(TestExecutor& exec, const std::vector<wire::TaskInfo>& tasks) {
    launcher_->nextPid(::getpid());
    for (const auto& t : tasks) manager_->runTask(framework(), t);
    pid_t pid = waitLaunched(launcher_->launched().size() + 1);
    wire::RegisterExecutor reg;
    reg.set_framework_id(kFramework);
    reg.set_executor_id(kExecutor);
    reg.set_executor_secret(launcher_->env(pid, "ALLOT_EXECUTOR_SECRET"));
    exec.connect(io_, manager_->socketPath(), reg);
    EXPECT_TRUE(runUntil([&] {
      for (const auto& t : tasks) {
        if (!exec.launched(t.task_id())) return false;
      }
      return true;
    }));
    int n = 0;
    for (const auto& t : tasks) exec.send(t.task_id(), wire::TASK_RUNNING, "u-running-" + std::to_string(n++));
    EXPECT_TRUE(runUntil([&] {
      for (const auto& t : tasks) {
        if (!reached(t.task_id(), wire::TASK_RUNNING)) return false;
      }
      return exec.count(wire::Envelope::kStatusAcknowledgement) >= tasks.size();
    }));
    return pid;
  }

  std::string phase() const {
    state::AgentState st;
    manager_->fillState(&st);
    return st.executors_size() ? st.executors(0).phase() : "";
  }

  asio::io_context io_;
  std::string dir_;
  ExecutorManagerOptions options_;
  std::unique_ptr<CheckpointStore> checkpoints_;
  std::vector<std::unique_ptr<Isolator>> isolators_;
  FakeIsolator* isolator_ = nullptr;
  std::unique_ptr<FakeLauncher> launcher_;
  std::unique_ptr<ExecutorManager> manager_;
  std::vector<wire::TaskStatus> updates_;
};

}  // namespace executor_manager_test
}  // namespace allot
