// Health checks in the real allot-executor, against a test-owned agent
// socket: thresholds, the grace period, timeouts, HTTP and TCP checks.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include <gtest/gtest.h>

#include "base/asio.h"
#include "proto/connection.h"
#include "tests/common/test_util.h"

namespace allot {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::runUntil;

// A free loopback port (bound, then released for the task to take).
uint16_t freePort() {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

class HealthExecutor : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = std::getenv("ALLOT_EXECUTOR") ? std::getenv("ALLOT_EXECUTOR") : "";
    if (binary_.empty()) GTEST_SKIP() << "ALLOT_EXECUTOR not set (allot-executor not built)";
    char tmpl[] = "/tmp/allot-health-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    sandbox_ = dir_ + "/sandbox";
    fs::create_directories(sandbox_);
    listen(dir_ + "/agent.sock");
    spawn(dir_ + "/agent.sock");
    ASSERT_TRUE(registered()) << testing::readFile(dir_ + "/executor.stderr");
  }

  // The executor kills its tasks on ShutdownExecutor; SIGKILL after 5 s.
  void TearDown() override {
    if (conn_ && pid_ > 0) {
      wire::Envelope e;
      e.mutable_shutdown_executor()->set_grace_s(0.5);
      (void)conn_->send(e);
      if (runUntil(io_, [&] { return waitpid(pid_, nullptr, WNOHANG) == pid_; }, 5s)) pid_ = -1;
    }
    if (conn_) conn_->close("test over");
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  void listen(const std::string& path) {
    acceptor_.emplace(io_);
    asio::local::stream_protocol::endpoint ep(path);
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
      h.onMessage = [this](wire::Envelope& e) { onMessage(e); };
      conn_->start(std::move(h));
    });
  }

  void spawn(const std::string& socket) {
    std::vector<std::string> env = {"PATH=/usr/bin:/bin", "ALLOT_AGENT_ENDPOINT=unix:" + socket,
                                    "ALLOT_AGENT_ID=A1", "ALLOT_FRAMEWORK_ID=F1", "ALLOT_EXECUTOR_ID=E1",
                                    "ALLOT_SANDBOX_DIR=" + sandbox_, "ALLOT_RECOVERY_TIMEOUT_S=30"};
    std::string err = dir_ + "/executor.stderr";
    pid_ = fork();
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
  }

  void onMessage(const wire::Envelope& e) {
    if (e.has_register_executor()) {
      wire::Envelope r;
      r.mutable_executor_registered()->set_agent_id("A1");
      (void)conn_->send(r);
      registered_ = true;
    }
    if (!e.has_status_update()) return;
    const wire::TaskStatus& s = e.status_update().status();
    updates_.push_back({std::chrono::steady_clock::now(), s});
    wire::Envelope a;
    a.mutable_status_acknowledgement()->set_update_id(s.update_id());
    a.mutable_status_acknowledgement()->set_task_id(s.task_id());
    (void)conn_->send(a);
  }

  bool registered() { return runUntil(io_, [&] { return registered_; }, 10s); }

  // A task running `shell` with `check`, delay 0 and a short interval.
  void launch(const std::string& id, const std::string& shell, wire::HealthCheck check) {
    wire::Envelope e;
    auto* t = e.mutable_launch_task()->mutable_task();
    t->set_task_id(id);
    t->mutable_command()->set_shell(shell);
    t->set_kill_grace_s(1);
    if (!check.has_delay_s()) check.set_delay_s(0);
    if (!check.has_interval_s()) check.set_interval_s(0.2);
    *t->mutable_health_check() = check;
    ASSERT_TRUE(conn_->send(e));
  }

  struct Update {
    std::chrono::steady_clock::time_point at;
    wire::TaskStatus status;
  };

  // The first update matching `match`, waiting up to `limit`.
  std::optional<Update> waitFor(const std::function<bool(const wire::TaskStatus&)>& match,
                                std::chrono::milliseconds limit = 15s) {
    std::optional<Update> found;
    runUntil(io_, [&] {
      for (auto& u : updates_) {
        if (match(u.status)) {
          found = u;
          return true;
        }
      }
      return false;
    }, limit);
    return found;
  }

  static std::function<bool(const wire::TaskStatus&)> healthIs(bool healthy) {
    return [healthy](const wire::TaskStatus& s) {
      return s.state() == wire::TASK_RUNNING && s.has_healthy() && s.healthy() == healthy;
    };
  }
  static bool killed(const wire::TaskStatus& s) { return s.state() == wire::TASK_KILLED; }

  static wire::HealthCheck commandCheck(const std::string& shell) {
    wire::HealthCheck c;
    c.set_type(wire::HealthCheck::COMMAND);
    c.mutable_command()->set_shell(shell);
    return c;
  }

  size_t lines(const std::string& file) {
    std::ifstream in(sandbox_ + "/" + file);
    size_t n = 0;
    for (std::string l; std::getline(in, l);) ++n;
    return n;
  }

  std::string binary_, dir_, sandbox_;
  asio::io_context io_;
  std::optional<asio::local::stream_protocol::acceptor> acceptor_;
  std::shared_ptr<Connection> conn_;
  bool registered_ = false;
  std::vector<Update> updates_;
  pid_t pid_ = -1;
};

