#include "shard/shard_thread.h"

#include "base/log.h"
#include "shard/http_api.h"

namespace allot {

Result<std::unique_ptr<ShardThread>> ShardThread::create(ShardOptions options,
                                                         std::optional<http::ServerOptions> http) {
  std::unique_ptr<ShardThread> self(new ShardThread());
  auto shard = LinkShard::create(self->io_, std::move(options));
  if (!shard) return shard.error();
  self->shard_ = std::move(*shard);
  if (http) {
    auto server = startShardHttp(self->io_, *self->shard_, std::move(*http));
    if (!server) return server.error();
    self->http_ = std::move(*server);
  }
  return self;
}

ShardThread::~ShardThread() { stop(); }

void ShardThread::start() {
  if (thread_.joinable()) return;
  shard_->start();
  thread_ = std::thread([this] { io_.run(); });
}

// The shard's stop runs on its own thread, like every other step of it; the
// loop ends with it even if a ZooKeeper callback is still posted.
void ShardThread::stop() {
  if (!thread_.joinable()) return;
  asio::post(io_, [this] {
    if (http_) http_->stop();
    shard_->stop();
    io_.stop();
  });
  thread_.join();
}

}  // namespace allot
