#include "proto/connection.h"

#include <algorithm>

#include "base/log.h"

namespace allot {

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
  return create(streamSocket(std::move(socket)), std::move(options));
}

Connection::Connection(StreamSocket socket, Options options)
    : FramedLink(std::move(socket), transportOf(options, kMaxFramesPerPass, "connection")), options_(std::move(options)) {
  // Our Hello is always the first frame on the wire (after the TLS handshake).
  queueFirst([this](std::string* out) {
    return appendFrame(helloEnvelope(options_.localRole, options_.localName, options_.leaderEpoch),
                       out);
  });
}

void Connection::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  startTransport();
}

Status Connection::send(const wire::Envelope& envelope) {
  return sendFrame([&](std::string* out) {
    return appendFrame(envelope, out, options_.maxFrameBytes);
  });
}

Status Connection::sendSerialized(std::string_view envelope) {
  return sendFrame([&](std::string* out) -> Status {
    if (envelope.size() > options_.maxFrameBytes) {
      return Error{"message of " + std::to_string(envelope.size()) + " bytes exceeds the frame limit of " +
                   std::to_string(options_.maxFrameBytes)};
    }
    char header[kFrameHeaderBytes];
    for (size_t i = 0; i < kFrameHeaderBytes; ++i) header[i] = static_cast<char>(envelope.size() >> (24 - 8 * i));
    out->append(header, kFrameHeaderBytes).append(envelope);
    return okStatus();
  });
}

void Connection::closed(const std::string& reason) { fireOnClose(&handlers_, reason); }

bool Connection::handleFrame(std::string_view payload) {
  if (!decode(payload, &scratch_, "frame")) return false;
  frame_ = payload;
  bool more = handleEnvelope(scratch_);
  frame_ = {};
  return more;
}

bool Connection::handleEnvelope(wire::Envelope& envelope) {
  if (!handshaken()) {
    if (envelope.body_case() != wire::Envelope::kHello) {
      LOG_WARNING("closing connection from " << peerAddress() << ": first frame is not a Hello");
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
  return open();
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
  } else if (peer().tls && helloCertRole(hello.role()) != peer().certRole) {
    refusal = "Hello role " + wire::Role_Name(hello.role()) + " does not match certificate role '" +
              peer().certRole + "' of principal " + peer().principal;
  }
  if (!refusal.empty()) {
    reject(refusal, hello.name());
    return false;
  }
  handshakeDone();
  peerHello_ = hello;
  if (handlers_.onHello) handlers_.onHello(peerHello_);
  return open();
}

// The rejection goes through the write queue (a TLS stream has one writer
// at a time); nothing more is read, and the handshake timer still bounds a
// peer that never lets the write finish.
void Connection::reject(const std::string& refusal, const std::string& name) {
  LOG_WARNING("rejecting " << peerAddress() << " (" << name << "): " << refusal);
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
