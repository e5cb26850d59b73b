#include "proto/leader.h"

#include <charconv>

namespace allot {

std::string Endpoint::describe() const {
  if (kind == Kind::kUnix) return "unix:" + path;
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

namespace {

Result<Endpoint> parseTcp(std::string_view text, std::string_view original) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size())
    return Error{"endpoint '" + std::string(original) + "': expected HOST:PORT"};
  std::string_view host = text.substr(0, colon);
  std::string_view portText = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) return Error{"endpoint '" + std::string(original) + "': empty host"};
  unsigned port = 0;
  auto [end, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
  if (ec != std::errc() || end != portText.data() + portText.size() || port > 65535)
    return Error{"endpoint '" + std::string(original) + "': bad port '" + std::string(portText) + "'"};
  Endpoint e;
  e.kind = Endpoint::Kind::kTcp;
  e.host = std::string(host);
  e.port = static_cast<uint16_t>(port);
  return e;
}

class FixedDetector final : public LeaderDetector {
 public:
  FixedDetector(asio::io_context& io, Endpoint endpoint)
      : io_(io), endpoint_(std::move(endpoint)) {}
  ~FixedDetector() override { alive_.reset(); }

  void start(Callback onLeader) override {
    std::weak_ptr<int> alive = alive_;
    asio::post(io_, [alive, onLeader = std::move(onLeader), endpoint = endpoint_] {
      if (alive.expired()) return;
      onLeader(Leader{endpoint, 0, ""});
    });
  }
  std::string describe() const override { return endpoint_.describe(); }

 private:
  asio::io_context& io_;
  Endpoint endpoint_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace

Result<Endpoint> parseEndpoint(std::string_view text) {
  constexpr size_t kMaxUnixPathBytes = 107;  // sun_path minus the NUL
  if (text.rfind("unix:", 0) == 0) {
    std::string_view path = text.substr(5);
    if (path.empty() || path.size() > kMaxUnixPathBytes)
      return Error{"endpoint '" + std::string(text) + "': bad socket path"};
    Endpoint e;
    e.kind = Endpoint::Kind::kUnix;
    e.path = std::string(path);
    return e;
  }
  if (text.rfind("tcp:", 0) == 0) return parseTcp(text.substr(4), text);
  return parseTcp(text, text);
}

std::unique_ptr<LeaderDetector> makeFixedDetector(asio::io_context& io, Endpoint endpoint) {
  return std::make_unique<FixedDetector>(io, std::move(endpoint));
}

}  // namespace allot
