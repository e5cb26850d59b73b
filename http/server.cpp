#include "http/server.h"

#include <optional>
#include <type_traits>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "base/encoding.h"
#include "base/log.h"
#include "proto/connection.h"

namespace allot::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

Response Response::text(unsigned status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  if (!r.body.empty() && r.body.back() != '\n') r.body += '\n';
  return r;
}

Response Response::json(std::string body) {
  Response r;
  r.contentType = "application/json";
  r.body = std::move(body);
  return r;
}

namespace {

// A form's query: '+' is a space, a stray '%' stays as it is.
std::string decode(std::string_view text) {
  return *percentDecode(text, {.plusIsSpace = true, .keepBadEscapes = true});
}

}  // namespace

std::map<std::string, std::string> parseQuery(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('&', start);
    if (end == std::string::npos) end = text.size();
    std::string_view part(text.data() + start, end - start);
    if (!part.empty()) {
      size_t eq = part.find('=');
      if (eq == std::string_view::npos) {
        out[decode(part)] = "";
      } else {
        out[decode(part.substr(0, eq))] = decode(part.substr(eq + 1));
      }
    }
    start = end + 1;
  }
  return out;
}

// One accepted connection: (TLS handshake,) read a request, answer it
// (whole or chunked), repeat while the client keeps the connection alive.
// The server holds sessions through this interface; StreamSession below is
// the one implementation, over a plain or a TLS stream.
class Session {
 public:
  virtual ~Session() = default;
  virtual void start() = 0;
  // The server goes away: forget it and close.
  virtual void detach() = 0;
};

namespace {

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

template <class Stream>
class StreamSession final : public Session,
                            public std::enable_shared_from_this<StreamSession<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  StreamSession(Server& server, asio::ip::tcp::socket socket, ssl::context* tls)
      : server_(&server), stream_(makeStream(std::move(socket), tls)) {
    boost::system::error_code ec;
    auto remote = tcp().socket().remote_endpoint(ec);
    if (!ec) peer_ = remote.address().to_string() + ":" + std::to_string(remote.port());
  }
  ~StreamSession() override {
    if (server_) server_->sessionEnded(this);
  }

  void start() override {
    if constexpr (kTls) {
      handshake();
    } else {
      readNext();
    }
  }
  void detach() override {
    server_ = nullptr;
    close();
  }

 private:
  static Stream makeStream(asio::ip::tcp::socket socket, ssl::context* tls) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *tls);
    } else {
      return Stream(std::move(socket));
    }
  }
  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream_); }
  void handshake();
  void readNext();
  void onRead(beast::error_code ec);
  void answer(Response response, bool keepAlive, unsigned version);
  void writeChunks();
  void pullNext();
  void writePiece(Piece piece, bool more);
  void finishWrite(beast::error_code ec);
  void fail(unsigned status, const std::string& why);
  // No TLS close_notify: SSL_shutdown waits for the peer's, which a silent
  // peer never sends; HTTP messages are self-delimiting.
  void close() {
    beast::error_code ignored;
    tcp().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    tcp().close();
  }

  Server* server_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::string peer_;
  PeerIdentity identity_;
  bool keepAlive_ = false;
  // The answer being written.
  std::shared_ptr<void> message_;
  std::function<bool(std::string*)> stream_fn_;
  std::function<void(PieceSink)> pull_fn_;
  Piece piece_;  // the piece being written
  std::string chunk_;
  std::unique_ptr<bhttp::response<bhttp::empty_body>> header_;
  std::unique_ptr<bhttp::response_serializer<bhttp::empty_body>> serializer_;
};

// The handshake counts against idleTimeout: a peer that connects and says
// nothing is closed like one that never sends a request.
template <class Stream>
void StreamSession<Stream>::handshake() {
  if constexpr (kTls) {
    tcp().expires_after(server_->options().idleTimeout);
    stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](
                                                          beast::error_code ec) {
      if (!self->server_) return;
      std::string failure;
      if (ec) {
        failure = "TLS handshake: " + ec.message();
      } else if (Status st = readPeerCertificate(self->stream_.native_handle(), &self->identity_);
                 !st) {
        failure = "TLS: " + st.error().describe();
      }
      if (!failure.empty()) {
        LOG_WARNING("http " << self->peer_ << ": closing: " << failure);
        return self->close();
      }
      self->readNext();
    });
  }
}

template <class Stream>
void StreamSession<Stream>::readNext() {
  if (!server_) return;
  const ServerOptions& o = server_->options();
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(o.maxHeaderBytes));
  parser_->body_limit(o.maxBodyBytes);
  tcp().expires_after(o.idleTimeout);
  bhttp::async_read(stream_, buffer_, *parser_,
                    [self = this->shared_from_this()](beast::error_code ec, size_t) {
                      self->onRead(ec);
                    });
}

