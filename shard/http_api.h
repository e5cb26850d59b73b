// A link shard's operator endpoints (--http-listen), on http::Server:
//   GET /health   200 {"status":"ok",...} while linked to the leader, 503
//                 {"status":"no leader",...} otherwise; both name the
//                 shard and the agents it holds
//   GET /metrics  Prometheus text (shard/metrics.h)
//
// Thread: the shard's loop thread.
#pragma once

#include <memory>

#include "base/asio.h"
#include "base/result.h"
#include "http/server.h"
#include "shard/shard.h"

namespace allot {

// Binds and starts the server; `shard` must outlive it.
Result<std::unique_ptr<http::Server>> startShardHttp(asio::io_context& io, LinkShard& shard,
                                                     http::ServerOptions options);

}  // namespace allot
