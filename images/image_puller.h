// ImagePuller: the agent loop's way to get an image. pull() hands the work
// to a worker pool (base/worker_pool.h) and calls back on the loop; pulls of
// one reference requested while one is under way join it instead of
// starting another (and a layer two different images share is downloaded
// once, by RegistryClient).
//
// Thread: construct, pull() and destroy on the loop's thread. The client and
// the store outlive the puller; the pool's workers run the pulls.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/worker_pool.h"
#include "images/layer_store.h"
#include "images/registry_client.h"

namespace allot::images {

// Distinct references pulled at once; callers waiting for one pull.
inline constexpr size_t kPullsInFlightMax = 256;
inline constexpr size_t kPullWaitersMax = 100'000;

class ImagePuller {
 public:
  using Done = std::function<void(const Result<PulledImage>&)>;

  ImagePuller(WorkerPool& pool, RegistryClient& client, LayerStore& store)
      : pool_(pool), client_(client), store_(store) {}

  // Pulls `reference` (parsed here: a bad one is answered at once) and
  // calls `done` on the loop, exactly once, unless the puller is destroyed
  // first.
  void pull(const std::string& reference, Done done);

  size_t inFlight() const { return waiting_.size(); }

 private:
  void finish(const std::string& key, const Result<PulledImage>& result);

  WorkerPool& pool_;
  RegistryClient& client_;
  LayerStore& store_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // results after destruction are dropped
  std::map<std::string, std::vector<Done>> waiting_;  // by canonical reference
  size_t waiters_ = 0;
};

}  // namespace allot::images
