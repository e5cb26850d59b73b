// FramedLink: the transport under every protocol link (Connection for
// wire::Envelope, ShardLink for shard::ShardEnvelope): a stream socket,
// plaintext or mutual TLS 1.3, carrying length-prefixed frames
// (proto/frame.h), driven by the daemon's single Asio io_context thread.
//
// It owns what both links share: the TLS handshake and the peer
// certificate's role check, the handshake timer, the send queue and its
// bound, the read loop and its fairness, and close. What a frame means (the
// Hello exchange, the message type) belongs to the subclass, which gets each
// frame's payload through handleFrame().
//
// Life cycle (the subclass's start() calls startTransport()):
//   queued frames wait until the transport is ready (TLS done), then go out
//   in order; frames are read and handed to handleFrame() one at a time;
//   close() (or the peer closing, a bad frame, a full queue, the handshake
//   timer) ends the link and calls closed() exactly once.
//
// Bounds: a frame above Transport::maxFrameBytes closes the link; more than
// Transport::maxQueuedBytes unsent closes it (a peer that does not read
// cannot exhaust memory); Transport::handshakeTimeout bounds TLS plus the
// subclass's Hello until handshakeDone().
//
// Fairness: one pass of the loop handles at most Transport::framesPerPass
// frames of a link; the rest of what one read brought waits behind every
// other completion already due (a post), and the socket is read again only
// once all of it is handled (the kernel's buffer and TCP's window hold a
// burst back). So a peer that floods frames delays other peers by at most
// one batch, not by a whole read chunk.
//
// Coalescing (Transport::coalesceWrites, plaintext only): a frame queued
// while nothing is being written goes out at the end of the loop's current
// turn, with every frame queued for the link in that turn, in one write: a
// link that carries many peers' messages (a shard's link to the leader), or
// gets several at once (an agent's RunTask behind an acknowledgement), sends
// once per turn, not once per frame. close() writes what is still queued
// once, without waiting, as the immediate write of a link that does not
// coalesce would have.
//
// Thread: all methods on the io_context thread. handleFrame() and closed()
// run there and may call send or close re-entrantly.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/asio.h"
#include "base/result.h"
#include "proto/frame.h"
#include "proto/peer_identity.h"
#include "proto/tls.h"

namespace allot {

using StreamSocket = asio::generic::stream_protocol::socket;

class FramedLink : public std::enable_shared_from_this<FramedLink> {
 public:
  // The limits and the security of one link.
  struct Transport {
    size_t maxFrameBytes = kMaxFrameBytes;
    size_t maxQueuedBytes = 0;
    size_t framesPerPass = 0;
    std::shared_ptr<ssl::context> tls;  // null: plaintext
    TlsSide tlsSide = TlsSide::kClient;
    // TLS: the peer's certificate must have this role (OU); empty: any.
    std::string requirePeerCertRole;
    // TLS + Hello must complete within this; zero: no limit.
    std::chrono::milliseconds handshakeTimeout{0};
    // What the link is called in errors and logs ("connection").
    std::string_view noun = "link";
    // Plaintext: frames queued in one turn of the loop go out in one write
    // (see above). Ignored over TLS.
    bool coalesceWrites = false;
  };

  virtual ~FramedLink() = default;
  FramedLink(const FramedLink&) = delete;
  FramedLink& operator=(const FramedLink&) = delete;

  // Closes the socket; closed(reason) runs unless the link is already closed.
  void close(const std::string& reason);
  // Closes once everything queued has been written (or at once if nothing is).
  void closeAfterFlush(const std::string& reason);

  bool open() const { return !closed_; }
  bool handshaken() const { return handshaken_; }
  const std::string& peerAddress() const { return peerAddress_; }
  // Who the peer is: its certificate (TLS, known once the handshake is done)
  // and its SO_PEERCRED (Unix sockets, known from construction).
  const PeerIdentity& peer() const { return peer_; }
  size_t queuedBytes() const { return pending_.size() + writing_.size(); }
  uint64_t bytesOut() const { return bytesOut_; }
  uint64_t bytesIn() const { return bytesIn_; }

 protected:
  FramedLink(StreamSocket socket, Transport transport);

  // Arms the handshake timer, runs TLS if configured, then writes what is
  // queued and reads. Once per link.
  void startTransport();
  // The peer's Hello was accepted: the handshake timer stops.
  void handshakeDone();

