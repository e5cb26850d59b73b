// Sandbox garbage collection: removes the sandboxes of ended executors once
// they are older than --sandbox-max-age (their directory's mtime, which the
// agent touches when an executor ends).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "base/result.h"

namespace allot {

struct GcResult {
  size_t removed = 0;
  size_t kept = 0;
  std::string errors;  // "path: reason; ..." for entries that could not go
};

// One pass over the entries of `sandboxesDir`: removes each directory for
// which inUse(path) is false and whose mtime is older than now - maxAge.
GcResult collectSandboxes(const std::string& sandboxesDir, std::chrono::seconds maxAge,
                          const std::function<bool(const std::string& path)>& inUse,
                          std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

// Sets the directory's mtime to now (an executor ended: its age starts).
Status touchDirectory(const std::string& path);

}  // namespace allot
