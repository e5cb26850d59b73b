// ExecutorListener: the Unix socket <work-dir>/agent.sock executors connect
// to, and each connection until it is bound to a container. It knows
// nothing of containers' state; ExecutorManager wires it to them through
// Callbacks.
//
// - Accept: only a process of a running executor's tree may talk at all
//   (its SO_PEERCRED pid, walked up its parents, must reach a pid that
//   executorPids() names); the rest is closed at once, so it cannot hold a
//   slot an executor needs. Except while an executor's clone is under way
//   off the loop (startsUnderWay() > 0): the new executor may connect
//   before its pid is back on the loop, so an unknown peer waits (at most
//   kAwaitingStartMax of them) and is looked up again at each
//   startFinished(): one still unknown is closed once no start is under
//   way, or when it has waited handshakeTimeout.
// - Before registration: at most pendingMax unregistered connections in
//   all, kUnregisteredPerExecutorMax per container; one that sends no
//   RegisterExecutor within handshakeTimeout is closed. Every message is
//   validated (proto/validate.h); an invalid one gets an ErrorMessage
//   naming the field (fatal, closing the link, for RegisterExecutor).
// - RegisterExecutor goes to onRegister, which answers the executor and
//   says which container (name, generation) the connection now belongs to,
//   or nothing when it refused it. Later messages go to onMessage and the
//   link's end to onClosed, with that binding.
//
// Thread: the agent's io_context thread.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/asio.h"
#include "base/clock.h"
#include "diag/loop_sections.h"
#include "base/result.h"
#include "proto/allot.pb.h"
#include "proto/connection.h"

namespace allot {

// The container an executor's connection belongs to once registered.
struct ExecutorBinding {
  std::string container;  // its name
  uint64_t generation = 0;
};

// Tells the executor on `conn` why its message is refused (an ErrorMessage);
// `fatal` also closes the link after that message.
void refuseExecutorMessage(Connection& conn, const std::string& who, const std::string& why, bool fatal);

class ExecutorListener {
 public:
  struct Options {
    std::string path;                  // the socket, < 108 bytes
    bool openToAllUsers = false;       // chmod 0666 (executors run as other users)
    size_t pendingMax = 256;           // unregistered connections in all
    Duration handshakeTimeout = std::chrono::seconds(10);  // connect -> RegisterExecutor
  };
  struct Callbacks {
    // The pid of every running executor, to its container's name.
    std::function<std::unordered_map<pid_t, std::string>()> executorPids;
    // Executor clones under way off the loop (their pids not known yet).
    std::function<size_t()> startsUnderWay;
    // A RegisterExecutor from a process of container `owner`; the binding
    // when the connection now belongs to a container, nullopt when refused
    // (onRegister answered and closed it).
    std::function<std::optional<ExecutorBinding>(const std::shared_ptr<Connection>& conn,
                                                 const wire::RegisterExecutor& m, const std::string& owner)>
        onRegister;
    // A valid message from a registered executor.
    std::function<void(const ExecutorBinding& binding, const std::shared_ptr<Connection>& conn,
                       wire::Envelope& e)>
        onMessage;
    // A registered executor's link ended.
    std::function<void(const ExecutorBinding& binding, const std::shared_ptr<Connection>& conn,
                       const std::string& reason)>
        onClosed;
  };

  ExecutorListener(asio::io_context& io, Options options, Callbacks callbacks);
  // Closes the unregistered connections (registered ones are their
  // containers').
  ~ExecutorListener();
  ExecutorListener(const ExecutorListener&) = delete;
  ExecutorListener& operator=(const ExecutorListener&) = delete;

  // Connections from unknown peers waiting for a start under way.
  static constexpr size_t kAwaitingStartMax = 64;

  // Binds the socket (replacing a stale one) and starts accepting.
  Status listen();
  // An executor's clone came back (its pid now in executorPids(), or it
  // failed): the connections waiting for it are looked up again.
  void startFinished();
  size_t awaitingStart() const { return awaiting_.size(); }
  const std::string& path() const { return options_.path; }
  // Each accepted connection's owner lookup is timed as `section` of
  // `sections` (the agent's late-tick attribution).
  void timeAcceptsAs(LoopSections* sections, LoopSections::Id section) {
    sections_ = sections;
    section_ = section;
  }

 private:
  // A connection from a peer no executor's tree names (yet).
  struct Awaiting {
    asio::local::stream_protocol::socket socket;
    ucred peer;
    TimePoint since;
  };
  void accept();
  void admit(asio::local::stream_protocol::socket socket, const ucred& peer);
  static void refuse(const ucred& peer);
  // The container whose executor is `pid` or an ancestor of it ("": none).
  std::string containerOfProcess(pid_t pid) const;
  void onConnection(std::shared_ptr<Connection> conn, const std::string& owner, pid_t peerPid);
  void onMessage(const std::shared_ptr<Connection>& conn, const std::string& owner,
                 std::optional<ExecutorBinding>* bound, wire::Envelope& e);
  void onClose(const std::weak_ptr<Connection>& conn, const std::optional<ExecutorBinding>& bound,
               const std::string& reason);

  asio::io_context& io_;
  Options options_;
  Callbacks callbacks_;
  LoopSections* sections_ = nullptr;
  LoopSections::Id section_ = 0;
  std::optional<asio::local::stream_protocol::acceptor> acceptor_;
  std::map<std::shared_ptr<Connection>, std::string> unregistered_;  // -> the peer's container
  std::vector<Awaiting> awaiting_;  // in arrival order, at most kAwaitingStartMax
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace allot
