#include "agent/executor_link.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "base/log.h"
#include "proto/input_limits.h"
#include "proto/validate.h"

namespace allot {
namespace {

// Bounds the walk up a connecting process's parents.
constexpr int kProcessTreeDepthMax = 64;
// Unregistered connections one executor's processes may hold at once.
constexpr size_t kUnregisteredPerExecutorMax = 4;

pid_t parentOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return 0;
  size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return 0;
  std::istringstream fields(stat.substr(close + 2));
  char state;
  long ppid = 0;
  if (!(fields >> state >> ppid)) return 0;
  return static_cast<pid_t>(ppid);
}

Connection::Options executorLinkOptions() {
  Connection::Options o;
  o.localRole = wire::ROLE_AGENT;
  o.localName = "allot-agent";
  o.acceptRoles = {wire::ROLE_EXECUTOR};
  o.maxQueuedBytes = limits::kExecutorQueuedBytesMax;
  return o;
}

}  // namespace

void refuseExecutorMessage(Connection& conn, const std::string& who, const std::string& why, bool fatal) {
  LOG_WARNING("executor " << who << ": refused: " << why);
  wire::Envelope e;
  e.mutable_error()->set_message(("refused: " + why).substr(0, limits::kErrorMessageBytesMax));
  e.mutable_error()->set_fatal(fatal);
  (void)conn.send(e);
  if (fatal) conn.closeAfterFlush("refused: " + why);
}

ExecutorListener::ExecutorListener(asio::io_context& io, Options options, Callbacks callbacks)
    : io_(io), options_(std::move(options)), callbacks_(std::move(callbacks)) {}

ExecutorListener::~ExecutorListener() {
  alive_.reset();
  auto pending = std::move(unregistered_);
  for (auto& [conn, owner] : pending) conn->close("agent stopping");
}

Status ExecutorListener::listen() {
  const std::string& path = options_.path;
  if (path.size() >= 108) return Error{"executor socket path " + path + " is too long (max 107 bytes)"};
  ::unlink(path.c_str());
  boost::system::error_code ec;
  acceptor_.emplace(io_);
  asio::local::stream_protocol::endpoint endpoint(path);
  if (acceptor_->open(endpoint.protocol(), ec); ec) return Error{"socket for " + path + ": " + ec.message()};
  if (acceptor_->bind(endpoint, ec); ec) return Error{"bind " + path + ": " + ec.message()};
  // Executors running as other users must connect; who may register is
  // decided per connection (the peer's credentials and secret).
  if (options_.openToAllUsers && ::chmod(path.c_str(), 0666) != 0) {
    return Error::fromErrno("chmod 0666 " + path);
  }
  if (acceptor_->listen(asio::socket_base::max_listen_connections, ec); ec) {
    return Error{"listen " + path + ": " + ec.message()};
  }
  accept();
  return okStatus();
}

void ExecutorListener::accept() {
  std::weak_ptr<int> alive = alive_;
  acceptor_->async_accept([this, alive](const boost::system::error_code& ec,
                                        asio::local::stream_protocol::socket socket) {
    if (alive.expired() || ec == asio::error::operation_aborted) return;
    if (ec) {
      LOG_WARNING("accepting an executor: " << ec.message());
      return accept();
    }
    LoopSections::Timer timer(sections_, section_);
    ucred peer{};
    socklen_t len = sizeof peer;
    if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) peer.pid = 0;
    admit(std::move(socket), peer);
    accept();
  });
}

void ExecutorListener::admit(asio::local::stream_protocol::socket socket, const ucred& peer) {
  std::string owner = peer.pid > 0 ? containerOfProcess(peer.pid) : "";
  if (!owner.empty()) {
    return onConnection(Connection::create(StreamSocket(std::move(socket)), executorLinkOptions()), owner, peer.pid);
  }
  bool startsUnderWay = callbacks_.startsUnderWay && callbacks_.startsUnderWay() > 0;
  if (peer.pid > 0 && startsUnderWay && awaiting_.size() < kAwaitingStartMax) {
    awaiting_.push_back(Awaiting{std::move(socket), peer, SteadyClock::now()});
    return;
  }
  refuse(peer);
}

