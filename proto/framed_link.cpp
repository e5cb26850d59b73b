#include "proto/framed_link.h"

#include <sys/socket.h>

#include <cstring>

#include "base/log.h"

namespace allot {

namespace {
// TLS reads go through OpenSSL's record buffer, so a TLS link reads into a
// buffer of its own (one record's worth).
constexpr size_t kTlsReadChunkBytes = 16 * 1024;

// One large read buffer for every plaintext link of the thread. A link
// reads into its own kLinkReadBytes buffer with a pending read (Asio queues
// it on the edge-triggered socket without a syscall, where waiting for
// readability re-arms epoll at every wait); a read that fills it drains the
// rest of the burst into this one, so 50,000 agents pin 25 MiB, not 3 GiB.
char* sharedReadBuffer() {
  thread_local std::vector<char> buffer(kReadChunkBytes);
  return buffer.data();
}

std::string describeEndpoint(const StreamSocket& socket) {
  boost::system::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) return "unknown peer";
  if (endpoint.protocol().family() == AF_INET || endpoint.protocol().family() == AF_INET6) {
    asio::ip::tcp::endpoint tcp;
    tcp.resize(endpoint.size());
    std::memcpy(tcp.data(), endpoint.data(), endpoint.size());
    return tcp.address().to_string() + ":" + std::to_string(tcp.port());
  }
  return "local socket";
}

bool isUnixSocket(const StreamSocket& socket) {
  boost::system::error_code ec;
  auto endpoint = socket.local_endpoint(ec);
  return !ec && endpoint.protocol().family() == AF_UNIX;
}

}  // namespace

StreamSocket streamSocket(asio::ip::tcp::socket socket) {
  boost::system::error_code ignored;
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  return StreamSocket(std::move(socket));
}

FramedLink::FramedLink(StreamSocket socket, Transport transport)
    : socket_(std::move(socket)),
      transport_(std::move(transport)),
      handshakeTimer_(socket_.get_executor()),
      decoder_(transport_.maxFrameBytes) {
  CHECK(transport_.framesPerPass > 0);
  peerAddress_ = describeEndpoint(socket_);
  if (isUnixSocket(socket_)) {
    struct ucred cred {};
    socklen_t length = sizeof cred;
    if (getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0) {
      peer_.pid = cred.pid;
      peer_.uid = cred.uid;
      peer_.gid = cred.gid;
    }
  }
  if (transport_.tls) {
    tls_ = std::make_unique<ssl::stream<StreamSocket&>>(socket_, *transport_.tls);
  }
}

void FramedLink::startTransport() {
  if (transport_.handshakeTimeout > std::chrono::milliseconds::zero()) {
    handshakeTimer_.expires_after(transport_.handshakeTimeout);
    auto self = shared_from_this();
    handshakeTimer_.async_wait([self](const boost::system::error_code& ec) {
      if (ec || self->closed_ || self->handshaken_) return;
      std::string reason = "handshake timed out after " +
                           std::to_string(self->transport_.handshakeTimeout.count()) + " ms";
      LOG_WARNING("closing " << self->transport_.noun << " from " << self->peerAddress_ << ": "
                             << reason);
      self->close(reason);
    });
  }
  if (tls_) return startTls();
  transportReady();
}

void FramedLink::startTls() {
  auto self = shared_from_this();
  auto side = transport_.tlsSide == TlsSide::kServer ? ssl::stream_base::server
                                                     : ssl::stream_base::client;
  tls_->async_handshake(side, [self](const boost::system::error_code& ec) {
    if (self->closed_) return;
    const std::string& required = self->transport_.requirePeerCertRole;
    std::string failure;
    if (ec) {
      failure = "TLS handshake: " + ec.message();
    } else if (Status st = readPeerCertificate(self->tls_->native_handle(), &self->peer_); !st) {
      failure = "TLS: " + st.error().describe();
    } else if (!required.empty() && self->peer_.certRole != required) {
      failure = "TLS: peer certificate of " + self->peer_.principal + " has role '" +
                self->peer_.certRole + "', expected '" + required + "'";
    }
    if (!failure.empty()) {
      LOG_WARNING("closing " << self->transport_.noun << " with " << self->peerAddress_ << ": "
                             << failure);
      self->close(failure);
      return;
    }
    self->transportReady();
  });
}

void FramedLink::transportReady() {
  transportReady_ = true;
  // Once, not per read: every plaintext read is a non-blocking read_some
  // after readiness, and FIONBIO is a syscall.
  if (!tls_) {
    boost::system::error_code ec;
    socket_.non_blocking(true, ec);
    if (ec) return close("cannot make the socket non-blocking: " + ec.message());
  }
  flush();
  readMore();
}

void FramedLink::handshakeDone() {
  handshaken_ = true;
  handshakeTimer_.cancel();
}

void FramedLink::closeForBadFrame(const Error& error) {
  LOG_WARNING("closing " << transport_.noun << " from " << peerAddress_ << ": "
                         << error.describe());
  close(error.describe());
}

Status FramedLink::closedError() const {
  return Error{std::string(transport_.noun) + " to " + peerAddress_ + " is closed"};
}

Status FramedLink::refused(const Status& st) const {
  LOG_ERROR("not sending to " << peerAddress_ << ": " << st.error().describe());
  return st;
}

