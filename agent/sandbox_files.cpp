#include "agent/sandbox_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace allot {

namespace {

// glibc 2.36 has no openat2 wrapper.
int openat2Beneath(int dirfd, const char* path, int flags) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  return static_cast<int>(syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}

// A racing rename anywhere on the system makes a `..` lookup EAGAIN.
constexpr int kRaceRetries = 8;

std::string refusal(const std::string& relative, int err) {
  switch (err) {
    case EXDEV: return relative + " leads outside the sandbox";
    case ELOOP: return relative + ": too many or forbidden symlinks";
    case ENOENT: return relative + ": no such file";
    default: return relative;
  }
}

char typeOf(mode_t mode) {
  if (S_ISREG(mode)) return 'f';
  if (S_ISDIR(mode)) return 'd';
  if (S_ISLNK(mode)) return 'l';
  return '?';
}

}  // namespace

Status checkRelativePath(const std::string& relative) {
  if (relative.size() > kPathBytesMax) {
    return Error{"path longer than " + std::to_string(kPathBytesMax) + " bytes"};
  }
  if (relative.find('\0') != std::string::npos) return Error{"path contains a NUL byte"};
  if (!relative.empty() && relative[0] == '/') return Error{"path must be relative to the sandbox"};
  return okStatus();
}

Result<SandboxDir> SandboxDir::open(const std::string& sandbox) {
  int fd = ::open(sandbox.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Error::fromErrno("sandbox " + sandbox);
  UniqueFd owned(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return Error::fromErrno("stat " + sandbox);
  return SandboxDir(sandbox, std::move(owned), st.st_uid);
}

Result<UniqueFd> SandboxDir::resolve(const std::string& relative, int flags) const {
  if (Status st = checkRelativePath(relative); !st) return st.error();
  const char* path = relative.empty() ? "." : relative.c_str();
  for (int attempt = 0;; ++attempt) {
    int fd = openat2Beneath(fd_.get(), path, flags | O_CLOEXEC);
    if (fd >= 0) return UniqueFd(fd);
    if (errno == EAGAIN && attempt < kRaceRetries) continue;
    int err = errno;
    return Error{refusal(relative, err), err};
  }
}

Result<UniqueFd> SandboxDir::openFile(const std::string& relative) const {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer.
  auto fd = resolve(relative, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!fd) return fd.error();
  struct stat st;
  if (fstat(fd->get(), &st) != 0) return Error::fromErrno("stat " + relative);
  if (!S_ISREG(st.st_mode)) return Error{relative + " is not a regular file", EINVAL};
  // A hard link made in the sandbox to someone else's file (where
  // fs.protected_hardlinks allows it) is not the task's output.
  if (st.st_nlink > 1 && st.st_uid != owner_) {
    return Error{relative + " is a hard link to a file of another user", EPERM};
  }
  return fd;
}

Result<FileIdentity> SandboxDir::identify(const std::string& relative) const {
  auto fd = resolve(relative, O_PATH);
  if (!fd) return fd.error();
  return identifyFd(fd->get());
}

Result<DirListing> SandboxDir::list(const std::string& relative) const {
  auto fd = resolve(relative, O_RDONLY | O_DIRECTORY);
  if (!fd) return fd.error();
  DIR* dir = fdopendir(fd->get());
  if (!dir) return Error::fromErrno("open directory " + relative);
  int dirFd = fd->release();  // closedir closes it
  DirListing out;
  while (struct dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (out.entries.size() >= kListEntriesMax) {
      out.truncated = true;  // a directory of millions is not walked on the loop
      break;
    }
    FileEntry entry;
    entry.name = name;
    struct stat st;
    if (fstatat(dirFd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      entry.type = typeOf(st.st_mode);
      entry.size = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
      entry.mtimeS = static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
    }
    out.entries.push_back(std::move(entry));
  }
  closedir(dir);
  std::sort(out.entries.begin(), out.entries.end(),
            [](const FileEntry& a, const FileEntry& b) { return a.name < b.name; });
  return out;
}

Result<FileIdentity> identifyFd(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Error::fromErrno("fstat");
  return FileIdentity{st.st_dev, st.st_ino, static_cast<uint64_t>(st.st_size)};
}

Result<std::string> readAt(int fd, uint64_t offset, size_t length) {
  length = std::min(length, kReadBytesMax);
  std::string out(length, '\0');
  size_t got = 0;
  while (got < length) {
    ssize_t n = pread(fd, out.data() + got, length - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::fromErrno("read");
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

}  // namespace allot
