#include "proto/connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "base/log.h"

namespace allot {

namespace {
// TLS reads go through OpenSSL's record buffer, so a TLS link reads into a
// buffer of its own (one record's worth).
constexpr size_t kTlsReadChunkBytes = 16 * 1024;

// One read buffer for every connection of the thread: connections wait for
// readability and then drain the socket into it, so an idle connection costs
// no buffer (50,000 agents would otherwise pin 3 GiB of read buffers).
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

wire::Envelope helloEnvelope(wire::Role role, const std::string& name, uint64_t leaderEpoch) {
  wire::Envelope envelope;
  wire::Hello* hello = envelope.mutable_hello();
  hello->set_protocol_version(kProtocolVersion);
  hello->set_role(role);
  hello->set_name(name);
  hello->set_leader_epoch(leaderEpoch);
  return envelope;
}

std::shared_ptr<Connection> Connection::create(StreamSocket socket, Options options) {
  return std::shared_ptr<Connection>(new Connection(std::move(socket), std::move(options)));
}

std::shared_ptr<Connection> Connection::create(asio::ip::tcp::socket socket, Options options) {
  boost::system::error_code ignored;
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  return create(StreamSocket(std::move(socket)), std::move(options));
}

Connection::Connection(StreamSocket socket, Options options)
    : socket_(std::move(socket)),
      options_(std::move(options)),
      handshakeTimer_(socket_.get_executor()),
      decoder_(options_.maxFrameBytes) {
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
  if (options_.tls) tls_ = std::make_unique<ssl::stream<StreamSocket&>>(socket_, *options_.tls);
  // Our Hello is always the first frame on the wire (after the TLS handshake).
  Status st = appendFrame(
      helloEnvelope(options_.localRole, options_.localName, options_.leaderEpoch), &pending_);
  CHECK(st.ok());
}

void Connection::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  if (options_.handshakeTimeout > std::chrono::milliseconds::zero()) {
    handshakeTimer_.expires_after(options_.handshakeTimeout);
    auto self = shared_from_this();
    handshakeTimer_.async_wait([self](const boost::system::error_code& ec) {
      if (ec || self->closed_ || self->handshaken_) return;
      std::string reason = "handshake timed out after " +
                           std::to_string(self->options_.handshakeTimeout.count()) + " ms";
      LOG_WARNING("closing connection from " << self->peerAddress_ << ": " << reason);
      self->close(reason);
    });
  }
  if (tls_) return startTls();
  transportReady();
}

void Connection::startTls() {
  auto self = shared_from_this();
  auto side = options_.tlsSide == TlsSide::kServer ? ssl::stream_base::server
                                                   : ssl::stream_base::client;
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
      LOG_WARNING("closing connection with " << self->peerAddress_ << ": " << failure);
      self->close(failure);
      return;
    }
    self->transportReady();
  });
}

void Connection::transportReady() {
  transportReady_ = true;
  flush();
  readMore();
}

Status Connection::send(const wire::Envelope& envelope) {
  if (closed_) return Error{"connection to " + peerAddress_ + " is closed"};
  if (Status st = appendFrame(envelope, &pending_, options_.maxFrameBytes); !st) {
    LOG_ERROR("not sending to " << peerAddress_ << ": " << st.error().describe());
    return st;
  }
  if (queuedBytes() > options_.maxQueuedBytes) {
    close("peer is not reading: " + std::to_string(queuedBytes()) + " bytes queued");
    return Error{"send queue to " + peerAddress_ + " overflowed"};
  }
  flush();
  return okStatus();
}

