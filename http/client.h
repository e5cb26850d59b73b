// http::fetch: a blocking HTTP/1.1 request for tools and tests (allotctl,
// the integration tests). It runs its own io_context; never call it from a
// daemon's loop.
#pragma once

#include <chrono>
#include <string>

#include "base/flags.h"
#include "base/result.h"

namespace allot::http {

struct ClientResponse {
  unsigned status = 0;
  std::string contentType;
  std::string body;
};

// Limits: the answer's body may be up to kMaxClientBodyBytes; the whole
// exchange (connect, write, read) must finish within `timeout`.
constexpr size_t kMaxClientBodyBytes = 512u * 1024 * 1024;

Result<ClientResponse> fetch(const HostPort& server, const std::string& method,
                             const std::string& target, const std::string& body = "",
                             std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Percent-encodes a query value.
std::string encodeQueryValue(const std::string& value);

}  // namespace allot::http
