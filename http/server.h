// http::Server: a small HTTP/1.1 server (Boost.Beast) on a daemon's own
// io_context, for the operator endpoints (/health, /state, /metrics, the web
// UI and allotctl's POSTs). Handlers run on the loop thread, so they may read
// daemon state directly; they must return quickly. A large answer streams:
// the handler returns a Response whose `stream` produces the body in chunks,
// one chunk per loop turn, so a 10,000-agent /state never holds the loop for
// the whole serialization.
//
//   auto server = http::Server::create(io, options);      // binds
//   (*server)->route("GET", "/health", [](const http::Request&) { ... });
//   (*server)->start();                                     // accepts
//   ...; (*server)->stop();                                 // closes everything
//
// Limits (named, checked where input enters): maxConnections open at once
// (further connections are closed at accept), maxHeaderBytes and
// maxBodyBytes per request (431/413 then close), idleTimeout for a request
// to arrive and writeTimeout for each write (then close).
//
// TLS: with ServerOptions::tls set, every connection first completes a
// mutual TLS 1.3 handshake (the context comes from makeTlsContext(...,
// TlsSide::kServer), which requires a client certificate from the cluster's
// CA) within idleTimeout; a peer without one is closed before any request is
// read. Each Request then names its peer's principal (certificate CN) and
// role (OU), so handlers authorize by identity.
//
// A body many clients share (one rendering of a large document, master
// /state) is a Response::pull: pieces held by shared pointers, written as
// chunks without copying, delivered whenever the producer has them.
//
// Thread: everything on the given io_context, which one thread runs.
// Routes are added before start().
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/asio.h"
#include "base/clock.h"
#include "base/flags.h"
#include "base/result.h"
#include "proto/tls.h"

namespace allot::http {

struct Request {
  std::string method;   // "GET", "POST"
  std::string path;     // target without the query
  std::map<std::string, std::string> query;  // decoded; last value wins
  std::string body;
  std::string peer;     // "address:port"
  // TLS: the client certificate's subject CN and OU (proto/tls.h); both
  // empty on a plaintext server.
  bool tls = false;
  std::string principal;
  std::string certRole;
};

// A piece of a pulled body (Response::pull); never null when delivered
// with more == true.
using Piece = std::shared_ptr<const std::string>;
// Called on the loop with the next piece (null or empty: none) and whether
// more follow.
using PieceSink = std::function<void(Piece piece, bool more)>;

struct Response {
  unsigned status = 200;
  std::string contentType = "text/plain; charset=utf-8";
  std::string body;
  // Extra header fields ("Retry-After", "1").
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, `body` is ignored and the answer is sent chunked: each call
  // appends the next piece to *chunk and returns false once nothing is left
  // (it may append a last piece in that call). Called on the loop thread,
  // one call per write.
  std::function<bool(std::string* chunk)> stream;
  // When set (and `stream` is not), the answer is sent chunked from pieces
  // that may not exist yet: each call asks for the next piece, which the
  // producer hands to the sink on the loop, at once or later, exactly once
  // per call. The server calls again only after the previous piece was
  // written. Dropping the Response (client gone) drops the sink unused.
  std::function<void(PieceSink sink)> pull;

  static Response text(unsigned status, std::string body);
  static Response json(std::string body);
};

using Handler = std::function<Response(const Request&)>;
// A handler that answers later (after a write to ZooKeeper or a disk): it
// calls `reply` exactly once, on the loop thread, possibly after returning.
// A reply after the connection or the server is gone is dropped. No read
// timeout runs meanwhile: the handler must reply within its own bound.
using Reply = std::function<void(Response)>;
using AsyncHandler = std::function<void(const Request&, Reply reply)>;

class Session;

struct ServerOptions {
  HostPort listen{"127.0.0.1", 0};
  size_t maxConnections = 64;
  size_t maxHeaderBytes = 8 * 1024;
  size_t maxBodyBytes = 64 * 1024;
  Duration idleTimeout = std::chrono::seconds(30);
  Duration writeTimeout = std::chrono::seconds(30);
  // Null: plaintext. Otherwise mutual TLS with this server context.
  std::shared_ptr<ssl::context> tls;
};

// --http-listen with the --tls-* files as the daemons take them: mutual TLS
// with the same files as the protocol port; plaintext only on loopback
// unless `insecure`.
Result<ServerOptions> serverOptionsFromFlags(const std::string& httpListen, const TlsFiles& tls, bool insecure);

class Server {
 public:
  static Result<std::unique_ptr<Server>> create(asio::io_context& io, ServerOptions options);
  ~Server();

  // Exact path match; a known path with another method answers 405, an
  // unknown one 404.
  void route(std::string method, std::string path, Handler handler);
  void routeAsync(std::string method, std::string path, AsyncHandler handler);

  void start();
  void stop();
  uint16_t port() const { return port_; }
  size_t connectionCount() const { return sessions_.size(); }

  // Internal to server.cpp (sessions call back).
  void dispatch(const Request& request, Reply reply) const;
  const ServerOptions& options() const { return options_; }
  void sessionEnded(const Session* session) { sessions_.erase(session); }

 private:
  Server(asio::io_context& io, ServerOptions options);
  void acceptNext();

  asio::io_context& io_;
  ServerOptions options_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer acceptPause_;
  std::map<std::pair<std::string, std::string>, AsyncHandler> routes_;
  // Open sessions, so stop() can close them; each holds its own lifetime.
  std::unordered_map<const Session*, std::weak_ptr<Session>> sessions_;
  uint16_t port_ = 0;
  bool stopped_ = false;
};

// Splits "a=1&b=x%20y" into a map, decoding %XX and '+'. Malformed escapes
// are kept verbatim.
std::map<std::string, std::string> parseQuery(const std::string& text);

}  // namespace allot::http
