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
  return appendMessageFrame(envelope, out, maxFrameBytes, "message");
}

Status appendMessageFrame(const google::protobuf::MessageLite& message, std::string* out,
                          size_t maxFrameBytes, std::string_view what) {
  size_t size = message.ByteSizeLong();
  if (size > maxFrameBytes) {
    return Error{std::string(what) + " of " + std::to_string(size) +
                 " bytes exceeds the frame limit of " + std::to_string(maxFrameBytes)};
  }
  size_t start = out->size();
  out->resize(start + kFrameHeaderBytes + size);
  auto* header = reinterpret_cast<unsigned char*>(out->data() + start);
  header[0] = static_cast<unsigned char>(size >> 24);
  header[1] = static_cast<unsigned char>(size >> 16);
  header[2] = static_cast<unsigned char>(size >> 8);
  header[3] = static_cast<unsigned char>(size);
  auto* payload = reinterpret_cast<uint8_t*>(out->data() + start + kFrameHeaderBytes);
  message.SerializeWithCachedSizesToArray(payload);
  return okStatus();
}

Status parseFramePayload(std::string_view payload, google::protobuf::MessageLite* out,
                         std::string_view what) {
  out->Clear();
  if (!out->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return Error{"undecodable " + std::string(what) + " of " + std::to_string(payload.size()) +
                 " bytes"};
  }
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
  std::string_view payload;
  Result<bool> got = peek(&payload);
  if (!got || !*got) return got;
  if (Status st = parseFramePayload(payload, out, "frame"); !st) return st.error();
  if (out->body_case() == wire::Envelope::BODY_NOT_SET) {
    return Error{"frame of " + std::to_string(payload.size()) + " bytes carries no known message"};
  }
  consumed_ += kFrameHeaderBytes + payload.size();
  return true;
}

Result<bool> FrameDecoder::nextPayload(std::string_view* payload) {
  Result<bool> got = peek(payload);
  if (got && *got) consumed_ += kFrameHeaderBytes + payload->size();
  return got;
}

Result<bool> FrameDecoder::peek(std::string_view* payload) {
  if (consumed_ > 0 && consumed_ == buffer_.size()) {
    // Keep a small buffer for the next frame; give back what a burst grew.
    if (buffer_.capacity() > 64 * 1024) std::string().swap(buffer_);
    buffer_.clear();
    consumed_ = 0;
  }
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
  *payload = std::string_view(buffer_.data() + consumed_ + kFrameHeaderBytes, size);
  return true;
}

}  // namespace allot
