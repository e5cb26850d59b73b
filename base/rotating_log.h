// RotatingLog: an output file bounded by size, rotated with a number of
// files kept, like kubelet's containerLogMaxSize/containerLogMaxFiles.
//
// The current file is `path`; when a write would take it past maxBytes, the
// bytes that fit go to it, then path.(files-2) is renamed over
// path.(files-1) (the oldest goes), ..., path over path.1, and a new `path`
// takes the rest. So at most files * maxBytes bytes are kept, the newest
// always in `path`, the stream cut only at size boundaries and continuous
// across the files (path.1 then path). A reader that follows `path` sees
// its inode change at a rotation (agent/files_api.h).
//
// pumpTaskOutput() is the task logger's whole life: it runs in a process
// forked from the command executor (cli/allot_executor.cpp), so everything
// after construction is async-signal-safe: syscalls on fixed buffers, no
// allocation, no locks.
//
// Thread: one at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace allot {

inline constexpr uint64_t kLogBytesMin = 4096;
inline constexpr size_t kLogFilesMin = 2;
inline constexpr size_t kLogFilesMax = 100;

class RotatingLog {
 public:
  // maxBytes >= kLogBytesMin, files in [kLogFilesMin, kLogFilesMax]
  // (CHECKed: the caller validates flags).
  RotatingLog(std::string path, uint64_t maxBytes, size_t files);
  ~RotatingLog();
  RotatingLog(const RotatingLog&) = delete;
  RotatingLog& operator=(const RotatingLog&) = delete;

  // Opens (appends to) `path`. 0 or an errno.
  int open();
  void close();
  // Writes all of `data`, rotating as needed. 0 or an errno (the bytes not
  // written are lost; the next write tries again).
  int write(const char* data, size_t n);
  const std::string& path() const { return names_[0]; }

 private:
  int rotate();

  std::vector<std::string> names_;  // names_[k]: path.k (names_[0] = path)
  uint64_t maxBytes_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The logger's loop: reads the task's stdout and stderr pipes (fds
// `outFd`, `errFd`) into `out` and `err` until both reach end of file (the
// task and every process that holds its pipes are gone). Async-signal-safe.
// Returns the exit code for the logger process (0, or 1 after a write error).
int pumpTaskOutput(int outFd, int errFd, RotatingLog& out, RotatingLog& err);

}  // namespace allot
