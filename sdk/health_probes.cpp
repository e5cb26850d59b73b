// The TCP and COMMAND probes behind HealthChecker (sdk/health_check.h); the
// HTTP probe is in sdk/health_http.cpp. Each attempt owns
// its socket or process in a shared Attempt that its handlers hold: a
// cancelled attempt's handlers still run (operation_aborted) but find it
// cancelled and touch nothing else.
#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <cstring>

#include "base/log.h"
#include "sdk/health_check.h"
#include "sdk/health_listeners.h"

namespace allot {
namespace {

using Done = std::function<void(HealthVerdict)>;
using tcp = asio::ip::tcp;

struct SocketAttempt {
  explicit SocketAttempt(asio::io_context& io) : socket(io) {}
  tcp::socket socket;
  Done done;

  void finish(bool healthy, std::string output) {
    if (!done) return;
    Done d = std::move(done);
    done = nullptr;
    // Closed with a reset: a connection per check per task would
    // otherwise leave a TIME_WAIT socket each for a minute, here or in
    // the task's server, and the FIN exchange costs more than a reset.
    boost::system::error_code ignored;
    socket.set_option(asio::socket_base::linger(true, 0), ignored);
    socket.close(ignored);
    d({healthy, std::move(output)});
  }
  void cancel() {
    done = nullptr;
    boost::system::error_code ignored;
    socket.close(ignored);
  }
};

tcp::endpoint loopback(uint16_t port) { return tcp::endpoint(asio::ip::address_v4::loopback(), port); }

std::string where(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// One listener table for every TCP probe of a thread (the executor's
// loop): one netlink socket however many tasks are checked.
std::shared_ptr<ListenerSource> sharedListenerTable() {
  thread_local std::weak_ptr<ListenerSource> shared;
  std::shared_ptr<ListenerSource> table = shared.lock();
  if (!table) {
    table = std::make_shared<ListenerTable>();
    shared = table;
  }
  return table;
}

std::string describe(uint16_t port, const LoopbackListeners& found) {
  if (found.accepting > 0) return "TCP " + where(port) + ": listening";
  if (found.listeners == 0) return "TCP " + where(port) + ": nothing listens";
  return "TCP " + where(port) + ": accept queue full (" + std::to_string(found.listeners) + " listeners)";
}

// Asks the socket table whether a connection would be accepted
// (sdk/health_listeners.h): no connection, no wakeup of the task's server.
// Where the table cannot be asked, connects instead, as it did before
// sock_diag: nonblocking, closed with a reset.
class TcpProbe final : public HealthProbe {
 public:
  TcpProbe(asio::io_context& io, uint16_t port, std::shared_ptr<ListenerSource> listeners)
      : io_(io), port_(port), table_(listeners ? std::move(listeners) : sharedListenerTable()) {}
  ~TcpProbe() override { cancel(); }

  void start(Done done) override {
    cancel();
    if (!connecting_) {
      auto found = table_->loopback(port_, SteadyClock::now());
      if (found) return answer(std::move(done), found->accepting > 0, describe(port_, *found));
      LOG_WARNING("health check on " << where(port_) << ": " << found.error().describe()
                                     << "; checking by connecting instead");
      connecting_ = true;
    }
    connect(std::move(done));
  }
  void cancel() override {
    if (pending_) *pending_ = false;
    pending_.reset();
    if (attempt_) attempt_->cancel();
    attempt_.reset();
  }

 private:
  void answer(Done done, bool healthy, std::string output) {
    pending_ = std::make_shared<bool>(true);
    asio::post(io_, [pending = pending_, done = std::move(done), healthy, output = std::move(output)] {
      if (*pending) done({healthy, output});
    });
  }
  void connect(Done done) {
    attempt_ = std::make_shared<SocketAttempt>(io_);
    attempt_->done = std::move(done);
    auto a = attempt_;
    uint16_t port = port_;
    a->socket.async_connect(loopback(port), [a, port](const boost::system::error_code& ec) {
      if (ec) return a->finish(false, "TCP " + where(port) + ": " + ec.message());
      a->finish(true, "TCP " + where(port) + ": connected");
    });
  }

  asio::io_context& io_;
  uint16_t port_;
  std::shared_ptr<ListenerSource> table_;
  bool connecting_ = false;
  std::shared_ptr<bool> pending_;
  std::shared_ptr<SocketAttempt> attempt_;
};

struct CommandAttempt {
  CommandAttempt(asio::io_context& io, CheckProcesses& p) : processes(p), exit(io), output(io) {}
  CheckProcesses& processes;
  CheckProcess process;
  asio::posix::stream_descriptor exit;
  asio::posix::stream_descriptor output;
  Done done;
  std::string text;
  std::array<char, 512> buffer{};
  bool reaped = false;

  // Kills what is left of the check's process group and reaps the check.
  siginfo_t end() {
    kill(-process.pid, SIGKILL);
    siginfo_t info{};
    if (!reaped) info = processes.reap(process);
    reaped = true;
    boost::system::error_code ignored;
    exit.close(ignored);
    output.close(ignored);
    return info;
  }
  void cancel() {
    done = nullptr;
    if (!reaped) end();
  }
};

std::string describeExit(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) return "exit status " + std::to_string(info.si_status);
  if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
    return std::string("killed by signal ") + std::to_string(info.si_status);
  }
  return "no exit status";
}

class CommandProbe final : public HealthProbe {
 public:
  CommandProbe(asio::io_context& io, wire::CommandInfo command, CheckProcesses& processes)
      : io_(io), command_(std::move(command)), processes_(processes) {}
  ~CommandProbe() override { cancel(); }

