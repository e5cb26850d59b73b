// The executor side of ExecutorManager: the Unix socket executors connect
// to, their registration (first start and reconnect after an agent
// restart) and recovery from checkpoints.
#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>

#include "agent/executor_manager.h"
#include "agent/executor_manager_types.h"
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

// Compares in time independent of where they differ.
bool sameSecret(const std::string& expected, const std::string& given) {
  if (expected.size() != given.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) diff |= static_cast<unsigned char>(expected[i] ^ given[i]);
  return diff == 0;
}

// A message that failed validation or names a task the executor does not
// run: the executor gets an ErrorMessage saying which field, and nothing
// else happens. A refused RegisterExecutor also closes the link.
void refuse(Connection& conn, const std::string& who, const std::string& why, bool fatal) {
  LOG_WARNING("executor " << who << ": refused: " << why);
  wire::Envelope e;
  e.mutable_error()->set_message(("refused: " + why).substr(0, limits::kErrorMessageBytesMax));
  e.mutable_error()->set_fatal(fatal);
  (void)conn.send(e);
  if (fatal) conn.closeAfterFlush("refused: " + why);
}

}  // namespace

Status ExecutorManager::listen() {
  std::string path = socketPath();
  if (path.size() >= 108) return Error{"executor socket path " + path + " is too long (max 107 bytes)"};
  ::unlink(path.c_str());
  boost::system::error_code ec;
  acceptor_.emplace(io_);
  asio::local::stream_protocol::endpoint endpoint(path);
  if (acceptor_->open(endpoint.protocol(), ec); ec) return Error{"socket for " + path + ": " + ec.message()};
  if (acceptor_->bind(endpoint, ec); ec) return Error{"bind " + path + ": " + ec.message()};
  // Executors running as other users must connect; who may register is
  // decided per connection (the peer's credentials and secret).
  if (!options_.defaultUser.empty() && ::chmod(path.c_str(), 0666) != 0) {
    return Error::fromErrno("chmod 0666 " + path);
  }
  if (acceptor_->listen(asio::socket_base::max_listen_connections, ec); ec) {
    return Error{"listen " + path + ": " + ec.message()};
  }
  accept();
  return okStatus();
}

void ExecutorManager::accept() {
  std::weak_ptr<int> alive = alive_;
  acceptor_->async_accept([this, alive](const boost::system::error_code& ec,
                                        asio::local::stream_protocol::socket socket) {
    if (alive.expired() || ec == asio::error::operation_aborted) return;
    if (!ec) {
      ucred peer{};
      socklen_t len = sizeof peer;
      if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) peer.pid = 0;
      // Only processes of a running executor's tree may talk at all: the rest
      // cannot hold a connection slot an executor needs.
      std::string owner = peer.pid > 0 ? containerOfProcess(peer.pid) : "";
      if (owner.empty()) {
        LOG_WARNING("refused an executor connection from pid " << peer.pid << " (uid " << peer.uid
                                                               << "): not a process of any executor of this agent");
      } else {
        Connection::Options o;
        o.localRole = wire::ROLE_AGENT;
        o.localName = "allot-agent";
        o.acceptRoles = {wire::ROLE_EXECUTOR};
        o.maxQueuedBytes = limits::kExecutorQueuedBytesMax;
        onConnection(Connection::create(StreamSocket(std::move(socket)), o), owner, peer.pid);
      }
    } else {
      LOG_WARNING("accepting an executor: " << ec.message());
    }
    accept();
  });
}

std::string ExecutorManager::containerOfProcess(pid_t pid) const {
  std::unordered_map<pid_t, std::string> executors;
  for (const auto& [name, c] : containers_) {
    if (c->life.hasProcess()) executors[c->pid] = name;
  }
  // Up the parent chain: the executor itself, or one of its descendants.
  for (int depth = 0; depth < kProcessTreeDepthMax && pid > 1; ++depth) {
    auto it = executors.find(pid);
    if (it != executors.end()) return it->second;
    pid = parentOf(pid);
  }
  return "";
}

