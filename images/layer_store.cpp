#include "images/layer_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "base/files.h"
#include "base/log.h"

namespace allot::images {

namespace {

namespace fs = std::filesystem;

// Layers one store indexes; far above any node's working set.
constexpr size_t kStoreLayersMax = 100'000;
constexpr size_t kSizeFileBytesMax = 32;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

Status makeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return Error::fromErrno("mkdir " + path);
  return okStatus();
}

// The bytes recorded in a layer's size file; nullopt when it is missing or
// not a decimal number.
std::optional<uint64_t> readSizeFile(const std::string& path) {
  std::ifstream in(path);
  std::string text(kSizeFileBytesMax + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || text.size() > kSizeFileBytesMax || ec != std::errc() ||
      end != text.data() + text.size())
    return std::nullopt;
  return value;
}

void removeTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) LOG_WARNING("image store: removing " << path << ": " << ec.message());
}

}  // namespace

Result<std::unique_ptr<LayerStore>> LayerStore::open(const LayerStoreOptions& options) {
  std::unique_ptr<LayerStore> store(new LayerStore(options));
  if (Status st = store->load(); !st) return st.error();
  return store;
}

Status LayerStore::load() {
  for (const std::string& dir : {root_, root_ + "/layers", root_ + "/staging"})
    if (Status st = makeDir(dir, 0700); !st) return st;
  std::error_code ec;
  for (const fs::directory_entry& stale : fs::directory_iterator(root_ + "/staging", ec))
    removeTree(stale.path());
  if (ec) return Error{"image store: listing " + root_ + "/staging: " + ec.message()};
  for (const fs::directory_entry& entry : fs::directory_iterator(root_ + "/layers", ec)) {
    std::string name = entry.path().filename();
    Result<Digest> digest = parseDigest("sha256:" + name);
    std::optional<uint64_t> bytes = readSizeFile(entry.path().string() + "/size");
    struct stat st;
    if (!digest || !bytes || layers_.size() >= kStoreLayersMax ||
        ::stat((entry.path().string() + "/size").c_str(), &st) != 0) {
      LOG_WARNING("image store: dropping " << entry.path().string() << " (not a complete layer)");
      removeTree(entry.path());
      continue;
    }
    layers_[*digest] = Layer{*bytes, st.st_mtim.tv_sec * 1'000'000'000ll + st.st_mtim.tv_nsec, 0};
    bytes_ += *bytes;
  }
  if (ec) return Error{"image store: listing " + root_ + "/layers: " + ec.message()};
  LOG_INFO("image store " << root_ << ": " << layers_.size() << " layers, " << bytes_ << " bytes");
  return okStatus();
}

// Marks a layer used now (in the index and, for the next start, in its size
// file's mtime); holds it when `hold`.
std::optional<std::string> LayerStore::touch(const Digest& digest, bool hold) {
  {
    std::lock_guard lock(mu_);
    auto it = layers_.find(digest);
    if (it == layers_.end()) return std::nullopt;
    it->second.lastUseNs = nowNs();
    if (hold) ++it->second.holders;
  }
  std::string dir = layerDir(digest);
  if (::utimensat(AT_FDCWD, (dir + "/size").c_str(), nullptr, 0) != 0)
    LOG_WARNING("image store: marking " << dir << " used: " << std::strerror(errno));
  return dir + "/rootfs";
}

std::optional<std::string> LayerStore::find(const Digest& digest) { return touch(digest, false); }

std::optional<std::string> LayerStore::acquire(const Digest& digest) { return touch(digest, true); }

void LayerStore::release(const Digest& digest) {
  std::lock_guard lock(mu_);
  auto it = layers_.find(digest);
  CHECK(it != layers_.end() && it->second.holders > 0);
  --it->second.holders;
}

std::string LayerStore::stagingPath() {
  return root_ + "/staging/" + std::to_string(::getpid()) + "." + std::to_string(stagingSeq_++);
}

void LayerStore::add(const Digest& digest, uint64_t bytes) {
  std::lock_guard lock(mu_);
  auto [it, added] = layers_.try_emplace(digest, Layer{bytes, nowNs(), 0});
  if (added) bytes_ += bytes;
}

Result<std::string> LayerStore::insert(const Digest& digest, const std::string& blobPath,
                                       uint64_t blobSize, const ExtractLimits& limits) {
  if (std::optional<std::string> present = find(digest)) return *present;
  if (size() >= kStoreLayersMax)
    return Error{"image store holds " + std::to_string(kStoreLayersMax) + " layers already"};
  if (Status st = verifyBlobFile(blobPath, digest, blobSize); !st) return st.error();
  std::string stage = stagingPath();
  if (Status st = makeDir(stage, 0700); !st) return st.error();
  Status done = makeDir(stage + "/rootfs", 0755);
  Result<ExtractStats> stats = Error{"not unpacked"};
  if (done) stats = extractLayer(blobPath, stage + "/rootfs", limits);
  if (done && !stats) done = Error{"layer " + digest.str() + ": " + stats.error().message};
  if (done) done = writeFileAtomically(stage + "/size", std::to_string(stats->bytes), false, 0600);
  if (done && ::rename(stage.c_str(), layerDir(digest).c_str()) != 0) {
    // ENOTEMPTY/EEXIST: another pull of the same layer won the race.
    if (errno != ENOTEMPTY && errno != EEXIST) done = Error::fromErrno("rename into " + layerDir(digest));
  } else if (done) {
    add(digest, stats->bytes);
  }
  if (!done) {
    removeTree(stage);
    return done.error();
  }
  removeTree(stage);  // gone after a successful rename; the loser's copy otherwise
  if (std::optional<std::string> present = find(digest)) return *present;
  return Error{"layer " + digest.str() + " vanished from the store after its insert"};
}

std::vector<Digest> LayerStore::evict() {
  std::vector<Digest> victims;
  std::vector<std::string> trash;
  {
    std::lock_guard lock(mu_);
    while (bytesMax_ > 0 && bytes_ > bytesMax_) {
      auto oldest = layers_.end();
      for (auto it = layers_.begin(); it != layers_.end(); ++it)
        if (it->second.holders == 0 && (oldest == layers_.end() || it->second.lastUseNs < oldest->second.lastUseNs))
          oldest = it;
      if (oldest == layers_.end()) break;
      std::string moved = stagingPath();
      if (::rename(layerDir(oldest->first).c_str(), moved.c_str()) != 0) {
        LOG_WARNING("image store: evicting " << layerDir(oldest->first) << ": " << std::strerror(errno));
        break;
      }
      trash.push_back(moved);
      victims.push_back(oldest->first);
      bytes_ -= oldest->second.bytes;
      layers_.erase(oldest);
    }
  }
  for (const std::string& dir : trash) removeTree(dir);
  return victims;
}

uint64_t LayerStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t LayerStore::size() const {
  std::lock_guard lock(mu_);
  return layers_.size();
}

}  // namespace allot::images
