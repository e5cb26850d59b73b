// http::fetch: a blocking HTTP/1.1 request for tools and tests (allotctl,
// the integration tests). It runs its own io_context; never call it from a
// daemon's loop.
#pragma once

#include <chrono>
#include <string>

#include "base/flags.h"
#include "base/result.h"
#include "proto/tls.h"

namespace allot::http {

struct ClientResponse {
  unsigned status = 0;
  std::string contentType;
  std::string retryAfter;  // the Retry-After field (503), empty without one
  std::string body;
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

// Percent-encodes a query value.
std::string encodeQueryValue(const std::string& value);

}  // namespace allot::http
