#include "proto/shard_link.h"

#include "base/log.h"

namespace allot {

Status appendShardFrame(const shard::ShardEnvelope& envelope, std::string* out,
                        size_t maxFrameBytes) {
  if (envelope.body_case() == shard::ShardEnvelope::BODY_NOT_SET) {
    return Error{"refusing to send a shard envelope with no body"};
  }
  return appendMessageFrame(envelope, out, maxFrameBytes, "shard message");
}

std::shared_ptr<ShardLink> ShardLink::create(asio::ip::tcp::socket socket, Options options) {
  return std::shared_ptr<ShardLink>(new ShardLink(std::move(socket), std::move(options)));
}

ShardLink::ShardLink(asio::ip::tcp::socket socket, Options options)
    : FramedLink(streamSocket(std::move(socket)), transportOf(options, kShardFramesPerPass, "shard link")),
      options_(std::move(options)) {
  shard::ShardEnvelope hello;
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  hello.mutable_hello()->set_name(options_.localName);
  hello.mutable_hello()->set_leader_epoch(options_.leaderEpoch);
  queueFirst([&](std::string* out) { return appendShardFrame(hello, out, options_.maxFrameBytes); });
}

void ShardLink::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  startTransport();
}

Status ShardLink::send(const shard::ShardEnvelope& envelope) {
  return sendFrame([&](std::string* out) {
    return appendShardFrame(envelope, out, options_.maxFrameBytes);
  });
}

void ShardLink::closed(const std::string& reason) { fireOnClose(&handlers_, reason); }

bool ShardLink::handleFrame(std::string_view payload) {
  return decode(payload, &scratch_, "shard frame") && handleEnvelope(scratch_);
}

bool ShardLink::handleEnvelope(shard::ShardEnvelope& envelope) {
  if (handshaken()) {
    if (envelope.has_hello_rejected()) {
      close("peer rejected us: " + envelope.hello_rejected().reason());
    } else if (envelope.has_hello()) {
      close("second ShardHello");
    } else if (handlers_.onMessage) {
      handlers_.onMessage(envelope);
    }
    return open();
  }
  if (!envelope.has_hello()) {
    close(envelope.has_hello_rejected() ? "peer rejected us: " + envelope.hello_rejected().reason()
                                        : "first frame is not a ShardHello");
    return false;
  }
  if (envelope.hello().protocol_version() != kProtocolVersion) {
    close("protocol version " + std::to_string(envelope.hello().protocol_version()) +
          " is not supported");
    return false;
  }
  handshakeDone();
  peerHello_ = envelope.hello();
  if (handlers_.onHello) handlers_.onHello(peerHello_);
  return open();
}

}  // namespace allot
