#include "http/client.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <optional>

#include "base/asio.h"
#include "base/encoding.h"

namespace allot::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

// Writes the request and reads the answer on a connected (and, for TLS,
// handshaken) stream; `result` gets the first error or success.
template <class Stream>
void exchange(Stream& stream, bhttp::request<bhttp::string_body>& req, beast::flat_buffer& buffer,
              bhttp::response_parser<bhttp::string_body>& parser, beast::error_code& result) {
  bhttp::async_write(stream, req, [&](beast::error_code we, size_t) {
    if (we) {
      result = we;
      return;
    }
    bhttp::async_read(stream, buffer, parser, [&](beast::error_code re, size_t) { result = re; });
  });
}

bhttp::request<bhttp::string_body> makeRequest(const HostPort& server, const std::string& method,
                                               const std::string& target, const std::string& body) {
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
  req.set(bhttp::field::host, server.host);
  req.set(bhttp::field::user_agent, "allot");
  req.body() = body;
  req.prepare_payload();
  return req;
}

// The exchange's outcome: the response, or what failed (a TLS refusal of
// the server's certificate, the timeout, the transport's error).
Result<ClientResponse> outcome(const std::string& where, const std::string& refusal,
                               const beast::error_code& result,
                               bhttp::response_parser<bhttp::string_body>& parser) {
  if (!refusal.empty()) return Error{where + ": " + refusal};
  if (result == beast::error::timeout) return Error{where + ": no answer within the timeout"};
  if (result.category() == asio::error::get_ssl_category()) {
    return Error{where + ": TLS: " + result.message()};
  }
  if (result) return Error{where + ": " + result.message()};
  ClientResponse out;
  auto& res = parser.get();
  out.status = res.result_int();
  out.contentType = std::string(res[bhttp::field::content_type]);
  out.retryAfter = std::string(res[bhttp::field::retry_after]);
  out.body = std::move(res.body());
  for (const auto& field : res) out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  return out;
}

}  // namespace

std::string ClientResponse::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (beast::iequals(key, beast::string_view(name.data(), name.size()))) return value;
  }
  return "";
}

namespace {

// A streamed body's pieces to the caller's sink; stops the read when the
// sink says so.
struct ChunkForwarder {
  const ChunkSink* sink;
  bool stopped = false;
  size_t operator()(std::uint64_t, beast::string_view piece, beast::error_code& ec) {
    if (!(*sink)(std::string_view(piece.data(), piece.size()))) {
      stopped = true;
      ec = asio::error::operation_aborted;
    }
    return piece.size();
  }
};

// Why the server's certificate is refused after the handshake; "" when it
// is not.
std::string refusalOf(SSL* ssl, const ClientTls& tls) {
  PeerIdentity peer;
  if (Status st = readPeerCertificate(ssl, &peer); !st) return "TLS: " + st.error().describe();
  if (!tls.serverRole.empty() && peer.certRole != tls.serverRole) {
    return "TLS: the server's certificate (" + peer.principal + ") has role '" + peer.certRole +
           "', expected '" + tls.serverRole + "'";
  }
  return "";
}

Result<ClientResponse> exchangeWith(const HostPort& server, const std::string& method,
                                    const std::string& target, const std::string& body,
                                    std::chrono::milliseconds timeout, const ClientTls& tls,
                                    const ChunkSink* onChunk) {
  std::string where = server.host + ":" + std::to_string(server.port);
  asio::io_context io;
  beast::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(server.host, std::to_string(server.port), ec);
  if (ec) return Error{"cannot resolve " + server.host + ": " + ec.message()};

  auto req = makeRequest(server, method, target, body);
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(kMaxClientBodyBytes);
  // Beast keeps a reference to the callback: it lives until the end.
  ChunkForwarder forward{onChunk};
  if (onChunk) {
    parser.body_limit(boost::none);  // the pieces never pile up in the body
    parser.on_chunk_body(forward);
  }
  beast::flat_buffer buffer;

  beast::error_code result = asio::error::timed_out;
  std::string refusal;
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::tcp_stream* lowest = nullptr;
  if (tls.context) {
    secure.emplace(io, *tls.context);
    lowest = &beast::get_lowest_layer(*secure);
  } else {
    plain.emplace(io);
    lowest = &*plain;
  }
  lowest->expires_after(timeout);
  lowest->async_connect(endpoints, [&](beast::error_code e, const auto&) {
    if (e) {
      result = e;
      return;
    }
    if (!secure) return exchange(*plain, req, buffer, parser, result);
    secure->async_handshake(ssl::stream_base::client, [&](beast::error_code he) {
      if (he) {
        result = he;
        return;
      }
      refusal = refusalOf(secure->native_handle(), tls);
      if (refusal.empty()) exchange(*secure, req, buffer, parser, result);
    });
  });
  io.run();
  if (forward.stopped) result = {};
  return outcome(where, refusal, result, parser);
}

}  // namespace

Result<ClientResponse> fetch(const HostPort& server, const std::string& method,
                             const std::string& target, const std::string& body,
                             std::chrono::milliseconds timeout, const ClientTls& tls) {
  return exchangeWith(server, method, target, body, timeout, tls, nullptr);
}

Result<ClientResponse> fetchStreamed(const HostPort& server, const std::string& target,
                                     std::chrono::milliseconds timeout, const ClientTls& tls,
                                     const ChunkSink& onChunk) {
  return exchangeWith(server, "GET", target, "", timeout, tls, &onChunk);
}

std::string encodeQueryValue(const std::string& value) { return percentEncode(value, uriUnreserved); }

}  // namespace allot::http
