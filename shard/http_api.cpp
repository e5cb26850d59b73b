#include "shard/http_api.h"

#include "proto/json_writer.h"

namespace allot {

namespace {

http::Response health(const LinkShard& shard) {
  bool linked = shard.leaderConnected();
  std::string body = "{\"status\":";
  appendJsonString(linked ? "ok" : "no leader", &body);
  body += ",\"role\":\"shard\",\"name\":";
  appendJsonString(shard.name(), &body);
  body += ",\"agents\":" + std::to_string(shard.agents()) + "}\n";
  http::Response r = http::Response::json(std::move(body));
  if (!linked) r.status = 503;
  return r;
}

}  // namespace

Result<std::unique_ptr<http::Server>> startShardHttp(asio::io_context& io, LinkShard& shard,
                                                     http::ServerOptions options) {
  auto server = http::Server::create(io, std::move(options));
  if (!server) return server.error();
  (*server)->route("GET", "/health", [&shard](const http::Request&) { return health(shard); });
  (*server)->route("GET", "/metrics", [&shard](const http::Request&) {
    ShardMetrics& m = shard.metrics();
    m.agents().Set(static_cast<double>(shard.agents()));
    m.leaderLinked().Set(shard.leaderConnected() ? 1 : 0);
    http::Response r;
    r.contentType = "text/plain; version=0.0.4; charset=utf-8";
    r.body = m.serialize();
    return r;
  });
  (*server)->start();
  return server;
}

}  // namespace allot
