#include "base/files.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "base/encoding.h"
#include "base/unique_fd.h"

namespace allot {
namespace {

constexpr size_t kLongNamePrefixBytes = 120;

bool keptAsIs(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

std::string sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // EVP_Digest with SHA-256 fails only on allocation failure.
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1) std::abort();
  return hexOf(digest, length);
}

Status syncDirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return Error::fromErrno("open directory " + dir);
  if (::fsync(fd.get()) != 0) return Error::fromErrno("fsync directory " + dir);
  return okStatus();
}

}  // namespace

Status writeAll(int fd, std::string_view data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::fromErrno("write " + path);
    done += static_cast<size_t>(n);
  }
  return okStatus();
}

std::string escapeId(std::string_view id) {
  if (id.empty()) return "%";
  return percentEncode(id, keptAsIs);
}

std::string containerName(std::string_view frameworkId, std::string_view executorId) {
  std::string name = escapeId(frameworkId) + "." + escapeId(executorId);
  if (name.size() <= kContainerNameBytesMax) return name;
  return name.substr(0, kLongNamePrefixBytes) + "~" + sha256Hex(name);
}

Status writeFileAtomically(const std::string& path, std::string_view data, bool durable, mode_t mode) {
  std::string tmp = path + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  if (!fd) return Error::fromErrno("create " + tmp);
  Status st = writeAll(fd.get(), data, tmp);
  if (st && ::fchmod(fd.get(), mode) != 0) st = Error::fromErrno("chmod " + tmp);
  if (st && durable && ::fdatasync(fd.get()) != 0) st = Error::fromErrno("fdatasync " + tmp);
  if (st && ::close(fd.release()) != 0) st = Error::fromErrno("close " + tmp);
  if (st && ::rename(tmp.c_str(), path.c_str()) != 0) st = Error::fromErrno("rename " + tmp + " to " + path);
  if (!st) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (durable) return syncDirectoryOf(path);
  return okStatus();
}

rlim_t raiseFileLimit(rlim_t wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur >= wanted) return limit.rlim_cur;
  rlimit raised{wanted, std::max(wanted, limit.rlim_max)};
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return wanted;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  return limit.rlim_cur;
}

std::string taskOutputFile(std::string_view taskId, std::string_view stream) {
  std::string out(taskId);
  for (char& c : out) {
    if (c == '/' || c == '\0') c = '_';
  }
  if (out.empty() || out[0] == '.') out = "_" + out;
  out += '.';
  out += stream;
  return out;
}

}  // namespace allot