  void start(Done done) override {
    cancel();
    auto spawned = processes_.spawn(command_);
    if (!spawned) {
      return asio::post(io_, [done, e = spawned.error().describe()] { done({false, "command: " + e}); });
    }
    attempt_ = std::make_shared<CommandAttempt>(io_, processes_);
    auto a = attempt_;
    a->done = std::move(done);
    a->process = std::move(*spawned);
    a->exit.assign(a->process.pidfd.release());
    a->output.assign(a->process.output.release());
    readOutput(a);
    watchExit(a);
  }
  void cancel() override {
    if (attempt_) attempt_->cancel();
    attempt_.reset();
  }

 private:
  // A readiness wait may end before the check exits (Asio's reactor can
  // wake a wait spuriously): a check still running is waited for again,
  // not killed and judged.
  static void watchExit(const std::shared_ptr<CommandAttempt>& a) {
    a->exit.async_wait(asio::posix::stream_descriptor::wait_read,
                       [a](const boost::system::error_code& ec) {
                         if (ec || !a->done) return;
                         siginfo_t peek{};
                         if (waitid(P_PIDFD, a->exit.native_handle(), &peek, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                             peek.si_pid == 0) {
                           return watchExit(a);
                         }
                         drain(*a);
                         siginfo_t info = a->end();
                         bool ok = info.si_code == CLD_EXITED && info.si_status == 0;
                         Done d = std::move(a->done);
                         a->done = nullptr;
                         d({ok, "command " + describeExit(info) + (a->text.empty() ? "" : ": " + a->text)});
                       });
  }

  static void keep(CommandAttempt& a, size_t n) {
    size_t room = kHealthOutputBytesMax - std::min(a.text.size(), kHealthOutputBytesMax);
    a.text.append(a.buffer.data(), std::min(n, room));
  }
  // What the command wrote before it exited and the reader has not seen.
  static void drain(CommandAttempt& a) {
    a.output.non_blocking(true);
    boost::system::error_code ec;
    for (int i = 0; i < 16; ++i) {
      size_t n = a.output.read_some(asio::buffer(a.buffer), ec);
      if (ec || n == 0) break;
      keep(a, n);
    }
    while (!a.text.empty() && (a.text.back() == '\n' || a.text.back() == '\r')) a.text.pop_back();
  }
  static void readOutput(std::shared_ptr<CommandAttempt> a) {
    a->output.async_read_some(asio::buffer(a->buffer), [a](const boost::system::error_code& ec, size_t n) {
      if (ec || !a->done) return;
      keep(*a, n);
      readOutput(a);
    });
  }

  asio::io_context& io_;
  wire::CommandInfo command_;
  CheckProcesses& processes_;
  std::shared_ptr<CommandAttempt> attempt_;
};

}  // namespace

std::unique_ptr<HealthProbe> makeTcpProbe(asio::io_context& io, uint16_t port,
                                          std::shared_ptr<ListenerSource> listeners) {
  return std::make_unique<TcpProbe>(io, port, std::move(listeners));
}

std::unique_ptr<HealthProbe> makeCommandProbe(asio::io_context& io, wire::CommandInfo command,
                                              CheckProcesses& processes) {
  return std::make_unique<CommandProbe>(io, std::move(command), processes);
}

}  // namespace allot
