// http::fetch: a blocking HTTP/1.1 request for tools and tests (allotctl,
// the integration tests). It runs its own io_context; never call it from a
// daemon's loop.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/flags.h"
#include "base/result.h"
#include "proto/tls.h"

namespace allot::http {

struct ClientResponse {
  unsigned status = 0;
  std::string contentType;
  std::string retryAfter;  // the Retry-After field (503), empty without one
  std::string body;
  // Every header field as sent (name as the server spelled it).
  std::vector<std::pair<std::string, std::string>> headers;
  // The first field of that name (case-insensitive), empty without one.
  std::string header(std::string_view name) const;
};

// HTTPS with a client certificate (a server started with
// ServerOptions::tls). The server's certificate must chain to the context's
// CA and, when serverRole is set, carry that role (OU), e.g. "master".
struct ClientTls {
  std::shared_ptr<ssl::context> context;  // makeTlsContext(..., kClient); null: plaintext
  std::string serverRole;
};

// Limits: the answer's body may be up to kMaxClientBodyBytes; the whole
// exchange (connect, TLS handshake, write, read) must finish within `timeout`.
constexpr size_t kMaxClientBodyBytes = 512u * 1024 * 1024;

Result<ClientResponse> fetch(const HostPort& server, const std::string& method,
                             const std::string& target, const std::string& body = "",
                             std::chrono::milliseconds timeout = std::chrono::seconds(10),
                             const ClientTls& tls = {});

// As fetch (a GET), but a chunked body goes to `onChunk` piece by piece as
// it arrives, never into ClientResponse::body (which keeps a body that is
// not chunked, an error's). onChunk returning false stops the reading: the
// answer is then what came so far. `timeout` bounds the whole exchange.
using ChunkSink = std::function<bool(std::string_view chunk)>;
Result<ClientResponse> fetchStreamed(const HostPort& server, const std::string& target,
                                     std::chrono::milliseconds timeout, const ClientTls& tls,
                                     const ChunkSink& onChunk);

// Percent-encodes a query value.
std::string encodeQueryValue(const std::string& value);

}  // namespace allot::http
