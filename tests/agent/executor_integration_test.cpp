// allot-executor and the executor library against a test-owned agent
// socket: the real executor binary, a hand-driven agent side.
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "agent/executor_manager.h"
#include "launcher/process_tree.h"
#include "base/asio.h"
#include "tests/common/test_util.h"
#include "proto/connection.h"

namespace allot {
namespace {

using testing::readFile;
using testing::runUntil;

namespace fs = std::filesystem;
using namespace std::chrono_literals;


class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = std::getenv("ALLOT_EXECUTOR") ? std::getenv("ALLOT_EXECUTOR") : "";
    if (binary_.empty()) GTEST_SKIP() << "ALLOT_EXECUTOR not set (allot-executor not built)";
    char tmpl[] = "/tmp/allot-exec-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    socket_ = dir_ + "/agent.sock";
    sandbox_ = dir_ + "/sandbox";
    fs::create_directories(sandbox_);
    listen();
  }

  void TearDown() override {
    if (conn_) conn_->close("test over");
    if (pid_ > 0) {
      killProcessTree(pid_);
      waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  void listen() {
    acceptor_.emplace(io_);
    asio::local::stream_protocol::endpoint ep(socket_);
    acceptor_->open(ep.protocol());
    acceptor_->bind(ep);
    acceptor_->listen();
    acceptor_->async_accept([this](const boost::system::error_code& ec, asio::local::stream_protocol::socket s) {
      if (ec) return;
      Connection::Options o;
      o.localRole = wire::ROLE_AGENT;
      o.acceptRoles = {wire::ROLE_EXECUTOR};
      conn_ = Connection::create(StreamSocket(std::move(s)), o);
      Connection::Handlers h;
      h.onMessage = [this](wire::Envelope& e) { received_.push_back(e); };
      h.onClose = [this](const std::string&) { closed_ = true; };
      conn_->start(std::move(h));
    });
  }

  // With ownPidNamespace (root) the executor is pid 1 of a new PID
  // namespace, as the namespaces/pid isolator starts it. False when the
  // kernel refuses that namespace.
  bool spawn(double recoveryTimeoutS = 30, bool withEnv = true, bool ownPidNamespace = false) {
    std::string err = dir_ + "/executor.stderr";
    std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
    if (withEnv) {
      env.push_back("ALLOT_AGENT_ENDPOINT=unix:" + socket_);
      env.push_back("ALLOT_AGENT_ID=A1");
      env.push_back("ALLOT_FRAMEWORK_ID=F1");
      env.push_back("ALLOT_EXECUTOR_ID=E1");
      env.push_back("ALLOT_SANDBOX_DIR=" + sandbox_);
      env.push_back("ALLOT_RECOVERY_TIMEOUT_S=" + std::to_string(recoveryTimeoutS));
    }
    // A raw clone is fork() with CLONE_NEWPID; the child only execs.
    pid_ = ownPidNamespace ? static_cast<pid_t>(syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0)) : fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      setsid();
      freopen(err.c_str(), "w", stderr);
      std::vector<char*> envp;
      for (auto& e : env) envp.push_back(e.data());
      envp.push_back(nullptr);
      char* argv[] = {binary_.data(), nullptr};
      execve(binary_.c_str(), argv, envp.data());
      _exit(127);
    }
    return true;
  }

