#include "proto/frame.h"

#include <google/protobuf/stubs/logging.h>

#include <string>

#include "base/log.h"

namespace allot {
namespace {

// libprotobuf logs every parse failure (e.g. invalid UTF-8 in a string
// field) on its own. A peer's bad frame is already logged once by whoever
// closes the connection, so demote protobuf's lines to debug.
void protobufLog(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  if (level >= google::protobuf::LOGLEVEL_FATAL) {
    LOG_ERROR("protobuf " << file << ":" << line << ": " << message);
  } else {
    LOG_DEBUG("protobuf: " << message);
  }
}

}  // namespace

FrameDecoder::FrameDecoder(size_t maxFrameBytes) : maxFrameBytes_(maxFrameBytes) {
  static const bool routed = (google::protobuf::SetLogHandler(&protobufLog), true);
  (void)routed;
}

Status appendFrame(const wire::Envelope& envelope, std::string* out, size_t maxFrameBytes) {
  if (envelope.body_case() == wire::Envelope::BODY_NOT_SET) {
    return Error{"refusing to send an envelope with no body"};
  }
  size_t size = envelope.ByteSizeLong();
  if (size > maxFrameBytes) {
    return Error{"message of " + std::to_string(size) + " bytes exceeds the frame limit of " +
                 std::to_string(maxFrameBytes)};
  }
  size_t start = out->size();
  out->resize(start + kFrameHeaderBytes + size);
  auto* header = reinterpret_cast<unsigned char*>(out->data() + start);
  header[0] = static_cast<unsigned char>(size >> 24);
  header[1] = static_cast<unsigned char>(size >> 16);
  header[2] = static_cast<unsigned char>(size >> 8);
  header[3] = static_cast<unsigned char>(size);
  auto* payload = reinterpret_cast<uint8_t*>(out->data() + start + kFrameHeaderBytes);
  envelope.SerializeWithCachedSizesToArray(payload);
  return okStatus();
}

void FrameDecoder::append(const char* data, size_t size) {
  // Compact lazily so a long-lived connection does not grow its buffer.
  if (consumed_ > 0 && consumed_ * 2 >= buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(data, size);
}

Result<bool> FrameDecoder::next(wire::Envelope* out) {
  size_t available = buffer_.size() - consumed_;
  if (available < kFrameHeaderBytes) return false;
  const auto* header = reinterpret_cast<const unsigned char*>(buffer_.data() + consumed_);
  size_t size = (size_t{header[0]} << 24) | (size_t{header[1]} << 16) |
                (size_t{header[2]} << 8) | size_t{header[3]};
  if (size > maxFrameBytes_) {
    return Error{"frame of " + std::to_string(size) + " bytes exceeds the limit of " +
                 std::to_string(maxFrameBytes_)};
  }
  if (available < kFrameHeaderBytes + size) return false;
  const char* payload = buffer_.data() + consumed_ + kFrameHeaderBytes;
  out->Clear();
  if (!out->ParseFromArray(payload, static_cast<int>(size))) {
    return Error{"undecodable frame of " + std::to_string(size) + " bytes"};
  }
  if (out->body_case() == wire::Envelope::BODY_NOT_SET) {
    return Error{"frame of " + std::to_string(size) + " bytes carries no known message"};
  }
  consumed_ += kFrameHeaderBytes + size;
  if (consumed_ == buffer_.size()) {
    // Keep a small buffer for the next frame; give back what a burst grew.
    if (buffer_.capacity() > 64 * 1024) std::string().swap(buffer_);
    buffer_.clear();
    consumed_ = 0;
  }
  return true;
}

}  // namespace allot
