// The agent daemon's images (filesystem/linux): the layer store under
// <work-dir>/images (survives restarts), the registry client and the
// ImagePuller on a worker pool of its own, handed to the isolators
// (IsolatorOptions::imageStore) and to the executor manager
// (ExecutorManagerOptions::pullImage). A pulled image's layers are held
// from the pull (ContainerImage::hold) to its container's end; after each
// pull, when no other is under way, the store is held under
// --image-cache-max on the pool (least recently used layers nobody holds
// go first). Pulls asked for while an eviction runs wait for its end: a
// pull that found a layer in the store would otherwise see it removed
// before its executor holds it.
// Thread: create and use on the agent's loop.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "agent/executor_manager.h"
#include "base/asio.h"
#include "base/result.h"
#include "base/worker_pool.h"
#include "images/image_puller.h"
#include "images/layer_store.h"
#include "images/registry_client.h"

namespace allot {

// Pulls at once: each holds a worker for its whole download.
inline constexpr size_t kImagePullThreads = 2;

struct ImageServiceOptions {
  std::string workDir;
  uint64_t cacheBytesMax = 0;  // 0: no cap
  images::RegistryOptions registry;
};

class ImageService {
 public:
  // `pool` runs the pulls and evictions; nullptr: a pool of
  // kImagePullThreads niced workers of its own.
  static Result<std::unique_ptr<ImageService>> create(asio::io_context& io, const ImageServiceOptions& options,
                                                      std::unique_ptr<WorkerPool> pool = nullptr);

  images::LayerStore& store() { return *store_; }
  // The executor manager's pullImage: the pull, then the cap enforced.
  void pull(const std::string& reference, ExecutorManagerOptions::ImageDone done);

 private:
  explicit ImageService(std::unique_ptr<WorkerPool> pool) : pool_(std::move(pool)) {}
  void evict();
  void start(const std::string& reference, ExecutorManagerOptions::ImageDone done);

  std::unique_ptr<images::LayerStore> store_;
  std::unique_ptr<images::RegistryClient> client_;
  std::unique_ptr<images::ImagePuller> puller_;
  bool evicting_ = false;
  // Pulls waiting for the eviction under way (at most images::kPullWaitersMax).
  std::vector<std::pair<std::string, ExecutorManagerOptions::ImageDone>> deferred_;
  std::unique_ptr<WorkerPool> pool_;  // last: its workers (pulls using the above) joined first
};

}  // namespace allot
