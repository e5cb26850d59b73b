#include "base/rotating_log.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/check.h"

namespace allot {

RotatingLog::RotatingLog(std::string path, uint64_t maxBytes, size_t files) : maxBytes_(maxBytes) {
  CHECK(maxBytes >= kLogBytesMin && files >= kLogFilesMin && files <= kLogFilesMax);
  names_.push_back(path);
  for (size_t k = 1; k < files; ++k) names_.push_back(path + "." + std::to_string(k));
}

RotatingLog::~RotatingLog() { close(); }

void RotatingLog::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int RotatingLog::open() {
  int fd = ::open(names_[0].c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0) return errno;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return err;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  size_ = static_cast<uint64_t>(st.st_size);
  return 0;
}

// Every byte already went to the old file when it is renamed, so a reader
// that sees the rename has seen (or can still read) all of it.
int RotatingLog::rotate() {
  for (size_t k = names_.size() - 1; k > 0; --k) {
    if (rename(names_[k - 1].c_str(), names_[k].c_str()) != 0 && errno != ENOENT) return errno;
  }
  return open();
}

int RotatingLog::write(const char* data, size_t n) {
  if (fd_ < 0) {
    if (int err = open(); err != 0) return err;
  }
  while (n > 0) {
    if (size_ >= maxBytes_) {
      if (int err = rotate(); err != 0) return err;
    }
    uint64_t room = maxBytes_ - size_;
    size_t chunk = n < room ? n : static_cast<size_t>(room);
    ssize_t w = ::write(fd_, data, chunk);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    data += w;
    n -= static_cast<size_t>(w);
    size_ += static_cast<uint64_t>(w);
  }
  return 0;
}

namespace {

// One pipe read per pass; the pipe's own buffer holds the rest.
constexpr size_t kPumpBytes = 64 * 1024;

// Reads what `fd` has into `log`; false once it is at end of file.
bool pumpOnce(int fd, RotatingLog& log, char* buffer, bool* failed) {
  ssize_t n = read(fd, buffer, kPumpBytes);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  if (log.write(buffer, static_cast<size_t>(n)) != 0) *failed = true;
  return true;
}

}  // namespace

int pumpTaskOutput(int outFd, int errFd, RotatingLog& out, RotatingLog& err) {
  static char buffer[kPumpBytes];  // the logger's one buffer: no allocation
  struct pollfd fds[2] = {{outFd, POLLIN, 0}, {errFd, POLLIN, 0}};
  RotatingLog* logs[2] = {&out, &err};
  bool failed = false;
  int open = 2;
  while (open > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      if (!pumpOnce(fds[i].fd, *logs[i], buffer, &failed)) {
        fds[i].fd = -1;  // poll ignores it from now on
        --open;
      }
    }
  }
  return failed ? 1 : 0;
}

}  // namespace allot
