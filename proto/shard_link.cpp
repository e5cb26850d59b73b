#include "proto/shard_link.h"

#include "base/log.h"

namespace allot {

namespace {

void putLength(char* at, size_t size) {
  auto* p = reinterpret_cast<unsigned char*>(at);
  p[0] = static_cast<unsigned char>(size >> 24);
  p[1] = static_cast<unsigned char>(size >> 16);
  p[2] = static_cast<unsigned char>(size >> 8);
  p[3] = static_cast<unsigned char>(size);
}
}  // namespace

Status appendShardFrame(const shard::ShardEnvelope& envelope, std::string* out,
                        size_t maxFrameBytes) {
  if (envelope.body_case() == shard::ShardEnvelope::BODY_NOT_SET) {
    return Error{"refusing to send a shard envelope with no body"};
  }
  size_t size = envelope.ByteSizeLong();
  if (size > maxFrameBytes) {
    return Error{"shard message of " + std::to_string(size) + " bytes exceeds the frame limit of " +
                 std::to_string(maxFrameBytes)};
  }
  size_t start = out->size();
  out->resize(start + kFrameHeaderBytes + size);
  putLength(out->data() + start, size);
  envelope.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(out->data() + start + kFrameHeaderBytes));
  return okStatus();
}

Result<bool> nextShardFrame(const std::string& buffer, size_t* consumed, size_t maxFrameBytes,
                            shard::ShardEnvelope* out) {
  size_t available = buffer.size() - *consumed;
  if (available < kFrameHeaderBytes) return false;
  const auto* h = reinterpret_cast<const unsigned char*>(buffer.data() + *consumed);
  size_t size = (size_t{h[0]} << 24) | (size_t{h[1]} << 16) | (size_t{h[2]} << 8) | size_t{h[3]};
  if (size > maxFrameBytes) {
    return Error{"shard frame of " + std::to_string(size) + " bytes exceeds the limit of " +
                 std::to_string(maxFrameBytes)};
  }
  if (available < kFrameHeaderBytes + size) return false;
  out->Clear();
  if (!out->ParseFromArray(buffer.data() + *consumed + kFrameHeaderBytes, static_cast<int>(size))) {
    return Error{"undecodable shard frame of " + std::to_string(size) + " bytes"};
  }
  if (out->body_case() == shard::ShardEnvelope::BODY_NOT_SET) {
    return Error{"shard frame of " + std::to_string(size) + " bytes carries no known message"};
  }
  *consumed += kFrameHeaderBytes + size;
  return true;
}

std::shared_ptr<ShardLink> ShardLink::create(asio::ip::tcp::socket socket, Options options) {
  return std::shared_ptr<ShardLink>(new ShardLink(std::move(socket), std::move(options)));
}

ShardLink::ShardLink(asio::ip::tcp::socket socket, Options options)
    : socket_(std::move(socket)), options_(std::move(options)), handshakeTimer_(socket_.get_executor()) {
  boost::system::error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  auto endpoint = socket_.remote_endpoint(ec);
  peerAddress_ = ec ? "unknown peer" : endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  if (options_.tls) tls_ = std::make_unique<ssl::stream<asio::ip::tcp::socket&>>(socket_, *options_.tls);
  shard::ShardEnvelope hello;
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  hello.mutable_hello()->set_name(options_.localName);
  hello.mutable_hello()->set_leader_epoch(options_.leaderEpoch);
  Status st = appendShardFrame(hello, &pending_, options_.maxFrameBytes);
  CHECK(st.ok());
}

void ShardLink::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  auto self = shared_from_this();
  if (options_.handshakeTimeout > std::chrono::milliseconds::zero()) {
    handshakeTimer_.expires_after(options_.handshakeTimeout);
    handshakeTimer_.async_wait([self](const boost::system::error_code& ec) {
      if (ec || self->closed_ || self->handshaken_) return;
      self->close("shard link handshake timed out after " +
                  std::to_string(self->options_.handshakeTimeout.count()) + " ms");
    });
  }
  if (!tls_) return transportReady();
  auto side = options_.tlsSide == TlsSide::kServer ? ssl::stream_base::server : ssl::stream_base::client;
  tls_->async_handshake(side, [self](const boost::system::error_code& ec) {
    if (self->closed_) return;
    std::string failure;
    if (ec) {
      failure = "TLS handshake: " + ec.message();
    } else if (Status st = readPeerCertificate(self->tls_->native_handle(), &self->peer_); !st) {
      failure = "TLS: " + st.error().describe();
    } else if (!self->options_.requirePeerCertRole.empty() &&
               self->peer_.certRole != self->options_.requirePeerCertRole) {
      failure = "TLS: peer certificate of " + self->peer_.principal + " has role '" +
                self->peer_.certRole + "', expected '" + self->options_.requirePeerCertRole + "'";
    }
    if (!failure.empty()) {
      LOG_WARNING("closing shard link with " << self->peerAddress_ << ": " << failure);
      return self->close(failure);
    }
    self->transportReady();
  });
}

