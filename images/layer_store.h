// LayerStore: the agent's cache of unpacked image layers, content-addressed
// by the digest of each layer's blob, under a directory of the agent's work
// dir. It survives restarts; its size is held under a cap by evicting the
// least recently used layers no running executor holds.
//
//   <root>/layers/<hex>/rootfs   one unpacked layer (an overlay lower dir)
//   <root>/layers/<hex>/size     its unpacked bytes; its mtime = last use
//   <root>/staging/              downloads and unpacks in progress
//
// A layer appears in layers/ by one rename of a complete staging directory,
// so a crash leaves either the whole layer or none of it; open() empties
// staging/ and drops anything in layers/ that is not a complete layer.
//
// Thread: every method may be called from any thread (one mutex guards the
// index, never held across disk work). insert() and evict() do disk work:
// call them from a worker, never from the loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "images/digest.h"
#include "images/extract.h"

namespace allot::images {

struct LayerStoreOptions {
  std::string root;
  uint64_t bytesMax = 0;  // unpacked bytes evict() holds the store under; 0: no cap
};

class LayerStore {
 public:
  static Result<std::unique_ptr<LayerStore>> open(const LayerStoreOptions& options);

  // The rootfs directory of a stored layer (marked used now), or nullopt.
  std::optional<std::string> find(const Digest& digest);

  // Holds a stored layer for a running executor (evict() never removes a
  // held layer) and returns its rootfs; nullopt when the store lacks it.
  // Each successful acquire() is paired with one release().
  std::optional<std::string> acquire(const Digest& digest);
  void release(const Digest& digest);

  // A fresh path under staging/ for a download (nothing is created there).
  std::string stagingPath();

  // Checks that the blob file holds `blobSize` bytes hashing to `digest`,
  // unpacks it (extractLayer) and moves it into the store; returns its
  // rootfs. The blob file is left to the caller. A layer already stored is
  // returned as it is. On error nothing is left in the store.
  Result<std::string> insert(const Digest& digest, const std::string& blobPath, uint64_t blobSize,
                             const ExtractLimits& limits = {});

  // Removes least recently used layers nobody holds until the store's bytes
  // are within bytesMax; returns the layers removed.
  std::vector<Digest> evict();

  uint64_t bytes() const;
  size_t size() const;
  const std::string& root() const { return root_; }

 private:
  struct Layer {
    uint64_t bytes = 0;
    int64_t lastUseNs = 0;
    uint32_t holders = 0;
  };

  LayerStore(const LayerStoreOptions& options) : root_(options.root), bytesMax_(options.bytesMax) {}
  Status load();
  std::string layerDir(const Digest& digest) const { return root_ + "/layers/" + digest.hex; }
  std::optional<std::string> touch(const Digest& digest, bool hold);
  void add(const Digest& digest, uint64_t bytes);

  const std::string root_;
  const uint64_t bytesMax_;
  std::atomic<uint64_t> stagingSeq_{0};
  mutable std::mutex mu_;
  std::map<Digest, Layer> layers_;  // guarded by mu_
  uint64_t bytes_ = 0;              // guarded by mu_
};

}  // namespace allot::images