Status FramedLink::queued() {
  if (queuedBytes() > transport_.maxQueuedBytes) {
    close("peer is not reading: " + std::to_string(queuedBytes()) + " bytes queued");
    return Error{"send queue to " + peerAddress_ + " overflowed"};
  }
  if (transport_.coalesceWrites && !tls_) flushLater();
  else flush();
  return okStatus();
}

// Once per turn: a write in flight flushes the rest when it completes.
void FramedLink::flushLater() {
  if (flushPosted_ || writeInFlight_ || !transportReady_) return;
  flushPosted_ = true;
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    self->flushPosted_ = false;
    self->flush();
  });
}

// What a coalescing link still holds back when it closes: one attempt, as
// the write flush() would have started at once. Plaintext sockets are
// non-blocking once ready.
void FramedLink::writeQueuedNow() {
  if (!flushPosted_ || writeInFlight_ || pending_.empty()) return;
  boost::system::error_code ignored;
  bytesOut_ += socket_.send(asio::buffer(pending_), 0, ignored);
  pending_.clear();
}

void FramedLink::flush() {
  if (writeInFlight_ || closed_ || !transportReady_ || pending_.empty()) return;
  writing_.swap(pending_);
  pending_.clear();
  writeInFlight_ = true;
  auto self = shared_from_this();
  auto done = [self](const boost::system::error_code& ec, size_t bytes) {
    self->writeInFlight_ = false;
    self->writing_.clear();
    self->bytesOut_ += bytes;
    if (ec) {
      self->close("write failed: " + ec.message());
      return;
    }
    self->flush();
    if (self->closeWhenFlushed_ && self->queuedBytes() == 0) self->close(self->closeReason_);
  };
  if (tls_) {
    asio::async_write(*tls_, asio::buffer(writing_), std::move(done));
  } else {
    asio::async_write(socket_, asio::buffer(writing_), std::move(done));
  }
}

void FramedLink::closeAfterFlush(const std::string& reason) {
  if (closed_) return;
  if (queuedBytes() == 0 && !writeInFlight_) return close(reason);
  closeWhenFlushed_ = true;
  closeReason_ = reason;
}

void FramedLink::close(const std::string& reason) {
  if (closed_) return;
  closed_ = true;
  handshakeTimer_.cancel();
  writeQueuedNow();
  // No TLS close_notify: SSL_shutdown waits for the peer's, which a silent
  // peer never sends. Frames are self-delimiting, so a truncated stream
  // between frames reads as a clean close on the other side.
  boost::system::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
  closed(reason);
}

void FramedLink::readMore() {
  if (closed_) return;
  auto self = shared_from_this();
  if (tls_) {
    if (tlsReadBuffer_.empty()) tlsReadBuffer_.resize(kTlsReadChunkBytes);
    tls_->async_read_some(asio::buffer(tlsReadBuffer_),
                          [self](const boost::system::error_code& ec, size_t bytes) {
                            self->onTlsRead(ec, bytes);
                          });
    return;
  }
  socket_.async_read_some(asio::buffer(readBuffer_),
                          [self](const boost::system::error_code& ec, size_t bytes) {
                            self->onRead(ec, bytes);
                          });
}

void FramedLink::onRead(const boost::system::error_code& ec, size_t bytes) {
  if (closed_) return;
  if (ec || bytes < readBuffer_.size()) return consume(readBuffer_.data(), bytes, ec);
  // Full: a burst. Its rest goes through the shared buffer, a chunk at a
  // time, not in small reads. An error here (end of stream, a reset) waits
  // for the next read, so the frames already read are handled first.
  bytesIn_ += bytes;
  decoder_.append(readBuffer_.data(), bytes);
  boost::system::error_code more;
  size_t extra = socket_.read_some(asio::buffer(sharedReadBuffer(), kReadChunkBytes), more);
  consume(sharedReadBuffer(), more ? 0 : extra, {});
}

void FramedLink::onTlsRead(const boost::system::error_code& ec, size_t bytes) {
  if (closed_) return;
  consume(tlsReadBuffer_.data(), bytes, ec);
}

void FramedLink::consume(const char* data, size_t bytes, const boost::system::error_code& ec) {
  if (ec) {
    std::string reason = describeReadError(ec);
    if (decoder_.midFrame()) {
      reason += " mid-frame (truncated frame of " + std::to_string(decoder_.bufferedBytes()) +
                " buffered bytes)";
      LOG_WARNING(transport_.noun << " from " << peerAddress_ << ": " << reason);
    }
    close(reason);
    return;
  }
  bytesIn_ += bytes;
  decoder_.append(data, bytes);
  handleSome();
}

void FramedLink::handleSome() {
  for (size_t handled = 0; !closed_; ++handled) {
    if (handled == transport_.framesPerPass) {
      // Let every other completion already due run before the next batch.
      asio::post(socket_.get_executor(), [self = shared_from_this()] {
        if (!self->closed_) self->handleSome();
      });
      return;
    }
    std::string_view payload;
    Result<bool> got = decoder_.nextPayload(&payload);
    if (!got) return closeForBadFrame(got.error());
    if (!*got) break;
    if (!handleFrame(payload)) return;
  }
  readMore();
}

}  // namespace allot
