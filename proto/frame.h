// Frame codec (proto/FORMAT.md): a 4-byte big-endian payload length, then
// that many bytes of a serialized wire::Envelope.
//
// FrameDecoder is a pure byte-stream parser with no I/O, so the fuzz target
// and the unit tests drive exactly the code the daemons run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "proto/allot.pb.h"

namespace allot {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 4;
// Hard cap on one frame's payload. Large offer batches are split by the
// sender well below it.
inline constexpr size_t kMaxFrameBytes = 16u << 20;
// What a link reads from its socket at a time (proto/framed_link.h): first
// into a buffer of its own, then, when that fills, a chunk at a time.
inline constexpr size_t kLinkReadBytes = 512;
inline constexpr size_t kReadChunkBytes = 64 * 1024;

// Appends one frame holding `envelope` to `out`. Fails (appending nothing)
// if the envelope has no body or would exceed maxFrameBytes.
Status appendFrame(const wire::Envelope& envelope, std::string* out,
                   size_t maxFrameBytes = kMaxFrameBytes);

// The codec under every message type (wire::Envelope, shard::ShardEnvelope):
// appends one frame holding `message`, failing (appending nothing) if it
// would exceed maxFrameBytes; `what` names the message in the error.
Status appendMessageFrame(const google::protobuf::MessageLite& message, std::string* out,
                          size_t maxFrameBytes, std::string_view what);
// Parses one frame's payload into *out; an Error naming `what` and the size
// when it does not decode.
Status parseFramePayload(std::string_view payload, google::protobuf::MessageLite* out,
                         std::string_view what);

class FrameDecoder {
 public:
  explicit FrameDecoder(size_t maxFrameBytes = kMaxFrameBytes);

  // Adds bytes received from the peer.
  void append(const char* data, size_t size);

  // Decodes the next complete frame into *out. Returns true when one was
  // decoded, false when more bytes are needed, and an Error (after which
  // the stream is unusable) for an oversized frame, an undecodable payload
  // or an envelope with no body.
  Result<bool> next(wire::Envelope* out);

  // The next complete frame's payload, of any message type: true and
  // *payload (valid until the next call to append() or nextPayload()), false
  // when more bytes are needed, an Error for an oversized frame.
  Result<bool> nextPayload(std::string_view* payload);

  // True when bytes of an incomplete frame are buffered: at end of stream
  // that means the peer sent a truncated frame.
  bool midFrame() const { return buffer_.size() > consumed_; }

  size_t bufferedBytes() const { return buffer_.size() - consumed_; }

 private:
  // The next complete frame's payload, without consuming it.
  Result<bool> peek(std::string_view* payload);

  std::string buffer_;
  size_t consumed_ = 0;
  size_t maxFrameBytes_;
};

}  // namespace allot
