// ShardLink: the one framed link between a link shard and the leading
// master (proto/shard.proto), over TCP, plaintext or mutual TLS 1.3.
//
//   auto link = ShardLink::create(std::move(socket), options);
//   link->start(handlers);   // sends our ShardHello, waits for the peer's
//   link->send(envelope);    // any time after create(); queued in order
//   link->close("reason");   // or the peer closes; onClose fires once
//
// It carries every agent of a shard, so it is Connection's (proto/
// connection.h) counterpart for ShardEnvelope rather than Envelope, with the
// same rules: the peer's first frame must be a ShardHello of our
// kProtocolVersion; over TLS the peer's certificate must have
// Options::requirePeerCertRole (the master requires `shard`, the shard
// `master`); handshakeTimeout bounds TLS + Hello; an oversized or
// undecodable frame closes the link; more than maxQueuedBytes unsent closes
// it. At most kShardFramesPerPass frames are handled per pass of the loop.
// That transport is Connection's own: proto/framed_link.h.
//
// Thread: all methods on the io_context thread; handlers run there and may
// call send() or close() re-entrantly.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/asio.h"
#include "base/result.h"
#include "proto/frame.h"
#include "proto/framed_link.h"
#include "proto/peer_identity.h"
#include "proto/shard.pb.h"
#include "proto/tls.h"

namespace allot {

// Frames handled per pass: a shard's link carries many agents' messages, so
// a burst of them yields to the master's other links every batch.
constexpr size_t kShardFramesPerPass = 64;
// What may wait unsent on a shard link: room for every agent of a full
// shard (19,000) re-registering at once with ~10 KiB of tasks each.
constexpr size_t kShardLinkQueuedBytesMax = size_t{256} << 20;

class ShardLink : public FramedLink {
 public:
  struct Options {
    std::string localName;
    uint64_t leaderEpoch = 0;  // sent in our ShardHello
    size_t maxFrameBytes = kMaxFrameBytes;
    size_t maxQueuedBytes = kShardLinkQueuedBytesMax;
    std::shared_ptr<ssl::context> tls;  // null: plaintext
    TlsSide tlsSide = TlsSide::kClient;
    std::string requirePeerCertRole;    // TLS: the peer certificate's role
    std::chrono::milliseconds handshakeTimeout = std::chrono::seconds(10);
    // Plaintext: the messages for many agents queued in one turn of the
    // loop go out in one write (proto/framed_link.h).
    bool coalesceWrites = true;
  };
  struct Handlers {
    std::function<void(const shard::ShardHello&)> onHello;
    std::function<void(shard::ShardEnvelope&)> onMessage;
    std::function<void(const std::string& reason)> onClose;  // exactly once
  };

  static std::shared_ptr<ShardLink> create(asio::ip::tcp::socket socket, Options options);

  void start(Handlers handlers);
  // Queues one message; an Error (nothing sent) when it cannot be framed
  // or the link is closed; closes the link when the queue overflows.
  Status send(const shard::ShardEnvelope& envelope);
  // Queues an AgentMessage for `slot` carrying `envelope`, a serialized
  // wire::Envelope as it arrived from the agent: what send() of the parsed
  // one would queue, without serializing it again.
  Status sendAgentMessage(uint64_t slot, std::string_view envelope);
  // The same for a parsed envelope (the leader's, for an agent), serialized
  // straight into the frame rather than copied into a ShardEnvelope first.
  Status sendAgentMessage(uint64_t slot, const wire::Envelope& envelope);
  // Inherited from FramedLink: close(reason) (onClose fires once),
  // handshaken(), peer(), peerAddress(), queuedBytes(), bytesOut(), bytesIn().
  const shard::ShardHello& peerHello() const { return peerHello_; }
  // The serialized envelope onMessage is handling, as it arrived (see
  // agentMessageEnvelopeBytes); empty outside onMessage.
  std::string_view frame() const { return frame_; }

 private:
  ShardLink(asio::ip::tcp::socket socket, Options options);
  bool handleFrame(std::string_view payload) override;
  bool handleEnvelope(shard::ShardEnvelope& envelope);
  void closed(const std::string& reason) override;

  Options options_;
  Handlers handlers_;
  shard::ShardHello peerHello_;
  shard::ShardEnvelope scratch_;
  std::string_view frame_;
};

// Appends one frame holding `envelope` to `out`; fails (appending nothing)
// when it has no body or exceeds maxFrameBytes.
Status appendShardFrame(const shard::ShardEnvelope& envelope, std::string* out,
                        size_t maxFrameBytes);

// The payload size of a ShardEnvelope holding an AgentMessage for `slot`
// with an envelope of `envelopeBytes`.
size_t agentMessagePayloadBytes(uint64_t slot, size_t envelopeBytes);
// Appends the frame of that ShardEnvelope, `envelope` being the serialized
// wire::Envelope: byte for byte what appendShardFrame gives for the parsed
// one (an embedded message is written as its length and its bytes), without
// walking it. Fails (appending nothing) beyond maxFrameBytes.
Status appendAgentMessageFrame(uint64_t slot, std::string_view envelope, std::string* out,
                               size_t maxFrameBytes);
// The same for a parsed envelope, serialized into the frame.
Status appendAgentMessageFrame(uint64_t slot, const wire::Envelope& envelope, std::string* out,
                               size_t maxFrameBytes);
// The serialized wire::Envelope inside `payload`, a ShardEnvelope's payload
// that parsed into an AgentMessage for `slot`, when the payload is laid out
// as appendAgentMessageFrame lays it out (each field once, nothing else):
// the very bytes its envelope parsed from, to pass on as they are. Empty
// for any other layout (then the parsed envelope is serialized again).
std::string_view agentMessageEnvelopeBytes(std::string_view payload, uint64_t slot);

}  // namespace allot
