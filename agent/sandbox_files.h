// SandboxFiles: the agent reads a task's sandbox for the files API
// (agent/files_api.h) without ever leaving it.
//
// The sandbox belongs to the task's run-as user, who may put anything in it
// (a symlink to /etc/shadow in place of its stdout, a link to /, a FIFO, a
// hard link); the agent reads as root. So every path is resolved by the
// kernel beneath the sandbox's directory fd: openat2(2) with
// RESOLVE_BENEATH (no absolute symlink, no `..` above the sandbox),
// RESOLVE_NO_MAGICLINKS (no /proc/<pid>/fd links) and RESOLVE_NO_XDEV (no
// mount crossed, so a volume or image mounted inside is not served). What
// the kernel refuses is refused (EXDEV, ELOOP; EAGAIN, a racing rename, is
// retried a few times). A file is served only when it is a regular file
// (opened O_NONBLOCK, so a FIFO never blocks the open) and is not a hard
// link to a file of another owner than the sandbox's.
//
// Paths are relative ("", "dir/file"); an absolute path, a NUL byte or a
// path longer than kPathBytesMax is refused before any syscall.
//
// Thread: any (no shared state). The calls are a few syscalls each, bounded
// by the limits below: cheap enough for the agent's loop.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace allot {

inline constexpr size_t kPathBytesMax = 1024;
// One read answers at most this many bytes (Mesos: 16 pages).
inline constexpr size_t kReadBytesMax = 1024 * 1024;
// A listing shows at most this many entries (in directory order, then sorted).
inline constexpr size_t kListEntriesMax = 4096;

struct FileEntry {
  std::string name;
  char type = '?';  // 'f' regular, 'd' directory, 'l' symlink, '?' other
  uint64_t size = 0;
  double mtimeS = 0;
};

struct DirListing {
  std::vector<FileEntry> entries;  // sorted by name
  bool truncated = false;          // more than kListEntriesMax
};

// What an open file is: its identity (to notice a rotation) and size.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t size = 0;
};

class SandboxDir {
 public:
  // Opens the sandbox itself (O_PATH, no symlink as its last component).
  static Result<SandboxDir> open(const std::string& sandbox);

  // A regular file beneath the sandbox, for reading.
  Result<UniqueFd> openFile(const std::string& relative) const;
  // The identity of what `relative` names now, without opening it for
  // reading (a rotation check).
  Result<FileIdentity> identify(const std::string& relative) const;
  Result<DirListing> list(const std::string& relative) const;

  const std::string& path() const { return path_; }

 private:
  SandboxDir(std::string path, UniqueFd fd, uid_t owner)
      : path_(std::move(path)), fd_(std::move(fd)), owner_(owner) {}
  Result<UniqueFd> resolve(const std::string& relative, int flags) const;

  std::string path_;
  UniqueFd fd_;
  uid_t owner_ = 0;
};

Result<FileIdentity> identifyFd(int fd);
// Up to `length` (at most kReadBytesMax) bytes at `offset`; fewer at the end.
Result<std::string> readAt(int fd, uint64_t offset, size_t length);
// Refuses absolute paths, NUL bytes and paths past kPathBytesMax.
Status checkRelativePath(const std::string& relative);

}  // namespace allot