void ExecutorManager::onConnection(std::shared_ptr<Connection> conn, const std::string& owner, pid_t peerPid) {
  size_t fromOwner = 0;
  for (const auto& [c, o] : unregistered_) fromOwner += o == owner;
  if (unregistered_.size() >= options_.pendingConnectionsMax || fromOwner >= kUnregisteredPerExecutorMax) {
    LOG_WARNING("too many unregistered executor connections from container " << owner << "; refusing pid "
                                                                             << peerPid);
    conn->close("too many unregistered executor connections");
    return;
  }
  unregistered_.emplace(conn, owner);
  auto bound = std::make_shared<std::pair<std::string, uint64_t>>();
  std::weak_ptr<Connection> weak = conn;
  std::weak_ptr<int> alive = alive_;
  // A connection that never registers gives its slot back.
  auto deadline = std::make_shared<asio::steady_timer>(io_, options_.executorHandshakeTimeout);
  deadline->async_wait([weak, bound](const boost::system::error_code& ec) {
    auto conn = weak.lock();
    if (!ec && conn && bound->first.empty()) conn->close("did not register in time");
  });
  Connection::Handlers h;
  h.onMessage = [this, alive, weak, bound, owner, deadline](wire::Envelope& e) {
    auto conn = weak.lock();
    if (alive.expired() || !conn) return;
    if (Status valid = validateFromExecutor(e); !valid) {
      return refuse(*conn, owner, valid.error().describe(), e.has_register_executor());
    }
    if (bound->first.empty()) {
      if (e.has_register_executor()) {
        deadline->cancel();
        return onRegister(conn, e.register_executor(), owner, bound.get());
      }
      conn->close("first message after Hello must be RegisterExecutor");
      return;
    }
    Container* c = byName(bound->first, bound->second);
    if (!c || c->conn != conn) {
      conn->close("executor's container is gone");
      return;
    }
    onExecutorMessage(*c, e);
  };
  h.onClose = [this, alive, weak, bound, deadline](const std::string& reason) {
    if (alive.expired()) return;
    deadline->cancel();
    for (auto it = unregistered_.begin(); it != unregistered_.end(); ++it) {
      if (weak.expired() || it->first == weak.lock()) {
        unregistered_.erase(it);
        break;
      }
    }
    if (bound->first.empty()) return;
    Container* c = byName(bound->first, bound->second);
    if (c && c->conn && c->conn == weak.lock()) {
      LOG_DEBUG("executor link of " << c->name << " closed: " << reason);
      onLinkClosed(*c);
    }
  };
  conn->start(std::move(h));
}

// Why `m` may not register (empty: it may): the container must run, the
// connecting process must be of its tree, and the secret must match.
std::string ExecutorManager::registrationRefusal(const Container* c, const wire::RegisterExecutor& m,
                                                 const std::string& owner) const {
  if (!c || !c->life.hasProcess()) {
    return "this agent runs no executor " + m.executor_id() + " of framework " + m.framework_id();
  }
  if (c->name != owner) {
    // A task of another executor (another framework) presenting these ids.
    return "not authorized: the connecting process does not belong to executor " + m.executor_id();
  }
  if (!c->secret.empty() && !sameSecret(c->secret, m.executor_secret())) {
    return "not authorized: wrong executor secret for executor " + m.executor_id();
  }
  return "";
}

void ExecutorManager::onRegister(const std::shared_ptr<Connection>& conn,
                                 const wire::RegisterExecutor& m, const std::string& owner,
                                 std::pair<std::string, uint64_t>* bound) {
  unregistered_.erase(conn);
  Container* c = find(m.framework_id(), m.executor_id());
  if (std::string refusal = registrationRefusal(c, m, owner); !refusal.empty()) {
    LOG_WARNING("executor registration refused: " << refusal);
    wire::Envelope e;
    e.mutable_error()->set_message(refusal);
    e.mutable_error()->set_fatal(true);
    (void)conn->send(e);
    conn->closeAfterFlush(refusal);
    return;
  }
  bool recovering = c->life.state() == ContainerState::kRecovering;
  if (Status st = c->life.on(ContainerEvent::kRegistered); !st) {
    LOG_WARNING("executor registration of " << c->name << " refused: " << st.error().describe());
    conn->close(st.error().describe());
    return;
  }
  if (c->conn && c->conn != conn) c->conn->close("executor registered on a new connection");
  c->conn = conn;
  *bound = {c->name, c->generation};
  acceptUnacknowledged(*c, m);
  if (recovering) reattach(*c, m);
  c->registerTimer.cancel();
  wire::Envelope reply;
  auto* r = reply.mutable_executor_registered();
  r->set_agent_id(agentId_);
  *r->mutable_framework() = c->framework;
  *r->mutable_executor() = c->executor;
  sendToExecutor(*c, reply);
  resume(*c);
  checkpoint(*c);
  maybeIdle(*c);
}

