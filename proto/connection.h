// Connection: one framed, handshaken protocol link over a stream socket (TCP
// or a Unix socket), driven by the daemon's single Asio io_context thread.
//
// Life cycle:
//   auto conn = Connection::create(std::move(socket), options);
//   conn->start(handlers);   // sends our Hello, waits for the peer's
//   conn->send(envelope);    // any time after create(); queued in order
//   conn->close("reason");   // or the peer closes; onClose fires once
//
// Handshake: the first frame from the peer must be a Hello with our
// kProtocolVersion (and, if Options::acceptRoles is set, one of those roles).
// Otherwise the peer gets a HelloRejected and the link closes. An oversized,
// truncated or undecodable frame closes only this connection, with a logged
// reason. A peer that lets more than Options::maxQueuedBytes pile up unsent
// is disconnected rather than allowed to exhaust memory.
//
// Thread: all methods on the io_context thread. Handlers are invoked there
// and may call send() or close() (also on this connection) re-entrantly.
#pragma once

#include "base/asio.h"
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "proto/allot.pb.h"
#include "proto/frame.h"

namespace allot {

using StreamSocket = asio::generic::stream_protocol::socket;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  struct Options {
    wire::Role localRole = wire::ROLE_UNKNOWN;
    std::string localName;
    std::vector<wire::Role> acceptRoles;  // empty: any role
    size_t maxFrameBytes = kMaxFrameBytes;
    size_t maxQueuedBytes = 64u << 20;
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
  size_t queuedBytes() const { return pending_.size() + writing_.size(); }

 private:
  Connection(StreamSocket socket, Options options);
  void readMore();
  void onReadable(const boost::system::error_code& ec);
  bool handleEnvelope(wire::Envelope& envelope);
  bool acceptHello(const wire::Hello& hello);
  void flush();

  StreamSocket socket_;
  Options options_;
  Handlers handlers_;
  FrameDecoder decoder_;
  wire::Envelope scratch_;
  wire::Hello peerHello_;
  std::string peerAddress_;
  std::string pending_;
  std::string writing_;
  bool handshaken_ = false;
  bool closed_ = false;
  bool writeInFlight_ = false;
  bool closeWhenFlushed_ = false;
  std::string closeReason_;
};

// Resolves host:port and connects. The callback gets the connected socket
// (TCP_NODELAY set) or an Error naming the address.
void asyncConnect(asio::io_context& io, const std::string& host, uint16_t port,
                  std::function<void(Result<asio::ip::tcp::socket>)> done);

// Helper to build envelopes: makeEnvelope([](wire::Envelope& e){ ... }).
wire::Envelope helloEnvelope(wire::Role role, const std::string& name);

}  // namespace allot
