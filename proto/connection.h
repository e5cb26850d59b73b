// Connection: one framed, handshaken protocol link over a stream socket (TCP
// or a Unix socket), driven by the daemon's single Asio io_context thread.
//
// Life cycle:
//   auto conn = Connection::create(std::move(socket), options);
//   conn->start(handlers);   // sends our Hello, waits for the peer's
//   conn->send(envelope);    // any time after create(); queued in order
//   conn->close("reason");   // or the peer closes; onClose fires once
//
// Transport: plaintext, or mutual TLS 1.3 when Options::tls is set (TCP
// only; proto/tls.h). The TLS handshake runs inside start(), before the
// Hellos; a failure closes the link with a reason that starts "TLS".
//
// Handshake: the first frame from the peer must be a Hello with our
// kProtocolVersion (and, if Options::acceptRoles is set, one of those roles).
// Over TLS the Hello's role must also match the role (OU) of the peer's
// certificate (framework <-> ROLE_SCHEDULER, agent <-> ROLE_AGENT, master <->
// ROLE_MASTER; Options::peerHelloCertRole overrides the mapping). Otherwise the peer gets a HelloRejected naming both and the
// link closes. Options::handshakeTimeout bounds TLS + Hello together. An oversized,
// truncated or undecodable frame closes only this connection, with a logged
// reason. A peer that lets more than Options::maxQueuedBytes pile up unsent
// is disconnected rather than allowed to exhaust memory.
//
// Fairness: one pass of the loop handles at most kMaxFramesPerPass frames of
// a connection; the rest of what one read brought waits behind every other
// completion already due (a post), and the socket is read again only once
// all of it is handled (the kernel's buffer and TCP's window hold a burst
// back). So a peer that floods frames delays other peers by at most one
// batch, not by a whole read chunk (64 KiB: over a thousand small frames).
//
// Thread: all methods on the io_context thread. Handlers are invoked there
// and may call send() or close() (also on this connection) re-entrantly.
#pragma once

#include "base/asio.h"
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/flags.h"
#include "base/result.h"
#include "proto/allot.pb.h"
#include "proto/frame.h"
#include "proto/tls.h"

namespace allot {

// Frames of one connection handled per pass of the loop (Fairness above):
// small enough that a batch of the costliest frames a master handles
// (registrations) takes a few milliseconds, large enough that the extra
// post per batch costs nothing measurable.
constexpr size_t kMaxFramesPerPass = 16;

using StreamSocket = asio::generic::stream_protocol::socket;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  struct Options {
    wire::Role localRole = wire::ROLE_UNKNOWN;
    std::string localName;
    std::vector<wire::Role> acceptRoles;  // empty: any role
    size_t maxFrameBytes = kMaxFrameBytes;
    size_t maxQueuedBytes = 64u << 20;
    // Sent in our Hello (masters: their leader epoch, docs/links.md).
    uint64_t leaderEpoch = 0;
    // Null: plaintext. Otherwise mutual TLS with this context (makeTlsContext).
    std::shared_ptr<ssl::context> tls;
    TlsSide tlsSide = TlsSide::kClient;
    // TLS: the peer's certificate must have this role (OU); empty: any.
    // Clients of a master set "master".
    std::string requirePeerCertRole;
    // TLS: the certificate role the peer's Hello role must come with; empty:
    // certRoleFor(its role). A link shard speaks to its agents as
    // ROLE_MASTER with a `shard` certificate, so their links set "shard".
    std::string peerHelloCertRole;
    // TLS handshake + Hello must complete within this; zero: no limit.
    std::chrono::milliseconds handshakeTimeout = std::chrono::seconds(10);
  };

  struct Handlers {
    // The peer's Hello was accepted. Optional.
    std::function<void(const wire::Hello&)> onHello;
    // Every envelope after the Hello.
    std::function<void(wire::Envelope&)> onMessage;
    // Exactly once, when the link is gone. `reason` says why (peer closed,
    // bad frame, handshake refused, close() called).
    std::function<void(const std::string& reason)> onClose;
  };

  static std::shared_ptr<Connection> create(StreamSocket socket, Options options);
  static std::shared_ptr<Connection> create(asio::ip::tcp::socket socket, Options options);

  void start(Handlers handlers);

  // Queues one message. Returns an error (and sends nothing) if the
  // message is too large to frame; closes the link if the queue is full.
  Status send(const wire::Envelope& envelope);

  // Closes the socket; onClose fires with `reason` unless it already fired.
  void close(const std::string& reason);
  // Closes once everything queued has been written (or at once if nothing is).
  void closeAfterFlush(const std::string& reason);

  bool open() const { return !closed_; }
  bool handshaken() const { return handshaken_; }
  const wire::Hello& peerHello() const { return peerHello_; }
  const std::string& peerAddress() const { return peerAddress_; }
  // Who the peer is: its certificate (TLS, known once onHello runs) and its
  // SO_PEERCRED (Unix sockets, known from create()).
  const PeerIdentity& peer() const { return peer_; }
  size_t queuedBytes() const { return pending_.size() + writing_.size(); }

 private:
  Connection(StreamSocket socket, Options options);
  void startTls();
  void transportReady();
  void readMore();
  void onReadable(const boost::system::error_code& ec);
  void onTlsRead(const boost::system::error_code& ec, size_t bytes);
  void consume(const char* data, size_t bytes, const boost::system::error_code& ec);
  void handleSome();
  void reject(const std::string& refusal, const std::string& name);
  bool handleEnvelope(wire::Envelope& envelope);
  bool acceptHello(const wire::Hello& hello);
  std::string helloCertRole(wire::Role role) const;
  void flush();

  StreamSocket socket_;
  Options options_;
  std::unique_ptr<ssl::stream<StreamSocket&>> tls_;
  std::vector<char> tlsReadBuffer_;
  asio::steady_timer handshakeTimer_;
  PeerIdentity peer_;
  Handlers handlers_;
  FrameDecoder decoder_;
  wire::Envelope scratch_;
  wire::Hello peerHello_;
  std::string peerAddress_;
  std::string pending_;
  std::string writing_;
  bool transportReady_ = false;
  bool handshaken_ = false;
  bool closed_ = false;
  bool writeInFlight_ = false;
  bool closeWhenFlushed_ = false;
  std::string closeReason_;
};

// Connects to host:port: straight to a numeric IPv4 or IPv6 address, through
// the resolver for a name. The callback gets the connected socket
// (TCP_NODELAY set) or an Error naming the address.
void asyncConnect(asio::io_context& io, const std::string& host, uint16_t port,
                  std::function<void(Result<asio::ip::tcp::socket>)> done);

// Opens `acceptor` on where.host:where.port (a numeric address; SO_REUSEADDR)
// and listens. The errors name `flag` (the option the address came from) and
// say "cannot listen<what> on HOST:PORT".
Status listenTcp(asio::ip::tcp::acceptor& acceptor, const HostPort& where, std::string_view flag,
                 std::string_view what = "");

// The Hello every Connection sends first.
wire::Envelope helloEnvelope(wire::Role role, const std::string& name, uint64_t leaderEpoch = 0);

}  // namespace allot