TEST_F(HealthExecutor, FailingCheckKillsTheTaskAfterTheThresholdNotBefore) {
  // Each check notes itself; it fails once the flag file exists. The check
  // runs in the sandbox, as the task does.
  auto check = commandCheck("if [ -e flag ]; then echo fail >> failures; echo down; exit 1; fi; echo up");
  check.set_consecutive_failures(3);
  check.set_grace_period_s(0);
  launch("svc", "sleep 60", check);
  auto healthy = waitFor(healthIs(true));
  ASSERT_TRUE(healthy) << testing::readFile(dir_ + "/executor.stderr");
  EXPECT_EQ(healthy->status.message(), "command exit status 0: up");
  std::ofstream(sandbox_ + "/flag") << "x";
  auto unhealthy = waitFor(healthIs(false));
  ASSERT_TRUE(unhealthy);
  EXPECT_EQ(unhealthy->status.message(), "command exit status 1: down");
  auto end = waitFor(killed);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->status.reason(), wire::REASON_HEALTH_CHECK_FAILED);
  EXPECT_TRUE(end->status.has_healthy() && !end->status.healthy());
  EXPECT_NE(end->status.message().find("health check failed 3 times"), std::string::npos) << end->status.message();
  // Killed on the third failure: not before it, and no check after it.
  testing::runFor(io_, 500ms);
  EXPECT_EQ(lines("failures"), 3u);
  size_t unhealthyUpdates = 0;
  for (auto& u : updates_) unhealthyUpdates += healthIs(false)(u.status);
  EXPECT_EQ(unhealthyUpdates, 1u) << "a change of health is one update";
}

TEST_F(HealthExecutor, GracePeriodIsHonoured) {
  auto check = commandCheck("exit 1");
  check.set_grace_period_s(2);
  check.set_consecutive_failures(1);
  auto launched = std::chrono::steady_clock::now();
  launch("slow", "sleep 60", check);
  auto end = waitFor(killed);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->status.reason(), wire::REASON_HEALTH_CHECK_FAILED);
  EXPECT_GE(end->at - launched, 2s) << "killed within the grace period";
  EXPECT_LT(end->at - launched, 6s);
  EXPECT_FALSE(waitFor(healthIs(false), 1ms)) << "a failure within the grace period was reported";
}

TEST_F(HealthExecutor, SuccessEndsTheGracePeriod) {
  auto check = commandCheck("[ ! -e flag ]");
  check.set_grace_period_s(60);
  check.set_consecutive_failures(1);
  launch("svc", "sleep 60", check);
  ASSERT_TRUE(waitFor(healthIs(true)));
  std::ofstream(sandbox_ + "/flag") << "x";
  auto end = waitFor(killed, 5s);
  ASSERT_TRUE(end) << "a failure after a success was ignored within the grace period";
  EXPECT_EQ(end->status.reason(), wire::REASON_HEALTH_CHECK_FAILED);
}

