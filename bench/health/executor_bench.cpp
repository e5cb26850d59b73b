// The executor's side of health checks' cost: one real allot-executor on a
// bench-owned agent socket runs --tasks sleeping tasks, without checks and
// then with a TCP or HTTP check each at --interval against a loopback
// listener served by this bench. Prints, per phase, the executor's CPU time
// (its own and its reaped children's) over --window seconds as % of one
// core. The agent's share is a status update per change of verdict (none
// once every task is healthy); bench/health/run.sh measures agent and
// executors together through a real agent.
//
//   build/bench/health/health_executor_bench --executor build/cli/allot-executor \
//       --tasks 1000 --interval 1 --window 30
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "base/asio.h"
#include "base/flags.h"
#include "proto/connection.h"

namespace {

using namespace allot;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct Settings {
  std::string executor;
  int64_t tasks = 1000;
  double intervalS = 1;
  double windowS = 30;
  std::string phases = "none tcp http";
};

// Answers each request with 200 and keeps the connection (HTTP/1.1
// keep-alive): the tasks' servers.
class Listener {
 public:
  explicit Listener(asio::io_context& io) : acceptor_(io, {asio::ip::address_v4::loopback(), 0}) {
    acceptor_.listen(4096);
    accept();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  struct Conn {
    explicit Conn(asio::ip::tcp::socket s) : socket(std::move(s)) {}
    asio::ip::tcp::socket socket;
    std::array<char, 512> buffer{};
  };
  void accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, asio::ip::tcp::socket s) {
      if (!ec) serve(std::make_shared<Conn>(std::move(s)));
      accept();
    });
  }
  static void serve(std::shared_ptr<Conn> c) {
    c->socket.async_read_some(asio::buffer(c->buffer), [c](const boost::system::error_code& ec, size_t) {
      if (ec) return;
      static const std::string kAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
      asio::async_write(c->socket, asio::buffer(kAnswer), [c](const boost::system::error_code& ec, size_t) {
        if (!ec) serve(c);
      });
    });
  }
  asio::ip::tcp::acceptor acceptor_;
};

// CPU ticks of `pid`: utime + stime + cutime + cstime.
long long cpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  long long total = 0;
  for (int i = 3; i <= 17 && rest >> field; ++i) {
    if (i >= 14) total += std::stoll(field);
  }
  return total;
}

class Phase {
 public:
  Phase(const Settings& s, std::string kind, uint16_t port) : s_(s), kind_(std::move(kind)), port_(port) {}