void ExecutorListener::refuse(const ucred& peer) {
  LOG_WARNING("refused an executor connection from pid " << peer.pid << " (uid " << peer.uid
                                                         << "): not a process of any executor of this agent");
}

// Linear in the waiting connections (at most kAwaitingStartMax).
void ExecutorListener::startFinished() {
  auto waiting = std::move(awaiting_);
  awaiting_.clear();
  auto now = SteadyClock::now();
  for (auto& w : waiting) {
    if (now - w.since >= options_.handshakeTimeout) {
      refuse(w.peer);
      continue;
    }
    admit(std::move(w.socket), w.peer);
  }
}

std::string ExecutorListener::containerOfProcess(pid_t pid) const {
  std::unordered_map<pid_t, std::string> executors = callbacks_.executorPids();
  // Up the parent chain: the executor itself, or one of its descendants.
  for (int depth = 0; depth < kProcessTreeDepthMax && pid > 1; ++depth) {
    auto it = executors.find(pid);
    if (it != executors.end()) return it->second;
    pid = parentOf(pid);
  }
  return "";
}

void ExecutorListener::onConnection(std::shared_ptr<Connection> conn, const std::string& owner, pid_t peerPid) {
  size_t fromOwner = 0;
  for (const auto& [c, o] : unregistered_) fromOwner += o == owner;
  if (unregistered_.size() >= options_.pendingMax || fromOwner >= kUnregisteredPerExecutorMax) {
    LOG_WARNING("too many unregistered executor connections from container " << owner << "; refusing pid "
                                                                             << peerPid);
    conn->close("too many unregistered executor connections");
    return;
  }
  unregistered_.emplace(conn, owner);
  auto bound = std::make_shared<std::optional<ExecutorBinding>>();
  std::weak_ptr<Connection> weak = conn;
  std::weak_ptr<int> alive = alive_;
  // A connection that never registers gives its slot back.
  auto deadline = std::make_shared<asio::steady_timer>(io_, options_.handshakeTimeout);
  deadline->async_wait([weak, bound](const boost::system::error_code& ec) {
    auto conn = weak.lock();
    if (!ec && conn && !*bound) conn->close("did not register in time");
  });
  Connection::Handlers h;
  h.onMessage = [this, alive, weak, bound, owner, deadline](wire::Envelope& e) {
    auto conn = weak.lock();
    if (alive.expired() || !conn) return;
    if (!*bound && e.has_register_executor()) deadline->cancel();
    onMessage(conn, owner, bound.get(), e);
  };
  h.onClose = [this, alive, weak, bound, deadline](const std::string& reason) {
    if (alive.expired()) return;
    deadline->cancel();
    onClose(weak, *bound, reason);
  };
  conn->start(std::move(h));
}

void ExecutorListener::onMessage(const std::shared_ptr<Connection>& conn, const std::string& owner,
                                 std::optional<ExecutorBinding>* bound, wire::Envelope& e) {
  if (Status valid = validateFromExecutor(e); !valid) {
    return refuseExecutorMessage(*conn, owner, valid.error().describe(), e.has_register_executor());
  }
  if (*bound) return callbacks_.onMessage(**bound, conn, e);
  if (!e.has_register_executor()) {
    conn->close("first message after Hello must be RegisterExecutor");
    return;
  }
  unregistered_.erase(conn);
  *bound = callbacks_.onRegister(conn, e.register_executor(), owner);
}

void ExecutorListener::onClose(const std::weak_ptr<Connection>& conn, const std::optional<ExecutorBinding>& bound,
                               const std::string& reason) {
  auto link = conn.lock();
  if (!link) return;  // only a live connection can be in unregistered_ or bound
  unregistered_.erase(link);
  if (bound) callbacks_.onClosed(*bound, link, reason);
}

}  // namespace allot
