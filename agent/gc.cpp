#include "agent/gc.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>

namespace allot {

GcResult collectSandboxes(const std::string& sandboxesDir, std::chrono::seconds maxAge,
                          const std::function<bool(const std::string& path)>& inUse,
                          std::chrono::system_clock::time_point now) {
  GcResult result;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sandboxesDir, ec)) {
    std::string path = entry.path();
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || inUse(path)) {
      ++result.kept;
      continue;
    }
    auto mtime = std::chrono::system_clock::from_time_t(st.st_mtim.tv_sec);
    if (now - mtime < maxAge) {
      ++result.kept;
      continue;
    }
    std::error_code rmErr;
    std::filesystem::remove_all(path, rmErr);
    if (rmErr) {
      result.errors += path + ": " + rmErr.message() + "; ";
      ++result.kept;
    } else {
      ++result.removed;
    }
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    result.errors += sandboxesDir + ": " + ec.message() + "; ";
  }
  return result;
}

Status touchDirectory(const std::string& path) {
  if (::utimensat(AT_FDCWD, path.c_str(), nullptr, 0) != 0) return Error::fromErrno("utimensat " + path);
  return okStatus();
}

}  // namespace allot