void ShardLink::transportReady() {
  transportReady_ = true;
  flush();
  readMore();
}

Status ShardLink::send(const shard::ShardEnvelope& envelope) {
  if (closed_) return Error{"shard link to " + peerAddress_ + " is closed"};
  if (Status st = appendShardFrame(envelope, &pending_, options_.maxFrameBytes); !st) {
    LOG_ERROR("not sending to " << peerAddress_ << ": " << st.error().describe());
    return st;
  }
  if (queuedBytes() > options_.maxQueuedBytes) {
    close("shard link peer is not reading: " + std::to_string(queuedBytes()) + " bytes queued");
    return Error{"send queue to " + peerAddress_ + " overflowed"};
  }
  flush();
  return okStatus();
}

void ShardLink::flush() {
  if (writeInFlight_ || closed_ || !transportReady_ || pending_.empty()) return;
  writing_.swap(pending_);
  pending_.clear();
  writeInFlight_ = true;
  auto done = [self = shared_from_this()](const boost::system::error_code& ec, size_t bytes) {
    self->writeInFlight_ = false;
    self->writing_.clear();
    self->bytesOut_ += bytes;
    if (ec) return self->close("write failed: " + ec.message());
    self->flush();
  };
  if (tls_) return asio::async_write(*tls_, asio::buffer(writing_), std::move(done));
  asio::async_write(socket_, asio::buffer(writing_), std::move(done));
}

void ShardLink::close(const std::string& reason) {
  if (closed_) return;
  closed_ = true;
  handshakeTimer_.cancel();
  boost::system::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
  auto onClose = std::move(handlers_.onClose);
  handlers_ = Handlers{};
  if (onClose) onClose(reason);
}

void ShardLink::readMore() {
  if (closed_) return;
  if (readBuffer_.empty()) readBuffer_.resize(kReadChunkBytes);
  auto done = [self = shared_from_this()](const boost::system::error_code& ec, size_t bytes) {
    self->onRead(ec, bytes);
  };
  if (tls_) return tls_->async_read_some(asio::buffer(readBuffer_), std::move(done));
  socket_.async_read_some(asio::buffer(readBuffer_), std::move(done));
}

void ShardLink::onRead(const boost::system::error_code& ec, size_t bytes) {
  if (closed_) return;
  if (ec) return close(describeReadError(ec));
  bytesIn_ += bytes;
  if (consumed_ > 0 && consumed_ * 2 >= buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(readBuffer_.data(), bytes);
  handleSome();
}

void ShardLink::handleSome() {
  for (size_t handled = 0; !closed_; ++handled) {
    if (handled == kShardFramesPerPass) {
      asio::post(socket_.get_executor(), [self = shared_from_this()] {
        if (!self->closed_) self->handleSome();
      });
      return;
    }
    Result<bool> got = nextShardFrame(buffer_, &consumed_, options_.maxFrameBytes, &scratch_);
    if (!got) {
      LOG_WARNING("closing shard link with " << peerAddress_ << ": " << got.error().describe());
      return close(got.error().describe());
    }
    if (!*got) break;
    if (!handleFrame(scratch_)) return;
  }
  readMore();
}

bool ShardLink::handleFrame(shard::ShardEnvelope& envelope) {
  if (handshaken_) {
    if (envelope.has_hello_rejected()) {
      close("peer rejected us: " + envelope.hello_rejected().reason());
    } else if (envelope.has_hello()) {
      close("second ShardHello");
    } else if (handlers_.onMessage) {
      handlers_.onMessage(envelope);
    }
    return !closed_;
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
  handshaken_ = true;
  handshakeTimer_.cancel();
  peerHello_ = envelope.hello();
  if (handlers_.onHello) handlers_.onHello(peerHello_);
  return !closed_;
}

}  // namespace allot