void Connection::flush() {
  if (writeInFlight_ || closed_ || !transportReady_ || pending_.empty()) return;
  writing_.swap(pending_);
  pending_.clear();
  writeInFlight_ = true;
  auto self = shared_from_this();
  auto done = [self](const boost::system::error_code& ec, size_t) {
    self->writeInFlight_ = false;
    self->writing_.clear();
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

void Connection::closeAfterFlush(const std::string& reason) {
  if (closed_) return;
  if (queuedBytes() == 0 && !writeInFlight_) return close(reason);
  closeWhenFlushed_ = true;
  closeReason_ = reason;
}

void Connection::close(const std::string& reason) {
  if (closed_) return;
  closed_ = true;
  handshakeTimer_.cancel();
  // No TLS close_notify: SSL_shutdown waits for the peer's, which a silent
  // peer never sends. Frames are self-delimiting, so a truncated stream
  // between frames reads as a clean close on the other side.
  boost::system::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
  auto onClose = std::move(handlers_.onClose);
  handlers_ = Handlers{};
  if (onClose) onClose(reason);
}

void Connection::readMore() {
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
  socket_.async_wait(asio::socket_base::wait_read,
                     [self](const boost::system::error_code& ec) { self->onReadable(ec); });
}

void Connection::onReadable(const boost::system::error_code& waitError) {
  if (closed_) return;
  boost::system::error_code ec = waitError;
  size_t bytes = 0;
  if (!ec) {
    socket_.non_blocking(true, ec);
    if (!ec) bytes = socket_.read_some(asio::buffer(sharedReadBuffer(), kReadChunkBytes), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) return readMore();
  }
  consume(sharedReadBuffer(), bytes, ec);
}

void Connection::onTlsRead(const boost::system::error_code& ec, size_t bytes) {
  if (closed_) return;
  consume(tlsReadBuffer_.data(), bytes, ec);
}

void Connection::consume(const char* data, size_t bytes, const boost::system::error_code& ec) {
  if (ec) {
    std::string reason = describeReadError(ec);
    if (decoder_.midFrame()) {
      reason += " mid-frame (truncated frame of " + std::to_string(decoder_.bufferedBytes()) +
                " buffered bytes)";
      LOG_WARNING("connection from " << peerAddress_ << ": " << reason);
    }
    close(reason);
    return;
  }
  decoder_.append(data, bytes);
  handleSome();
}

void Connection::handleSome() {
  for (size_t handled = 0; !closed_; ++handled) {
    if (handled == kMaxFramesPerPass) {
      // Let every other completion already due run before the next batch.
      asio::post(socket_.get_executor(), [self = shared_from_this()] {
        if (!self->closed_) self->handleSome();
      });
      return;
    }
    Result<bool> got = decoder_.next(&scratch_);
    if (!got) {
      LOG_WARNING("closing connection from " << peerAddress_ << ": " << got.error().describe());
      close(got.error().describe());
      return;
    }
    if (!*got) break;
    if (!handleEnvelope(scratch_)) return;
  }
  readMore();
}

bool Connection::handleEnvelope(wire::Envelope& envelope) {
  if (!handshaken_) {
    if (envelope.body_case() != wire::Envelope::kHello) {
      LOG_WARNING("closing connection from " << peerAddress_ << ": first frame is not a Hello");
      close("first frame is not a Hello");
      return false;
    }
    return acceptHello(envelope.hello());
  }
  if (envelope.body_case() == wire::Envelope::kHelloRejected) {
    std::string reason = "peer rejected us: " + envelope.hello_rejected().reason();
    LOG_ERROR(reason);
    close(reason);
    return false;
  }
  if (handlers_.onMessage) handlers_.onMessage(envelope);
  return !closed_;
}

std::string Connection::helloCertRole(wire::Role role) const {
  return options_.peerHelloCertRole.empty() ? certRoleFor(role) : options_.peerHelloCertRole;
}

bool Connection::acceptHello(const wire::Hello& hello) {
  std::string refusal;
  if (hello.protocol_version() != kProtocolVersion) {
    refusal = "protocol version " + std::to_string(hello.protocol_version()) +
              " is not supported (this side speaks " + std::to_string(kProtocolVersion) + ")";
  } else if (!options_.acceptRoles.empty() &&
             std::find(options_.acceptRoles.begin(), options_.acceptRoles.end(), hello.role()) ==
                 options_.acceptRoles.end()) {
    refusal = "role " + wire::Role_Name(hello.role()) + " is not accepted on this port";
  } else if (peer_.tls && helloCertRole(hello.role()) != peer_.certRole) {
    refusal = "Hello role " + wire::Role_Name(hello.role()) + " does not match certificate role '" +
              peer_.certRole + "' of principal " + peer_.principal;
  }
  if (!refusal.empty()) {
    reject(refusal, hello.name());
    return false;
  }
  handshaken_ = true;
  handshakeTimer_.cancel();
  peerHello_ = hello;
  if (handlers_.onHello) handlers_.onHello(peerHello_);
  return !closed_;
}

// The rejection goes through the write queue (a TLS stream has one writer
// at a time); nothing more is read, and the handshake timer still bounds a
// peer that never lets the write finish.
void Connection::reject(const std::string& refusal, const std::string& name) {
  LOG_WARNING("rejecting " << peerAddress_ << " (" << name << "): " << refusal);
  wire::Envelope rejected;
  rejected.mutable_hello_rejected()->set_reason(refusal);
  if (!send(rejected)) return;
  closeAfterFlush("handshake refused: " + refusal);
}

void asyncConnect(asio::io_context& io, const std::string& host, uint16_t port,
                  std::function<void(Result<asio::ip::tcp::socket>)> done) {
  auto socket = std::make_shared<asio::ip::tcp::socket>(io);
  auto finish = std::make_shared<std::function<void(Result<asio::ip::tcp::socket>)>>(std::move(done));
  std::string where = host + ":" + std::to_string(port);
  // The connect's completion, on either path below.
  auto connected = [socket, where, finish](const boost::system::error_code& ec) {
    if (ec) {
      (*finish)(Error{"cannot connect to " + where + ": " + ec.message()});
      return;
    }
    boost::system::error_code ignored;
    socket->set_option(asio::ip::tcp::no_delay(true), ignored);
    (*finish)(std::move(*socket));
  };
  boost::system::error_code notNumeric;
  auto address = asio::ip::make_address(host, notNumeric);
  if (!notNumeric) {
    // A numeric address (what ZooKeeper names leaders by) needs no
    // getaddrinfo: Asio's resolver runs it on one background thread per
    // io_context, so every attempt would cost a thread hop, and a process
    // with many links queues each attempt behind every other's lookup.
    socket->async_connect(asio::ip::tcp::endpoint(address, port), std::move(connected));
    return;
  }
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(io);
  resolver->async_resolve(
      host, std::to_string(port),
      [resolver, socket, where, finish, connected = std::move(connected)](
          const boost::system::error_code& ec, asio::ip::tcp::resolver::results_type results) {
        if (ec) {
          (*finish)(Error{"cannot resolve " + where + ": " + ec.message()});
          return;
        }
        asio::async_connect(*socket, results,
                            [connected](const boost::system::error_code& ec2,
                                        const asio::ip::tcp::endpoint&) { connected(ec2); });
      });
}

Status listenTcp(asio::ip::tcp::acceptor& acceptor, const HostPort& where, std::string_view flag,
                 std::string_view what) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(where.host, ec);
  if (ec) return Error{std::string(flag) + ": '" + where.host + "' is not an IP address"};
  asio::ip::tcp::endpoint endpoint(address, where.port);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Error{"cannot listen" + std::string(what) + " on " + where.host + ":" +
                     std::to_string(where.port) + ": " + ec.message(),
                 ec.value()};
  }
  return okStatus();
}

}  // namespace allot
