#include "proto/shard_link.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstring>

#include "base/log.h"

namespace allot {

Status appendShardFrame(const shard::ShardEnvelope& envelope, std::string* out,
                        size_t maxFrameBytes) {
  if (envelope.body_case() == shard::ShardEnvelope::BODY_NOT_SET) {
    return Error{"refusing to send a shard envelope with no body"};
  }
  return appendMessageFrame(envelope, out, maxFrameBytes, "shard message");
}

namespace {

using google::protobuf::io::CodedOutputStream;
using google::protobuf::internal::WireFormatLite;

constexpr uint32_t lengthDelimited(int field) {
  return WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
}
constexpr uint32_t kAgentMessageTag = lengthDelimited(shard::ShardEnvelope::kAgentMessageFieldNumber);
constexpr uint32_t kEnvelopeTag = lengthDelimited(shard::AgentMessage::kEnvelopeFieldNumber);
constexpr uint32_t kSlotTag =
    WireFormatLite::MakeTag(shard::AgentMessage::kSlotFieldNumber, WireFormatLite::WIRETYPE_VARINT);

// The AgentMessage's own bytes: proto3 leaves out a zero slot.
size_t agentMessageBytes(uint64_t slot, size_t envelopeBytes) {
  size_t bytes = CodedOutputStream::VarintSize32(kEnvelopeTag) +
                 CodedOutputStream::VarintSize64(envelopeBytes) + envelopeBytes;
  if (slot != 0) bytes += CodedOutputStream::VarintSize32(kSlotTag) + CodedOutputStream::VarintSize64(slot);
  return bytes;
}

// Reads a varint at *p (before end) into *value; false when malformed.
bool readVarint(const uint8_t** p, const uint8_t* end, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t byte = *(*p)++;
    *value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80u) == 0) return true;
  }
  return false;
}

}  // namespace

std::string_view agentMessageEnvelopeBytes(std::string_view payload, uint64_t slot) {
  const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
  const uint8_t* end = p + payload.size();
  uint64_t tag = 0, length = 0, value = 0;
  if (!readVarint(&p, end, &tag) || tag != kAgentMessageTag) return {};
  if (!readVarint(&p, end, &length) || length != static_cast<uint64_t>(end - p)) return {};
  if (!readVarint(&p, end, &tag)) return {};
  if (tag == kSlotTag) {
    if (!readVarint(&p, end, &value) || value != slot || !readVarint(&p, end, &tag)) return {};
  } else if (slot != 0) {
    return {};
  }
  if (tag != kEnvelopeTag) return {};
  if (!readVarint(&p, end, &length) || length != static_cast<uint64_t>(end - p)) return {};
  return {reinterpret_cast<const char*>(p), static_cast<size_t>(length)};
}

size_t agentMessagePayloadBytes(uint64_t slot, size_t envelopeBytes) {
  size_t inner = agentMessageBytes(slot, envelopeBytes);
  return CodedOutputStream::VarintSize32(kAgentMessageTag) + CodedOutputStream::VarintSize64(inner) + inner;
}

namespace {

// Appends the frame's header and the AgentMessage's fields up to the
// envelope's bytes; returns where those go, or null past maxFrameBytes.
uint8_t* appendAgentMessageHeader(uint64_t slot, size_t envelopeBytes, std::string* out, size_t maxFrameBytes,
                                  Status* st) {
  size_t size = agentMessagePayloadBytes(slot, envelopeBytes);
  if (size > maxFrameBytes) {
    *st = Error{"shard message of " + std::to_string(size) + " bytes exceeds the frame limit of " +
                std::to_string(maxFrameBytes)};
    return nullptr;
  }
  size_t start = out->size();
  out->resize(start + kFrameHeaderBytes + size);
  auto* p = reinterpret_cast<uint8_t*>(out->data() + start);
  for (int shift = 24; shift >= 0; shift -= 8) *p++ = static_cast<uint8_t>(size >> shift);
  p = CodedOutputStream::WriteVarint32ToArray(kAgentMessageTag, p);
  p = CodedOutputStream::WriteVarint64ToArray(agentMessageBytes(slot, envelopeBytes), p);
  if (slot != 0) {
    p = CodedOutputStream::WriteVarint32ToArray(kSlotTag, p);
    p = CodedOutputStream::WriteVarint64ToArray(slot, p);
  }
  p = CodedOutputStream::WriteVarint32ToArray(kEnvelopeTag, p);
  return CodedOutputStream::WriteVarint64ToArray(envelopeBytes, p);
}

}  // namespace

Status appendAgentMessageFrame(uint64_t slot, std::string_view envelope, std::string* out,
                               size_t maxFrameBytes) {
  Status st = okStatus();
  uint8_t* p = appendAgentMessageHeader(slot, envelope.size(), out, maxFrameBytes, &st);
  if (p != nullptr) std::memcpy(p, envelope.data(), envelope.size());
  return st;
}

Status appendAgentMessageFrame(uint64_t slot, const wire::Envelope& envelope, std::string* out,
                               size_t maxFrameBytes) {
  Status st = okStatus();
  uint8_t* p = appendAgentMessageHeader(slot, envelope.ByteSizeLong(), out, maxFrameBytes, &st);
  if (p != nullptr) envelope.SerializeWithCachedSizesToArray(p);
  return st;
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

Status ShardLink::sendAgentMessage(uint64_t slot, std::string_view envelope) {
  return sendFrame([&](std::string* out) {
    return appendAgentMessageFrame(slot, envelope, out, options_.maxFrameBytes);
  });
}

Status ShardLink::sendAgentMessage(uint64_t slot, const wire::Envelope& envelope) {
  return sendFrame([&](std::string* out) {
    return appendAgentMessageFrame(slot, envelope, out, options_.maxFrameBytes);
  });
}

void ShardLink::closed(const std::string& reason) { fireOnClose(&handlers_, reason); }

bool ShardLink::handleFrame(std::string_view payload) {
  if (!decode(payload, &scratch_, "shard frame")) return false;
  frame_ = payload;
  bool more = handleEnvelope(scratch_);
  frame_ = {};
  return more;
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