  // The executor's CPU as % of one core over the window, or -1.
  double run(asio::io_context& io) {
    char tmpl[] = "/tmp/allot-health-bench-XXXXXX";
    dir_ = mkdtemp(tmpl);
    fs::create_directories(dir_ + "/sandbox");
    listen(io, dir_ + "/agent.sock");
    spawn(dir_ + "/agent.sock");
    double result = -1;
    if (runUntil(io, [&] { return conn_ && registered_; }, 10s)) {
      for (int64_t i = 0; i < s_.tasks; ++i) launch(i);
      auto want = [&] { return kind_ == "none" ? running_ : healthy_; };
      if (runUntil(io, [&] { return want() >= static_cast<size_t>(s_.tasks); }, 300s)) {
        runFor(io, 5s);
        long long t0 = cpuTicks(pid_);
        auto w0 = std::chrono::steady_clock::now();
        runFor(io, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(s_.windowS)));
        long long t1 = cpuTicks(pid_);
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
        result = 100.0 * static_cast<double>(t1 - t0) / static_cast<double>(sysconf(_SC_CLK_TCK)) / wall;
      } else {
        std::fprintf(stderr, "%s: %zu running, %zu healthy of %lld\n", kind_.c_str(), running_, healthy_,
                     static_cast<long long>(s_.tasks));
      }
    }
    stop(io);
    return result;
  }
  size_t unhealthy() const { return unhealthy_; }

 private:
  static bool runUntil(asio::io_context& io, const std::function<bool()>& done, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io.restart();
      io.run_for(10ms);
    }
    return done();
  }
  static void runFor(asio::io_context& io, std::chrono::milliseconds span) {
    runUntil(io, [] { return false; }, span);
  }

  void listen(asio::io_context& io, const std::string& path) {
    acceptor_ = std::make_unique<asio::local::stream_protocol::acceptor>(io, asio::local::stream_protocol::endpoint(path));
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
                                    "ALLOT_SANDBOX_DIR=" + dir_ + "/sandbox", "ALLOT_RECOVERY_TIMEOUT_S=30"};
    std::string err = dir_ + "/executor.stderr";
    pid_ = fork();
    if (pid_ == 0) {
      setsid();
      if (!freopen(err.c_str(), "w", stderr)) _exit(126);
      std::vector<char*> envp;
      for (auto& e : env) envp.push_back(e.data());
      envp.push_back(nullptr);
      char* argv[] = {const_cast<char*>(s_.executor.c_str()), nullptr};
      execve(s_.executor.c_str(), argv, envp.data());
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
    const wire::TaskStatus& st = e.status_update().status();
    if (st.state() == wire::TASK_RUNNING && !st.has_healthy()) ++running_;
    if (st.has_healthy()) (st.healthy() ? healthy_ : unhealthy_)++;
    wire::Envelope a;
    a.mutable_status_acknowledgement()->set_update_id(st.update_id());
    a.mutable_status_acknowledgement()->set_task_id(st.task_id());
    (void)conn_->send(a);
  }

  void launch(int64_t i) {
    wire::Envelope e;
    auto* t = e.mutable_launch_task()->mutable_task();
    t->set_task_id("t" + std::to_string(i));
    t->mutable_command()->set_shell("exec sleep 3600");
    if (kind_ != "none") {
      auto* h = t->mutable_health_check();
      h->set_type(kind_ == "tcp" ? wire::HealthCheck::TCP : wire::HealthCheck::HTTP);
      h->set_port(port_);
      h->set_path("/health");
      h->set_delay_s(0);
      h->set_interval_s(s_.intervalS);
      h->set_timeout_s(1);
      h->set_grace_period_s(0);
    }
    (void)conn_->send(e);
  }

  // ShutdownExecutor (its tasks killed), SIGKILL if it lingers.
  void stop(asio::io_context& io) {
    if (conn_) {
      wire::Envelope e;
      e.mutable_shutdown_executor()->set_grace_s(0.5);
      (void)conn_->send(e);
      if (runUntil(io, [&] { return waitpid(pid_, nullptr, WNOHANG) == pid_; }, 30s)) pid_ = -1;
      conn_->close("bench over");
    }
    if (pid_ > 0) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    acceptor_.reset();
    fs::remove_all(dir_);
  }

  const Settings& s_;
  std::string kind_;
  uint16_t port_;
  std::string dir_;
  std::unique_ptr<asio::local::stream_protocol::acceptor> acceptor_;
  std::shared_ptr<Connection> conn_;
  pid_t pid_ = -1;
  bool registered_ = false;
  size_t running_ = 0, healthy_ = 0, unhealthy_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  Flags flags("health_executor_bench", "CPU of allot-executor's health checks for many tasks.");
  flags.addString("executor", &s.executor, "the allot-executor binary");
  flags.addInt("tasks", &s.tasks, "tasks in the executor");
  flags.addDouble("interval", &s.intervalS, "seconds between checks of a task");
  flags.addDouble("window", &s.windowS, "seconds measured per phase");
  flags.addString("phases", &s.phases, "phases among none, tcp, http");
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  if (s.executor.empty() || s.tasks < 1 || s.tasks > 10000 || !(s.windowS > 0) || !(s.intervalS >= 0.1)) {
    std::fprintf(stderr, "health_executor_bench: --executor, --tasks 1..10000, --window > 0, --interval >= 0.1\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  asio::io_context io;
  Listener listener(io);
  std::printf("tasks=%lld interval_s=%g window_s=%g\n", static_cast<long long>(s.tasks), s.intervalS, s.windowS);
  std::istringstream phases(s.phases);
  for (std::string kind; phases >> kind;) {
    Phase phase(s, kind, listener.port());
    double pct = phase.run(io);
    std::printf("%s executor_cpu_pct_of_one_core=%.3f unhealthy_updates=%zu\n", kind.c_str(), pct, phase.unhealthy());
    std::fflush(stdout);
  }
  return 0;
}
