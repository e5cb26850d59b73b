// The HTTP(S) exchanges of a registry pull: one GET at a time, blocking,
// on an io_context of its own (so: on a worker, never on a daemon's loop).
// Every network wait (connect, TLS handshake, each read of the answer) has
// the same `ioTimeout`: a registry that stalls mid-blob is given up on
// after ioTimeout of silence, whatever the blob's size.
//
// Thread: each call is independent; any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/asio.h"
#include "base/result.h"

#include <boost/asio/ssl/context.hpp>

namespace allot::images {

// Header bytes of one answer (Beast's default is 8 KiB; registries send
// long WWW-Authenticate and Link fields).
inline constexpr size_t kHttpHeaderBytesMax = 32u << 10;
// Body of an answer that is not what was asked for (an error document).
inline constexpr size_t kHttpErrorBodyBytesMax = 64u << 10;

struct Url {
  bool tls = true;
  std::string host;  // without brackets for IPv6
  std::string port;  // always set ("443", "80" by default)
  std::string target = "/";

  std::string hostPort() const;
};

// http[s]://host[:port][/path[?query]]; `base` resolves a relative
// reference (a Location of "/v2/..." or "blob?x=1").
Result<Url> parseUrl(std::string_view text, const Url* base = nullptr);

struct HttpAnswer {
  unsigned status = 0;
  std::string contentType;      // without parameters, lower-case
  std::string wwwAuthenticate;
  std::string location;
  std::string dockerContentDigest;
  std::string body;             // when no sink took it
  uint64_t bodyBytes = 0;
};

struct HttpOptions {
  // Null: plain HTTP is all this exchange may use (the caller decides when
  // that is allowed).
  std::shared_ptr<boost::asio::ssl::context> tls;
  std::chrono::milliseconds ioTimeout{30'000};
};

// Receives a 2xx answer's body in chunks; an Error stops the download.
using BodySink = std::function<Status(const char* data, size_t size)>;

// GETs `url` with `headers`. A 2xx body longer than `bodyBytesMax` is an
// Error (so is one of another status longer than kHttpErrorBodyBytesMax);
// with a sink, a 2xx body goes to it instead of HttpAnswer::body.
Result<HttpAnswer> httpGet(const Url& url, const std::vector<std::pair<std::string, std::string>>& headers,
                           uint64_t bodyBytesMax, const BodySink* sink, const HttpOptions& options);

// A TLS client context that trusts `caFile` (PEM) or, when empty, the
// system's store; peers are verified (chain and host name).
Result<std::shared_ptr<boost::asio::ssl::context>> makeRegistryTls(const std::string& caFile);

}  // namespace allot::images
