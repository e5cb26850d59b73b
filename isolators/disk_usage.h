// diskUsage: what a directory tree holds on disk, as `du -s -x` counts it,
// for the disk/du isolator's checks (isolators/disk_isolator.h).
//
// Counts allocated blocks (st_blocks * 512: a sparse file counts what it
// really uses), every entry once: the root, directories, files, symlinks
// themselves (never followed) and each hard-linked inode once however many
// names it has inside the tree. Entries on another filesystem than the
// root (a mount point inside it) are skipped, with everything below them.
// Entries that vanish or cannot be opened during the walk are skipped: a
// running task changes its sandbox while it is measured.
//
// Bounded: the walk stops as soon as the count passes `stopAtBytes`
// (stopped = true; bytes is then a lower bound), and it holds one open
// directory per level, at most kDiskUsageDepthMax levels (tooDeep = true
// when the tree goes deeper; bytes is then what it counted until there).
//
// Blocking (it reads the whole tree): run it on a worker, never on the
// agent's loop. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"

namespace allot {

inline constexpr size_t kDiskUsageDepthMax = 256;

struct DiskUsage {
  uint64_t bytes = 0;
  bool stopped = false;  // passed stopAtBytes: the walk ended early
  bool tooDeep = false;  // directories nest deeper than kDiskUsageDepthMax
};

// An Error only when `path` itself cannot be opened as a directory (it is
// missing, a symlink, or not a directory).
Result<DiskUsage> diskUsage(const std::string& path, uint64_t stopAtBytes = UINT64_MAX);

}  // namespace allot
