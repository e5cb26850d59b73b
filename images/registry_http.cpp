#include "images/registry_http.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>

#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace allot::images {

namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;

constexpr size_t kChunkBytes = 1u << 16;
constexpr size_t kUrlBytesMax = 8192;

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// One exchange on its own io_context: each asynchronous step is started and
// run to completion (or to the stream's timeout) before the next.
class Exchange {
 public:
  Exchange(const Url& url, const HttpOptions& options) : url_(url), options_(options) {}

  Result<HttpAnswer> run(const std::vector<std::pair<std::string, std::string>>& headers,
                         uint64_t bodyBytesMax, const BodySink* sink);

 private:
  template <typename Start>
  beast::error_code step(Start start) {
    beast::error_code out = asio::error::timed_out;
    lowest().expires_after(options_.ioTimeout);
    start([&out](beast::error_code ec, auto&&...) { out = ec; });
    io_.restart();
    io_.run();
    return out;
  }
  beast::tcp_stream& lowest() { return secure_ ? beast::get_lowest_layer(*secure_) : *plain_; }
  Status connect();
  Status fail(std::string_view what, beast::error_code ec) const;
  template <typename Stream>
  Result<HttpAnswer> exchange(Stream& stream, const bhttp::request<bhttp::empty_body>& req,
                              uint64_t bodyBytesMax, const BodySink* sink);

  Url url_;
  HttpOptions options_;
  asio::io_context io_;
  std::optional<beast::tcp_stream> plain_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure_;
};

Status Exchange::fail(std::string_view what, beast::error_code ec) const {
  std::string where = (url_.tls ? "https://" : "http://") + url_.hostPort();
  if (ec == beast::error::timeout || ec == asio::error::timed_out)
    return Error{where + ": " + std::string(what) + ": no data for " +
                 std::to_string(options_.ioTimeout.count()) + " ms (timed out)"};
  return Error{where + ": " + std::string(what) + ": " + ec.message()};
}

Status Exchange::connect() {
  asio::ip::tcp::resolver resolver(io_);
  beast::error_code ec;
  auto endpoints = resolver.resolve(url_.host, url_.port, ec);
  if (ec) return fail("resolve", ec);
  if (url_.tls) {
    if (!options_.tls) return Error{"https://" + url_.hostPort() + ": no TLS context"};
    secure_.emplace(io_, *options_.tls);
    if (!SSL_set_tlsext_host_name(secure_->native_handle(), url_.host.c_str()))
      return Error{"https://" + url_.hostPort() + ": cannot set the TLS server name"};
    secure_->set_verify_callback(ssl::host_name_verification(url_.host));
  } else {
    plain_.emplace(io_);
  }
  if (ec = step([&](auto handler) { lowest().async_connect(endpoints, handler); }); ec) return fail("connect", ec);
  if (secure_) {
    ec = step([&](auto handler) { secure_->async_handshake(ssl::stream_base::client, handler); });
    if (ec) return fail("TLS handshake", ec);
  }
  return okStatus();
}

template <typename Stream>
Result<HttpAnswer> Exchange::exchange(Stream& stream, const bhttp::request<bhttp::empty_body>& req,
                                      uint64_t bodyBytesMax, const BodySink* sink) {
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.header_limit(kHttpHeaderBytesMax);
  // Beast checks a Content-Length against its body limit (8 MB by default)
  // while it reads the header, before this knows which limit applies: no
  // limit until then, ours after. (Not boost::none: 1.74 compares a length
  // with the empty optional and finds it larger.)
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (beast::error_code ec = step([&](auto h) { bhttp::async_write(stream, req, h); }); ec) return fail("send", ec).error();
  if (beast::error_code ec = step([&](auto h) { bhttp::async_read_header(stream, buffer, parser, h); }); ec)
    return fail("read the answer's header", ec).error();
  HttpAnswer answer;
  const auto& head = parser.get();
  answer.status = head.result_int();
  std::string type = lower(std::string(head[bhttp::field::content_type]));
  answer.contentType = type.substr(0, type.find(';'));
  answer.wwwAuthenticate = std::string(head[bhttp::field::www_authenticate]);
  answer.location = std::string(head[bhttp::field::location]);
  answer.dockerContentDigest = std::string(head["Docker-Content-Digest"]);
  bool wanted = answer.status / 100 == 2;
  uint64_t limit = wanted ? bodyBytesMax : kHttpErrorBodyBytesMax;
  if (parser.content_length() && *parser.content_length() > limit)
    return Error{url_.target + ": the answer's body is larger than " + std::to_string(limit) + " bytes"};
  parser.body_limit(limit);
  std::string chunk(kChunkBytes, '\0');
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    beast::error_code ec = step([&](auto h) { bhttp::async_read(stream, buffer, parser, h); });
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec == bhttp::error::body_limit)
      return Error{url_.target + ": the answer's body is larger than " + std::to_string(limit) + " bytes"};
    if (ec) return fail("read the answer's body", ec).error();
    size_t got = chunk.size() - parser.get().body().size;
    answer.bodyBytes += got;
    if (answer.bodyBytes > limit)
      return Error{url_.target + ": the answer's body is larger than " + std::to_string(limit) + " bytes"};
    if (wanted && sink != nullptr) {
      if (Status st = (*sink)(chunk.data(), got); !st) return st.error();
    } else {
      answer.body.append(chunk.data(), got);
    }
  }
  return answer;
}