  // Queues one frame: `append(std::string* out)` appends it to `out` or
  // returns an Error appending nothing (too large, no body), which is logged
  // and returned. An Error, too, when the link is closed or its queue
  // overflows (which closes it).
  template <typename Append>
  Status sendFrame(Append&& append) {
    if (closed_) return closedError();
    if (Status st = append(&pending_); !st) return refused(st);
    return queued();
  }

  // Queues the link's first frame (its Hello), from the constructor: the
  // subclass knows it frames, so anything else is a programmer error.
  template <typename Append>
  void queueFirst(Append&& append) {
    CHECK(pending_.empty());
    Status st = append(&pending_);
    CHECK(st.ok());
  }

  // Parses a frame's payload into *out (a message with a oneof `body`);
  // false, the link closed with a logged reason naming `what`, when it does
  // not decode or carries no known body.
  template <typename Message>
  bool decode(std::string_view payload, Message* out, std::string_view what) {
    Status st = parseFramePayload(payload, out, what);
    if (st && out->body_case() == Message::BODY_NOT_SET) {
      st = Error{std::string(what) + " of " + std::to_string(payload.size()) +
                 " bytes carries no known message"};
    }
    if (!st) closeForBadFrame(st.error());
    return st.ok();
  }

  // One frame's payload, valid during the call. Returns false when the link
  // must stop handling frames (it closed, or refused the peer).
  virtual bool handleFrame(std::string_view payload) = 0;
  // Exactly once, from close().
  virtual void closed(const std::string& reason) = 0;

  const Transport& transport() const { return transport_; }

 private:
  void startTls();
  void transportReady();
  void closeForBadFrame(const Error& error);
  Status closedError() const;
  Status refused(const Status& st) const;
  Status queued();
  void flush();
  void flushLater();
  void writeQueuedNow();
  void readMore();
  void onRead(const boost::system::error_code& ec, size_t bytes);
  void onTlsRead(const boost::system::error_code& ec, size_t bytes);
  void consume(const char* data, size_t bytes, const boost::system::error_code& ec);
  void handleSome();

  StreamSocket socket_;
  Transport transport_;
  std::unique_ptr<ssl::stream<StreamSocket&>> tls_;
  std::vector<char> tlsReadBuffer_;
  // A plaintext link's own read buffer: one small read per wake-up, queued
  // on the socket without an epoll re-arm (framed_link.cpp).
  std::array<char, kLinkReadBytes> readBuffer_;
  asio::steady_timer handshakeTimer_;
  PeerIdentity peer_;
  FrameDecoder decoder_;
  std::string peerAddress_;
  std::string pending_;
  std::string writing_;
  uint64_t bytesOut_ = 0;
  uint64_t bytesIn_ = 0;
  bool transportReady_ = false;
  bool handshaken_ = false;
  bool closed_ = false;
  bool writeInFlight_ = false;
  bool flushPosted_ = false;
  bool closeWhenFlushed_ = false;
  std::string closeReason_;
};

// The Transport of a link whose Options name the shared settings the same
// way (Connection::Options, ShardLink::Options).
template <typename Options>
FramedLink::Transport transportOf(const Options& options, size_t framesPerPass,
                                  std::string_view noun) {
  return FramedLink::Transport{.maxFrameBytes = options.maxFrameBytes,
                               .maxQueuedBytes = options.maxQueuedBytes,
                               .framesPerPass = framesPerPass,
                               .tls = options.tls,
                               .tlsSide = options.tlsSide,
                               .requirePeerCertRole = options.requirePeerCertRole,
                               .handshakeTimeout = options.handshakeTimeout,
                               .noun = noun,
                               .coalesceWrites = options.coalesceWrites};
}

// Runs handlers.onClose(reason) once and drops every handler (they may hold
// the link's owner): what a subclass's closed() does.
template <typename Handlers>
void fireOnClose(Handlers* handlers, const std::string& reason) {
  auto onClose = std::move(handlers->onClose);
  *handlers = Handlers{};
  if (onClose) onClose(reason);
}

// Sets TCP_NODELAY (frames are small and latency matters) and makes the
// socket a StreamSocket.
StreamSocket streamSocket(asio::ip::tcp::socket socket);

}  // namespace allot