template <class Stream>
void StreamSession<Stream>::onRead(beast::error_code ec) {
  if (!server_) return;
  if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout ||
      ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
      ec == ssl::error::stream_truncated || ec == asio::error::eof) {
    return close();
  }
  if (ec == bhttp::error::header_limit) return fail(431, "request header too large");
  if (ec == bhttp::error::body_limit) return fail(413, "request body too large");
  if (ec) return fail(400, "bad request: " + ec.message());
  auto& req = parser_->get();
  Request request;
  request.method = std::string(req.method_string());
  std::string target(req.target());
  size_t q = target.find('?');
  request.path = target.substr(0, q);
  if (q != std::string::npos) request.query = parseQuery(target.substr(q + 1));
  request.body = std::move(req.body());
  request.peer = peer_;
  request.tls = identity_.tls;
  request.principal = identity_.principal;
  request.certRole = identity_.certRole;
  server_->dispatch(request, [self = this->shared_from_this(), keepAlive = req.keep_alive(),
                              version = req.version()](Response response) {
    if (self->server_) self->answer(std::move(response), keepAlive, version);
  });
}

template <class Stream>
void StreamSession<Stream>::fail(unsigned status, const std::string& why) {
  LOG_DEBUG("http " << peer_ << ": " << why);
  answer(Response::text(status, why), false, 11);
}

template <class Stream>
void StreamSession<Stream>::answer(Response response, bool keepAlive, unsigned version) {
  keepAlive_ = keepAlive;
  tcp().expires_after(server_->options().writeTimeout);
  auto self = this->shared_from_this();
  if (!response.stream && !response.pull) {
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(response.status), version);
    res->set(bhttp::field::server, "allot");
    res->set(bhttp::field::content_type, response.contentType);
    res->set(bhttp::field::cache_control, "no-store");
    for (const auto& [name, value] : response.headers) res->set(name, value);
    res->keep_alive(keepAlive);
    res->body() = std::move(response.body);
    res->prepare_payload();
    message_ = res;
    bhttp::async_write(stream_, *res, [self](beast::error_code ec, size_t) { self->finishWrite(ec); });
    return;
  }
  header_ = std::make_unique<bhttp::response<bhttp::empty_body>>(
      static_cast<bhttp::status>(response.status), version);
  header_->set(bhttp::field::server, "allot");
  header_->set(bhttp::field::content_type, response.contentType);
  header_->set(bhttp::field::cache_control, "no-store");
  for (const auto& [name, value] : response.headers) header_->set(name, value);
  header_->keep_alive(keepAlive);
  header_->chunked(true);
  serializer_ = std::make_unique<bhttp::response_serializer<bhttp::empty_body>>(*header_);
  stream_fn_ = std::move(response.stream);
  pull_fn_ = std::move(response.pull);
  bhttp::async_write_header(stream_, *serializer_, [self](beast::error_code ec, size_t) {
    if (ec) return self->close();
    if (self->stream_fn_) return self->writeChunks();
    self->pullNext();
  });
}

// A pulled body: ask for the next piece; the producer may answer later
// (the session stays alive through the sink it holds).
template <class Stream>
void StreamSession<Stream>::pullNext() {
  if (!server_ || !pull_fn_) return;
  pull_fn_([self = this->shared_from_this()](Piece piece, bool more) {
    self->writePiece(std::move(piece), more);
  });
}

template <class Stream>
void StreamSession<Stream>::writePiece(Piece piece, bool more) {
  if (!server_) return;
  tcp().expires_after(server_->options().writeTimeout);
  auto self = this->shared_from_this();
  if (!piece || piece->empty()) {
    if (more) return pullNext();
    asio::async_write(stream_, bhttp::make_chunk_last(),
                      [self](beast::error_code ec, size_t) { self->finishWrite(ec); });
    return;
  }
  piece_ = std::move(piece);
  asio::async_write(stream_, bhttp::make_chunk(asio::buffer(*piece_)),
                    [self, more](beast::error_code ec, size_t) {
                      self->piece_.reset();
                      if (ec) return self->close();
                      self->writePiece(nullptr, more);
                    });
}