  // Whether `pid` has a handler for `signal` (SigCgt of /proc/<pid>/status).
  static bool catches(pid_t pid, int signal) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (signal - 1)) & 1;
    }
    return false;
  }

  // The pids of `pid`'s children (zombies included: they are children
  // until reaped).
  static std::string childrenOf(pid_t pid) {
    return readFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  }

  // Waits for the executor to connect and register; answers ExecutorRegistered.
  const wire::RegisterExecutor* registration() {
    const wire::RegisterExecutor* found = nullptr;
    runUntil(io_, [&] {
      for (auto& e : received_) {
        if (e.has_register_executor()) found = &e.register_executor();
      }
      return found != nullptr;
    }, 10s);
    if (found) {
      wire::Envelope r;
      r.mutable_executor_registered()->set_agent_id("A1");
      (void)conn_->send(r);
    }
    return found;
  }

  void launch(const std::string& id, const std::string& shell, double graceS = 0) {
    wire::Envelope e;
    auto* t = e.mutable_launch_task()->mutable_task();
    t->set_task_id(id);
    t->mutable_command()->set_shell(shell);
    t->set_kill_grace_s(graceS);
    ASSERT_TRUE(conn_->send(e));
  }

  // The first update for `taskId` in `state` (acknowledged when ack).
  std::optional<wire::TaskStatus> waitState(const std::string& taskId, wire::TaskState state,
                                            bool ack = true, std::chrono::milliseconds timeout = 10s) {
    std::optional<wire::TaskStatus> found;
    runUntil(io_, [&] {
      for (auto& e : received_) {
        if (e.has_status_update() && e.status_update().status().task_id() == taskId &&
            e.status_update().status().state() == state) {
          found = e.status_update().status();
        }
      }
      return found.has_value();
    }, timeout);
    if (found && ack) {
      wire::Envelope a;
      a.mutable_status_acknowledgement()->set_update_id(found->update_id());
      a.mutable_status_acknowledgement()->set_task_id(taskId);
      (void)conn_->send(a);
    }
    return found;
  }

  bool waitExit(int* status, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      io_.restart();
      io_.run_for(10ms);
      if (waitpid(pid_, status, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
    }
    return false;
  }

  std::string binary_, dir_, socket_, sandbox_;
  asio::io_context io_;
  std::optional<asio::local::stream_protocol::acceptor> acceptor_;
  std::shared_ptr<Connection> conn_;
  std::vector<wire::Envelope> received_;
  bool closed_ = false;
  pid_t pid_ = -1;
};

TEST_F(ExecutorTest, RunsACommandAndReportsItsExitCode) {
  spawn();
  auto* reg = registration();
  ASSERT_NE(reg, nullptr);
  EXPECT_EQ(reg->framework_id(), "F1");
  EXPECT_EQ(reg->executor_id(), "E1");
  launch("ok", "echo hello-from-task; exit 0");
  launch("bad", "exit 3");
  ASSERT_TRUE(waitState("ok", wire::TASK_RUNNING));
  auto finished = waitState("ok", wire::TASK_FINISHED);
  ASSERT_TRUE(finished);
  EXPECT_EQ(finished->exit_code(), 0);
  EXPECT_FALSE(finished->update_id().empty());
  EXPECT_EQ(finished->framework_id(), "F1");
  auto failed = waitState("bad", wire::TASK_FAILED);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->exit_code(), 3);
  EXPECT_EQ(failed->reason(), wire::REASON_COMMAND_EXITED);
  std::ifstream out(sandbox_ + "/ok.stdout");
  std::string line;
  std::getline(out, line);
  EXPECT_EQ(line, "hello-from-task");
}

TEST_F(ExecutorTest, ArgvThatCannotExecFailsWithExecFailed) {
  spawn();
  ASSERT_NE(registration(), nullptr);
  wire::Envelope e;
  auto* t = e.mutable_launch_task()->mutable_task();
  t->set_task_id("noexec");
  t->mutable_command()->add_argv("/nonexistent/binary");
  ASSERT_TRUE(conn_->send(e));
  auto failed = waitState("noexec", wire::TASK_FAILED);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->reason(), wire::REASON_EXEC_FAILED);
  EXPECT_NE(failed->message().find("/nonexistent/binary"), std::string::npos) << failed->message();
}

TEST_F(ExecutorTest, KillEscalatesToSigkillAfterTheGracePeriod) {
  spawn();
  ASSERT_NE(registration(), nullptr);
  launch("stubborn", "trap '' TERM; echo trapped; while true; do sleep 0.05; done", 0.3);
  ASSERT_TRUE(waitState("stubborn", wire::TASK_RUNNING));
  // The kill may only start once the shell ignores TERM (a fixed wait was
  // too short on a loaded machine: TERM killed the task within the grace).
  ASSERT_TRUE(runUntil(io_, [&] {
    return testing::readFile(sandbox_ + "/stubborn.stdout").find("trapped") != std::string::npos;
  }, 10s));
  auto start = std::chrono::steady_clock::now();
  wire::Envelope k;
  k.mutable_kill_task()->set_task_id("stubborn");
  k.mutable_kill_task()->set_grace_s(0.3);
  ASSERT_TRUE(conn_->send(k));
  auto killed = waitState("stubborn", wire::TASK_KILLED);
  ASSERT_TRUE(killed);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3s);
  EXPECT_EQ(killed->reason(), wire::REASON_KILLED_BY_FRAMEWORK);
  EXPECT_EQ(killed->signal(), SIGKILL);
}

