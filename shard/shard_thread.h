// ShardThread: a LinkShard (shard/shard.h) on an io_context and a thread of
// its own, with its /health and /metrics (shard/http_api.h) when asked. This
// is how allot-master serves as a link shard beside its master role
// (--agent-shard-listen): a hot standby carries agents for the leader while
// it waits, and the leader carries its own over loopback. The master's loop
// and the shard's share nothing but the process: they meet only over the
// shard link, as any shard and leader do, so neither waits on the other.
//
// Thread: create, start and stop (and the destructor) from one thread; the
// shard itself runs on its own thread from start until stop.
#pragma once

#include <memory>
#include <optional>
#include <thread>

#include "base/asio.h"
#include "base/result.h"
#include "http/server.h"
#include "shard/shard.h"

namespace allot {

class ShardThread {
 public:
  // Binds the agents' port (and the HTTP port, when given); nothing runs
  // until start().
  static Result<std::unique_ptr<ShardThread>> create(ShardOptions options,
                                                     std::optional<http::ServerOptions> http);
  ~ShardThread();

  uint16_t port() const { return shard_->port(); }
  uint16_t httpPort() const { return http_ ? http_->port() : 0; }
  void start();
  // Closes the shard's links (its agents move on to other shards) and
  // joins its thread. Idempotent.
  void stop();

 private:
  ShardThread() = default;

  asio::io_context io_{1};
  std::unique_ptr<LinkShard> shard_;
  std::unique_ptr<http::Server> http_;
  std::thread thread_;
};

}  // namespace allot