Result<HttpAnswer> Exchange::run(const std::vector<std::pair<std::string, std::string>>& headers,
                                 uint64_t bodyBytesMax, const BodySink* sink) {
  if (Status st = connect(); !st) return st.error();
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, url_.target, 11};
  req.set(bhttp::field::host, url_.hostPort());
  req.set(bhttp::field::user_agent, "allot-agent");
  req.set(bhttp::field::connection, "close");
  for (const auto& [name, value] : headers) req.set(name, value);
  Result<HttpAnswer> answer = secure_ ? exchange(*secure_, req, bodyBytesMax, sink)
                                      : exchange(*plain_, req, bodyBytesMax, sink);
  beast::error_code ignored;
  lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  return answer;
}

}  // namespace

std::string Url::hostPort() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + port;
}

Result<Url> parseUrl(std::string_view text, const Url* base) {
  if (text.size() > kUrlBytesMax) return Error{"URL longer than " + std::to_string(kUrlBytesMax) + " bytes"};
  for (char c : text)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return Error{"URL with a control character or space"};
  Url url;
  size_t scheme = text.find("://");
  if (scheme == std::string_view::npos) {
    if (base == nullptr) return Error{"URL '" + std::string(text) + "' has no scheme"};
    url = *base;
    if (text.empty() || text.front() != '/') {
      std::string dir = base->target.substr(0, base->target.find('?'));
      url.target = dir.substr(0, dir.rfind('/') + 1) + std::string(text);
    } else {
      url.target = std::string(text);
    }
    return url;
  }
  std::string proto = lower(text.substr(0, scheme));
  if (proto != "http" && proto != "https") return Error{"URL scheme '" + proto + "' is not http or https"};
  url.tls = proto == "https";
  std::string_view rest = text.substr(scheme + 3);
  size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  url.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (url.target.front() == '?') url.target = "/" + url.target;
  if (authority.find('@') != std::string_view::npos) return Error{"URL with user information"};
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return Error{"URL with a bad IPv6 host"};
    url.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size() && authority[close + 1] == ':') port = authority.substr(close + 2);
  } else {
    size_t colon = authority.find(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty()) return Error{"URL '" + std::string(text) + "' has no host"};
  if (!port.empty() && (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos))
    return Error{"URL '" + std::string(text) + "' has a bad port"};
  url.port = port.empty() ? (url.tls ? "443" : "80") : std::string(port);
  return url;
}

Result<HttpAnswer> httpGet(const Url& url, const std::vector<std::pair<std::string, std::string>>& headers,
                           uint64_t bodyBytesMax, const BodySink* sink, const HttpOptions& options) {
  Exchange exchange(url, options);
  return exchange.run(headers, bodyBytesMax, sink);
}

Result<std::shared_ptr<ssl::context>> makeRegistryTls(const std::string& caFile) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  boost::system::error_code ec;
  context->set_options(ssl::context::no_sslv2 | ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1, ec);
  if (caFile.empty()) {
    context->set_default_verify_paths(ec);
  } else {
    context->load_verify_file(caFile, ec);
  }
  if (ec) return Error{"registry CA " + (caFile.empty() ? std::string("(system store)") : caFile) + ": " + ec.message()};
  context->set_verify_mode(ssl::verify_peer, ec);
  return context;
}

}  // namespace allot::images
