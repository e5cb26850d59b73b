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
// Transport (TLS, the send queue, the read loop and its fairness, close):
// proto/framed_link.h, with kMaxFramesPerPass frames per pass of the loop.
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
#include "proto/framed_link.h"
#include "proto/tls.h"

namespace allot {

// Frames of one connection handled per pass of the loop (FramedLink):
// small enough that a batch of the costliest frames a master handles
// (registrations) takes a few milliseconds, large enough that the extra
// post per batch costs nothing measurable.
constexpr size_t kMaxFramesPerPass = 16;

class Connection : public FramedLink {
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
    // Plaintext: frames queued in one turn of the loop go out in one write
    // (proto/framed_link.h). A link shard's agent links set it: a RunTask
    // often follows an acknowledgement to the same agent.
    bool coalesceWrites = false;
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
  // Queues one serialized envelope with a body (one that arrived from
  // another link, passed on): what send() of the parsed one would queue.
  Status sendSerialized(std::string_view envelope);

  // Inherited from FramedLink: close(reason) (onClose fires with `reason`
  // unless it already fired), closeAfterFlush(reason), open(), handshaken(),
  // peerAddress(), peer() (its certificate once onHello runs, SO_PEERCRED
  // from create()), queuedBytes().
  const wire::Hello& peerHello() const { return peerHello_; }
  // The serialized envelope onMessage is handling, as it arrived (to pass
  // on without serializing it again); empty outside onMessage.
  std::string_view frame() const { return frame_; }

 private:
  Connection(StreamSocket socket, Options options);
  bool handleFrame(std::string_view payload) override;
  void closed(const std::string& reason) override;
  void reject(const std::string& refusal, const std::string& name);
  bool handleEnvelope(wire::Envelope& envelope);
  bool acceptHello(const wire::Hello& hello);
  std::string helloCertRole(wire::Role role) const;

  Options options_;
  Handlers handlers_;
  wire::Envelope scratch_;
  std::string_view frame_;
  wire::Hello peerHello_;
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
