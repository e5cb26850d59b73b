// ReconnectingLink: the one reconnect loop of every client link (the agent's
// link to the master, the scheduler driver, the executor driver), as
// docs/links.md section 4 describes.
//
//   ReconnectingLink link(io, std::move(detector), options, callbacks);
//   link.start();              // starts the detector; connects to its leader
//   ... onConnected(hello)     // handshaken: send the registration here
//   link.registered();         // the peer accepted it: backoff back to min
//   link.send(envelope);       // while connected
//   link.drop("missed 3 heartbeats");   // forces a reconnect
//   link.stop();
//
// Reconnection: after a failed attempt or a lost link the link waits a
// uniformly random time in [0, bound] ("full jitter"), bound starting at
// backoffMin and doubling up to backoffMax with every attempt that does not
// end in registered(). A leader change drops the current link at once and
// connects to the new leader after a random wait in [0, leaderChangeSpread],
// so thousands of clients do not arrive in one burst. A lost link retries
// the master it lost after the backoff; a new leader the detector reports
// meanwhile is connected to as above.
//
// Fencing: the link remembers the highest leader epoch it has seen, from the
// detector and from masters' Hellos, and refuses (closes, logs) a peer whose
// Hello epoch is lower; it then waits for the detector's next leader.
//
// Thread: every method and callback on the io_context thread. Callbacks may
// call any method. Destroying the link stops the detector and cancels every
// callback.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "base/asio.h"
#include "base/clock.h"
#include "base/result.h"
#include "proto/connection.h"
#include "proto/leader.h"

namespace allot {

// Exponential backoff with full jitter: next() returns a wait uniform in
// [0, bound] and doubles the bound (up to max); reset() returns it to min.
class Backoff {
 public:
  Backoff(Duration min, Duration max, uint64_t seed);
  Duration next();
  void reset() { bound_ = min_; }
  Duration bound() const { return bound_; }
  Duration jitter(Duration bound);  // uniform in [0, bound]

 private:
  Duration min_, max_, bound_;
  std::mt19937_64 random_;
};

class ReconnectingLink {
 public:
  struct Options {
    wire::Role localRole = wire::ROLE_UNKNOWN;
    std::string localName;
    wire::Role peerRole = wire::ROLE_MASTER;   // the Hello role the peer must send
    std::shared_ptr<ssl::context> tls;         // null: plaintext
    // TLS: the role the peer's certificate must have, whatever peerRole
    // says ("shard" for an agent reaching the master through a link shard).
    std::string peerCertRole = "master";
    Duration backoffMin = std::chrono::milliseconds(100);
    Duration backoffMax = std::chrono::seconds(5);
    Duration leaderChangeSpread = std::chrono::seconds(1);
    // Bounds TCP connect, and TLS + Hello after it.
    std::chrono::milliseconds handshakeTimeout = std::chrono::seconds(10);
    size_t maxFrameBytes = kMaxFrameBytes;
    uint64_t seed = 0;  // jitter's random seed; 0: from the kernel
  };
  struct Callbacks {
    // Handshaken with the leader; send the registration here (unless
    // firstMessage sent it already).
    std::function<void(const wire::Hello&)> onConnected;
    // Every message after the Hello.
    std::function<void(wire::Envelope&)> onMessage;
    // Once per link that reached onConnected, when it is lost (not after stop()).
    std::function<void(const std::string& reason)> onDisconnected;
    // Optional: the message each new link sends right behind its Hello,
    // before the peer's Hello arrives (its registration), which saves a
    // round trip per connect. The peer reads it only after accepting our
    // Hello; a link whose peer turns out fenced by its Hello's epoch is
    // closed as soon as that Hello arrives, as without it.
    std::function<wire::Envelope()> firstMessage;
  };

  ReconnectingLink(asio::io_context& io, std::unique_ptr<LeaderDetector> detector,
                   Options options, Callbacks callbacks);
  ~ReconnectingLink();
  ReconnectingLink(const ReconnectingLink&) = delete;
  ReconnectingLink& operator=(const ReconnectingLink&) = delete;

  void start();
  // Closes after flushing what is queued; no reconnect, no more callbacks.
  void stop();

  // Queues `envelope` on the handshaken link; an Error when there is none.
  Status send(const wire::Envelope& envelope);
  // The peer accepted our registration: the next reconnect starts from
  // backoffMin again.
  void registered();
  // Closes the current link (if any) and reconnects after a backoff.
  void drop(const std::string& reason);

  bool connected() const { return connection_ && handshaken_; }
  const std::optional<Leader>& leader() const { return leader_; }
  uint64_t highestEpoch() const { return highestEpoch_; }
  // The peer's identity on the current link (empty when not connected).
  PeerIdentity peer() const { return connection_ ? connection_->peer() : PeerIdentity{}; }
  // The wait chosen before the latest attempt, and the bound of the next.
  Duration lastWait() const { return lastWait_; }
  Duration backoffBound() const { return backoff_.bound(); }
  const std::string& describeDetector() const { return detectorText_; }

 private:
  struct Alive {};
  void onLeader(const std::optional<Leader>& leader);
  void retryAfterBackoff(const std::string& why);
  void waitFor(Duration wait);
  void connectNow();
  void onSocket(uint64_t attempt, StreamSocket socket);
  void onHello(Connection* conn, const wire::Hello& hello);
  void onLinkClosed(Connection* conn, const std::string& reason);

  asio::io_context& io_;
  std::unique_ptr<LeaderDetector> detector_;
  std::string detectorText_;
  Options options_;
  Callbacks callbacks_;
  std::optional<Leader> leader_;
  std::shared_ptr<Connection> connection_;
  asio::steady_timer waitTimer_;
  asio::steady_timer attemptTimer_;
  Backoff backoff_;
  Duration lastWait_{};
  uint64_t attempt_ = 0;
  uint64_t highestEpoch_ = 0;
  uint64_t failures_ = 0;
  bool handshaken_ = false;
  bool fenced_ = false;
  bool everReported_ = false;
  bool started_ = false;
  bool stopped_ = false;
  std::shared_ptr<Alive> alive_ = std::make_shared<Alive>();
};

}  // namespace allot