// Only updates of tasks this executor runs (as the agent knows them, or
// as it reports them after an agent restart) go on to the framework.
void ExecutorManager::acceptUnacknowledged(Container& c, const wire::RegisterExecutor& m) {
  std::set<std::string> reportedTasks;
  for (const auto& t : m.tasks()) reportedTasks.insert(t.task_id());
  size_t unknown = 0;
  for (const auto& s : m.unacknowledged()) {
    if (c.tasks.count(s.task_id()) || reportedTasks.count(s.task_id())) {
      acceptExecutorUpdate(c, s);
    } else {
      ++unknown;
    }
  }
  if (unknown > 0 && c.conn) {
    refuse(*c.conn, c.name, std::to_string(unknown) + " unacknowledged updates of tasks this executor does not run",
           false);
  }
}

// An executor that outlived an agent restart reports the tasks it still
// runs: the agent's checkpointed tasks it no longer runs are lost, the ones
// it reports and the agent did not know of are adopted.
void ExecutorManager::reattach(Container& c, const wire::RegisterExecutor& m) {
  std::set<std::string> reported;
  for (const auto& t : m.tasks()) reported.insert(t.task_id());
  std::vector<std::string> lost;
  for (const auto& [id, t] : c.tasks) {
    if (t.sent && !reported.count(id)) lost.push_back(id);
  }
  for (const auto& id : lost) {
    emit(&c, agentStatus(c.framework.id(), c.executor.executor_id(), id, wire::TASK_LOST,
                         wire::REASON_AGENT_RESTARTED,
                         "the executor no longer runs this task after the agent restarted"));
  }
  for (const auto& t : m.tasks()) {
    if (c.tasks.count(t.task_id())) continue;
    Task& task = c.tasks[t.task_id()];
    task.info = t;
    task.sent = true;
    armMaxDuration(c, task);
  }
  LOG_INFO("executor " << c.executor.executor_id() << " of framework " << c.framework.id()
                       << " re-attached with " << c.tasks.size() << " tasks");
}

// After a (re-)registration: the tasks not yet sent, the kills not yet
// answered, and a shutdown the executor was asked for on its old link.
void ExecutorManager::resume(Container& c) {
  for (auto& [id, t] : c.tasks) {
    if (!t.sent) {
      sendLaunch(c, t);
    } else if (t.killing) {
      wire::Envelope k;
      k.mutable_kill_task()->set_framework_id(c.framework.id());
      k.mutable_kill_task()->set_task_id(id);
      k.mutable_kill_task()->set_grace_s(t.graceS);
      sendToExecutor(c, k);
    }
  }
  if (c.life.state() == ContainerState::kShuttingDown) sendShutdown(c);
}

void ExecutorManager::onExecutorMessage(Container& c, wire::Envelope& e) {
  if (e.has_status_update()) {
    const std::string& taskId = e.status_update().status().task_id();
    if (!c.tasks.count(taskId)) {
      return refuse(*c.conn, c.name, "status update for task " + taskId + ", which this executor does not run",
                    false);
    }
    return acceptExecutorUpdate(c, e.status_update().status());
  }
  LOG_DEBUG("executor " << c.name << ": ignoring message field " << e.body_case());
}

void ExecutorManager::onLinkClosed(Container& c) {
  c.conn.reset();
  if (c.life.state() == ContainerState::kExited) return postFinalize(c);
  LOG_WARNING("executor " << c.executor.executor_id() << " of framework " << c.framework.id()
                          << " (pid " << c.pid << ") dropped its link; waiting for it to reconnect or exit");
}

