#include "isolators/disk_usage.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "base/unique_fd.h"

namespace allot {
namespace {

uint64_t blocksOf(const struct stat& st) { return static_cast<uint64_t>(st.st_blocks) * 512; }

// The open directories of the walk, innermost last; closed on every exit.
class DirStack {
 public:
  ~DirStack() {
    for (DIR* d : dirs_) ::closedir(d);
  }
  bool empty() const { return dirs_.empty(); }
  size_t size() const { return dirs_.size(); }
  DIR* top() const { return dirs_.back(); }
  void push(DIR* d) { dirs_.push_back(d); }
  void pop() {
    ::closedir(dirs_.back());
    dirs_.pop_back();
  }

 private:
  std::vector<DIR*> dirs_;
};

struct Walk {
  dev_t dev;
  uint64_t stopAt;
  DiskUsage usage;
  std::set<std::pair<dev_t, ino_t>> linked;  // inodes with more than one name, seen once

  // Counts one entry; false once the walk must stop.
  bool count(const struct stat& st) {
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 && !linked.insert({st.st_dev, st.st_ino}).second) return true;
    usage.bytes += blocksOf(st);
    if (usage.bytes > stopAt) usage.stopped = true;
    return !usage.stopped;
  }
};

// A subdirectory of `parent` to descend into, on the walk's filesystem
// (O_NOFOLLOW: a symlink swapped in since fstatat is not followed);
// nullptr when it vanished or is not one.
DIR* openSubdir(DIR* parent, const char* name, dev_t dev) {
  int fd = ::openat(::dirfd(parent), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_dev != dev) {
    ::close(fd);
    return nullptr;
  }
  DIR* d = ::fdopendir(fd);
  if (!d) ::close(fd);
  return d;
}

}  // namespace

Result<DiskUsage> diskUsage(const std::string& path, uint64_t stopAtBytes) {
  UniqueFd root(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (root.get() < 0) return Error::fromErrno("open directory " + path);
  struct stat st;
  if (::fstat(root.get(), &st) != 0) return Error::fromErrno("stat " + path);
  Walk walk{st.st_dev, stopAtBytes, {}, {}};
  DirStack stack;
  DIR* top = ::fdopendir(root.get());
  if (!top) return Error::fromErrno("opendir " + path);
  (void)root.release();
  stack.push(top);
  if (!walk.count(st)) return walk.usage;
  while (!stack.empty()) {
    const dirent* e = ::readdir(stack.top());
    if (!e) {
      stack.pop();
      continue;
    }
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (::fstatat(::dirfd(stack.top()), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (st.st_dev != walk.dev) continue;  // a mount point: another filesystem's
    if (!walk.count(st)) break;
    if (!S_ISDIR(st.st_mode)) continue;
    if (stack.size() >= kDiskUsageDepthMax) {
      walk.usage.tooDeep = true;
      break;
    }
    if (DIR* sub = openSubdir(stack.top(), e->d_name, walk.dev)) stack.push(sub);
  }
  return walk.usage;
}

}  // namespace allot