TEST_F(ExecutorTest, ShutdownKillsTasksAndExitsOnceAcknowledged) {
  spawn();
  ASSERT_NE(registration(), nullptr);
  launch("long", "sleep 100");
  ASSERT_TRUE(waitState("long", wire::TASK_RUNNING));
  wire::Envelope s;
  s.mutable_shutdown_executor()->set_grace_s(1);
  ASSERT_TRUE(conn_->send(s));
  ASSERT_TRUE(waitState("long", wire::TASK_KILLED));
  int status = 0;
  ASSERT_TRUE(waitExit(&status, 5s));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(ExecutorTest, ResendsUnacknowledgedUpdatesAfterReconnecting) {
  spawn();
  ASSERT_NE(registration(), nullptr);
  launch("t", "true");
  ASSERT_TRUE(waitState("t", wire::TASK_FINISHED, /*ack=*/false));
  received_.clear();
  conn_->close("agent restarts");
  conn_.reset();
  acceptor_.reset();
  fs::remove(socket_);
  listen();
  auto* reg = registration();
  ASSERT_NE(reg, nullptr);
  ASSERT_EQ(reg->unacknowledged_size(), 2);  // RUNNING and FINISHED
  EXPECT_EQ(reg->unacknowledged(1).state(), wire::TASK_FINISHED);
  EXPECT_EQ(reg->tasks_size(), 0);
}

TEST_F(ExecutorTest, KeepsItsTasksWhileTheAgentIsAwayAndReportsThem) {
  spawn();
  ASSERT_NE(registration(), nullptr);
  launch("long", "sleep 100");
  ASSERT_TRUE(waitState("long", wire::TASK_RUNNING));
  received_.clear();
  conn_->close("agent restarts");
  conn_.reset();
  acceptor_.reset();
  fs::remove(socket_);
  std::this_thread::sleep_for(300ms);
  listen();
  auto* reg = registration();
  ASSERT_NE(reg, nullptr);
  ASSERT_EQ(reg->tasks_size(), 1);
  EXPECT_EQ(reg->tasks(0).task_id(), "long");
}

TEST_F(ExecutorTest, GivesUpWhenTheAgentStaysAwayPastTheRecoveryTimeout) {
  acceptor_.reset();
  fs::remove(socket_);
  spawn(0.5);
  int status = 0;
  ASSERT_TRUE(waitExit(&status, 10s));
  EXPECT_TRUE(WIFEXITED(status));
}

// Outside a PID namespace orphans go to init, not to the executor: it
// leaves SIGCHLD ignored (no signal, pipe and waitid per task that ends;
// docs/benchmarks.md, the plain launch) and finishes tasks by their pidfds.
TEST_F(ExecutorTest, OutsideAPidNamespaceSigchldIsNotCaught) {
  spawn();
  ASSERT_NE(registration(), nullptr);
  launch("one", "exit 0");
  ASSERT_TRUE(waitState("one", wire::TASK_FINISHED));
  EXPECT_FALSE(catches(pid_, SIGCHLD));
  EXPECT_EQ(childrenOf(pid_), "");
}

// As its namespace's pid 1 the executor inherits its tasks' orphans and
// reaps them: a task's background sleeper, re-parented to it, leaves no
// zombie once it ends.
TEST_F(ExecutorTest, AsPidOneOfItsNamespaceItReapsOrphans) {
  if (geteuid() != 0) GTEST_SKIP() << "a new PID namespace needs root";
  ASSERT_TRUE(spawn(30, true, /*ownPidNamespace=*/true)) << "clone(CLONE_NEWPID): " << std::strerror(errno);
  ASSERT_NE(registration(), nullptr);
  EXPECT_TRUE(catches(pid_, SIGCHLD));
  launch("parent", "sleep 0.3 & exit 0");
  ASSERT_TRUE(waitState("parent", wire::TASK_FINISHED));
  EXPECT_TRUE(runUntil(io_, [&] { return childrenOf(pid_).empty(); }, 10s))
      << "left as children (zombies): " << childrenOf(pid_);
}

TEST_F(ExecutorTest, MissingEnvironmentIsAClearError) {
  spawn(30, /*withEnv=*/false);
  int status = 0;
  ASSERT_TRUE(waitExit(&status, 5s));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::ifstream err(dir_ + "/executor.stderr");
  std::stringstream text;
  text << err.rdbuf();
  EXPECT_NE(text.str().find("ALLOT_AGENT_ENDPOINT"), std::string::npos) << text.str();
}

}  // namespace
}  // namespace allot