// One chunk per write: other handlers on the loop run between two chunks.
template <class Stream>
void StreamSession<Stream>::writeChunks() {
  if (!server_) return;
  chunk_.clear();
  bool more = true;
  while (chunk_.empty() && more) more = stream_fn_(&chunk_);
  tcp().expires_after(server_->options().writeTimeout);
  auto self = this->shared_from_this();
  if (chunk_.empty()) {
    asio::async_write(stream_, bhttp::make_chunk_last(),
                      [self](beast::error_code ec, size_t) { self->finishWrite(ec); });
    return;
  }
  asio::async_write(stream_, bhttp::make_chunk(asio::buffer(chunk_)),
                    [self, more](beast::error_code ec, size_t) {
                      if (ec) return self->close();
                      if (more) return self->writeChunks();
                      asio::async_write(self->stream_, bhttp::make_chunk_last(),
                                        [self](beast::error_code e, size_t) { self->finishWrite(e); });
                    });
}

template <class Stream>
void StreamSession<Stream>::finishWrite(beast::error_code ec) {
  message_.reset();
  stream_fn_ = nullptr;
  pull_fn_ = nullptr;
  piece_.reset();
  serializer_.reset();
  header_.reset();
  chunk_.clear();
  chunk_.shrink_to_fit();
  if (ec || !keepAlive_) return close();
  readNext();
}

}  // namespace

Result<ServerOptions> serverOptionsFromFlags(const std::string& httpListen, const TlsFiles& tls, bool insecure) {
  auto where = parseHostPort(httpListen);
  if (!where) return Error{"--http-listen: " + where.error().describe()};
  auto context = tlsContextFromFlags(tls, TlsSide::kServer);
  if (!context) return context.error();
  if (auto st = checkPlaintextOnLoopback("--http-listen", where->host, *context != nullptr, insecure,
                                         "the HTTP endpoints plaintext");
      !st) {
    return st.error();
  }
  ServerOptions options;
  options.listen = *where;
  options.tls = *context;
  return options;
}

Result<std::unique_ptr<Server>> Server::create(asio::io_context& io, ServerOptions options) {
  std::unique_ptr<Server> server(new Server(io, options));
  if (Status st = listenTcp(server->acceptor_, options.listen, "--http-listen", " (http)"); !st) {
    return st.error();
  }
  server->port_ = server->acceptor_.local_endpoint().port();
  return server;
}

Server::Server(asio::io_context& io, ServerOptions options)
    : io_(io), options_(std::move(options)), acceptor_(io), acceptPause_(io) {}

Server::~Server() { stop(); }

void Server::route(std::string method, std::string path, Handler handler) {
  routeAsync(std::move(method), std::move(path),
             [handler = std::move(handler)](const Request& request, Reply reply) {
               reply(handler(request));
             });
}

void Server::routeAsync(std::string method, std::string path, AsyncHandler handler) {
  routes_[{std::move(method), std::move(path)}] = std::move(handler);
}

void Server::dispatch(const Request& request, Reply reply) const {
  auto exact = routes_.find({request.method, request.path});
  if (exact != routes_.end()) return exact->second(request, std::move(reply));
  for (const auto& [key, handler] : routes_) {
    if (key.second == request.path) {
      return reply(Response::text(405, "method " + request.method + " not allowed on " + request.path));
    }
  }
  reply(Response::text(404, "no such path: " + request.path));
}

void Server::start() {
  LOG_INFO("http listening on " << options_.listen.host << ":" << port_
                                 << (options_.tls ? " (mutual TLS)" : ""));
  acceptNext();
}

void Server::stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  acceptPause_.cancel();
  auto sessions = std::move(sessions_);
  sessions_.clear();
  for (auto& [raw, weak] : sessions) {
    if (auto s = weak.lock()) s->detach();
  }
}

void Server::acceptNext() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, asio::ip::tcp::socket socket) {
    if (stopped_) return;
    if (!ec) {
      if (sessions_.size() >= options_.maxConnections) {
        LOG_WARNING("http: refusing a connection: " << options_.maxConnections
                                                    << " already open (limit)");
      } else {
        std::shared_ptr<Session> session;
        if (options_.tls) {
          session = std::make_shared<StreamSession<TlsStream>>(*this, std::move(socket),
                                                               options_.tls.get());
        } else {
          session = std::make_shared<StreamSession<PlainStream>>(*this, std::move(socket), nullptr);
        }
        sessions_[session.get()] = session;
        session->start();
      }
      return acceptNext();
    }
    if (ec == asio::error::operation_aborted) return;
    LOG_WARNING("http accept failed: " << ec.message() << "; retrying in 100 ms");
    acceptPause_.expires_after(std::chrono::milliseconds(100));
    acceptPause_.async_wait([this](const boost::system::error_code& e) {
      if (!e && !stopped_) acceptNext();
    });
  });
}

}  // namespace allot::http