void ExecutorManager::sendLaunch(Container& c, Task& t) {
  wire::Envelope e;
  *e.mutable_launch_task()->mutable_task() = t.info;
  sendToExecutor(c, e);
  t.sent = true;
  armMaxDuration(c, t);
}

void ExecutorManager::sendToExecutor(Container& c, const wire::Envelope& e) {
  if (c.conn && c.conn->open()) (void)c.conn->send(e);
}

void ExecutorManager::recover(std::vector<ExecutorCheckpoint> checkpoints) {
  std::vector<ContainerId> known;
  for (const auto& ck : checkpoints) known.push_back({ck.framework.id(), ck.executor.executor_id()});
  for (auto& iso : isolators_) {
    if (auto st = iso->recover(known); !st) LOG_ERROR(iso->name() << " recover: " << st.error().describe());
  }
  std::weak_ptr<int> alive = alive_;
  for (auto& ck : checkpoints) {
    if (containers_.count(containerName(ck.framework.id(), ck.executor.executor_id()))) continue;
    Container& c = create(ck.framework, ck.executor);
    c.sandbox = ck.sandbox;
    c.secret = ck.secret;
    c.pid = ck.pid;
    c.startTime = ck.startTime;
    (void)c.life.on(ContainerEvent::kAdopted);
    for (auto& t : ck.tasks) {
      Task& task = c.tasks[t.task_id()];
      task.info = t;
      task.sent = true;
      auto l = ck.latest.find(t.task_id());
      if (l != ck.latest.end()) task.latest = l->second;
    }
    auto start = processStartTime(ck.pid);
    Status watched = Error{"executor pid " + std::to_string(ck.pid) + " is gone"};
    if (start && *start == ck.startTime) {
      watched = launcher_.watch(ck.pid, [this, alive, name = c.name, gen = c.generation](const ExitInfo& e) {
        if (!alive.expired()) onExit(name, gen, e);
      });
    }
    if (!watched) {
      LOG_WARNING("executor " << c.name << " did not survive the agent restart: " << watched.error().describe());
      failContainer(c, wire::TASK_LOST, wire::REASON_EXECUTOR_EXITED,
                    "executor (pid " + std::to_string(ck.pid) + ") exited while the agent was down");
      (void)c.life.on(ContainerEvent::kExited);
      postFinalize(c);
      continue;
    }
    LOG_INFO("re-attaching to executor " << c.name << " (pid " << c.pid << ") with "
                                         << c.tasks.size() << " tasks");
    for (auto& iso : isolators_) {
      (void)iso->watch(c.id, limitWatcher(c));
    }
    armTimer(c, c.registerTimer, options_.recoveryTimeout, [this](Container& c) {
      if (c.life.state() != ContainerState::kRecovering) return;
      failContainer(c, wire::TASK_LOST, wire::REASON_AGENT_RESTARTED,
                    "executor did not reconnect after the agent restarted");
      killContainer(c, "executor did not reconnect");
    });
  }
}

void ExecutorManager::fillRegistration(wire::RegisterAgent* registration) const {
  std::set<std::string> frameworks;
  for (const auto& entry : containers_) {
    // Not a structured binding: the lambda below captures it (clang < 16
    // cannot, and the agent fuzz target is built with clang).
    const auto& c = entry.second;
    if (frameworks.insert(c->framework.id()).second) *registration->add_frameworks() = c->framework;
    wire::ExecutorState* state = registration->add_executors();
    *state->mutable_info() = c->executor;
    auto add = [&](const wire::TaskInfo& info, const std::optional<wire::TaskStatus>& latest) {
      *state->add_tasks() = info;
      wire::TaskStatus* s = state->add_latest();
      if (latest) {
        *s = *latest;
      } else {
        s->set_task_id(info.task_id());
        s->set_framework_id(c->framework.id());
        s->set_state(wire::TASK_STAGING);
      }
    };
    for (const auto& [id, t] : c->tasks) add(t.info, t.latest);
    for (const auto& t : c->next) add(t, std::nullopt);
  }
}

}  // namespace allot