TEST_F(HealthExecutor, CheckThatOutlivesItsTimeoutFails) {
  auto check = commandCheck("sleep 30");
  check.set_timeout_s(0.3);
  check.set_grace_period_s(0);
  check.set_consecutive_failures(2);
  launch("hang", "sleep 60", check);
  auto unhealthy = waitFor(healthIs(false));
  ASSERT_TRUE(unhealthy);
  EXPECT_NE(unhealthy->status.message().find("timed out"), std::string::npos) << unhealthy->status.message();
  ASSERT_TRUE(waitFor(killed));
  // The timed-out checks' processes are gone with their group.
  testing::runFor(io_, 300ms);
  EXPECT_EQ(testing::readFile("/proc/" + std::to_string(pid_) + "/task/" + std::to_string(pid_) + "/children"), "");
}

TEST_F(HealthExecutor, HttpCheckFollowsTheAnswerStatus) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/python3";
  uint16_t port = freePort();
  std::ofstream(sandbox_ + "/ok") << "fine";
  wire::HealthCheck check;
  check.set_type(wire::HealthCheck::HTTP);
  check.set_port(port);
  check.set_path("/ok");
  check.set_grace_period_s(10);
  check.set_consecutive_failures(2);
  launch("web", "exec /usr/bin/python3 -m http.server --bind 127.0.0.1 " + std::to_string(port), check);
  auto healthy = waitFor(healthIs(true));
  ASSERT_TRUE(healthy) << testing::readFile(sandbox_ + "/web.stderr");
  EXPECT_NE(healthy->status.message().find(" 200 "), std::string::npos) << healthy->status.message();
  fs::remove(sandbox_ + "/ok");  // 404 from now on
  auto unhealthy = waitFor(healthIs(false));
  ASSERT_TRUE(unhealthy);
  EXPECT_NE(unhealthy->status.message().find(" 404 "), std::string::npos) << unhealthy->status.message();
  auto end = waitFor(killed);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->status.reason(), wire::REASON_HEALTH_CHECK_FAILED);
}

TEST_F(HealthExecutor, TcpCheckSeesTheListener) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/python3";
  uint16_t port = freePort();
  wire::HealthCheck check;
  check.set_type(wire::HealthCheck::TCP);
  check.set_port(port);
  check.set_grace_period_s(0);
  check.set_consecutive_failures(2);
  // Listens for two seconds, then closes its socket and stays alive.
  launch("tcp",
         "exec /usr/bin/python3 -c 'import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\"," +
             std::to_string(port) + ")); s.listen(64); time.sleep(2); s.close(); time.sleep(60)'",
         check);
  ASSERT_TRUE(waitFor(healthIs(true)));
  auto end = waitFor(killed);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->status.reason(), wire::REASON_HEALTH_CHECK_FAILED);
  EXPECT_NE(end->status.message().find("nothing listens"), std::string::npos) << end->status.message();
}

// The executor's descriptors (its link to the agent, other tasks' pidfds,
// the checks' sockets and pipes) stay out of a task and of its checks: a
// task holding the executor's socket could speak for it to the agent.
TEST_F(HealthExecutor, TaskAndItsChecksGetOnlyTheirStandardDescriptors) {
  auto check = commandCheck("ls /proc/self/fd > check-fds");
  check.set_grace_period_s(0);
  launch("first", "sleep 60", commandCheck("true"));
  launch("fds", "ls /proc/self/fd > task-fds; sleep 60", check);
  ASSERT_TRUE(waitFor([](const wire::TaskStatus& s) {
    return s.task_id() == "fds" && s.has_healthy() && s.healthy();
  })) << testing::readFile(dir_ + "/executor.stderr");
  // ls lists its own directory's descriptor too: 3.
  EXPECT_EQ(testing::readFile(sandbox_ + "/task-fds"), "0\n1\n2\n3\n");
  EXPECT_EQ(testing::readFile(sandbox_ + "/check-fds"), "0\n1\n2\n3\n");
}

}  // namespace
}  // namespace allot
