// Unpacking one image layer (a tar, plain, gzip or zstd) into a directory,
// refusing everything that would write outside it, and turning OCI
// whiteouts into overlayfs's form so the layer can be an overlay lower dir.
//
// Refused, with an Error naming the entry and the reason: absolute paths and
// paths with "..", an entry whose path goes through a symlink (or anything
// but a directory) of the layer, a hard link to anything but an earlier
// file or symlink of the same layer, device nodes (char, block), a bare
// ".wh." name, more than `entriesMax` entries or `bytesMax` unpacked bytes,
// and whatever libarchive itself refuses (a truncated or corrupt archive).
// Three independent fences keep writes inside: our checks above on each
// entry against what the layer has made so far; libarchive's secure flags
// (NODOTDOT, NOABSOLUTEPATHS, SYMLINKS); and the unpacking thread's own
// working directory (unshare(CLONE_FS)) set to the layer, chroot'ed into it
// when the process may.
//
// Whiteouts (OCI image-spec layer.md): ".wh.NAME" becomes the overlay
// whiteout (a 0/0 character device) at NAME unless this layer itself has
// NAME; ".wh..wh..opq" marks its directory opaque (xattr
// trusted.overlay.opaque=y: needs CAP_SYS_ADMIN); other ".wh..wh." names
// are skipped. No xattrs, ACLs or file flags are restored from the tar (an
// image's "trusted.overlay.*" would steer the overlay). Owners are restored
// (numeric ids, never looked up by name) when running as root.
//
// Thread: blocking (disk work); call it from a worker, never the loop.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "images/image_limits.h"

namespace allot::images {

struct ExtractLimits {
  uint64_t entriesMax = kLayerEntriesMax;
  uint64_t bytesMax = kLayerUnpackedBytesMax;
};

struct ExtractStats {
  uint64_t entries = 0;    // entries taken from the tar
  uint64_t bytes = 0;      // regular file bytes written
  uint64_t whiteouts = 0;  // whiteout devices made
  uint64_t opaqueDirs = 0;
};

// Unpacks the layer blob at `blobPath` into `destDir`, an empty directory
// the caller made and nothing else writes meanwhile. On error `destDir` may
// hold part of the layer: the caller removes it.
Result<ExtractStats> extractLayer(const std::string& blobPath, const std::string& destDir,
                                  const ExtractLimits& limits = {});

}  // namespace allot::images
