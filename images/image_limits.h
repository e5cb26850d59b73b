// Named caps on everything an image source (a registry, a layer tarball)
// controls. Input is hostile: every size read from a manifest or a tar is
// checked against one of these before it costs memory or disk.
#pragma once

#include <cstddef>
#include <cstdint>

namespace allot::images {

// A manifest or index body (containerd's cap is 4 MiB too).
inline constexpr size_t kManifestBytesMax = 4u << 20;
// An image config blob.
inline constexpr size_t kConfigBytesMax = 8u << 20;
// One layer blob as stored in the registry (compressed).
inline constexpr uint64_t kLayerBlobBytesMax = 4ull << 30;
// One layer once unpacked (the sum of its regular files' sizes): a small
// gzip blob can expand a thousandfold.
inline constexpr uint64_t kLayerUnpackedBytesMax = 16ull << 30;
// Entries of one layer tar.
inline constexpr uint64_t kLayerEntriesMax = 1'000'000;
// Layers of one image (overlayfs stacks at most 500 lower dirs).
inline constexpr size_t kImageLayersMax = 128;
// A path inside a layer, and one of its components.
inline constexpr size_t kLayerPathBytesMax = 4000;
inline constexpr size_t kLayerNameBytesMax = 255;

}  // namespace allot::images
