// CgroupFs: the kernel as the cgroup code sees it (the leveldb `Env` idea).
// Isolators and CgroupLayer read and write cgroup control files, make and
// remove cgroup directories and signal member processes only through it.
//
//   realCgroupFs()   the kernel's cgroupfs (errors name the file, the value
//                    and errno, crun's habit)
//   DirCgroupFs      a twin in a temp directory for unit tests
//                    (cgroupfs_twin.h): it behaves like cgroupfs for the
//                    files and calls the cgroup code makes.
//
// The free functions in namespace cgroupfs are the real filesystem; the
// agent's detection (cgroup_host.cpp) and root tests use them directly.
// Thread: any; an implementation holds no state the callers share (the twin
// is for one test thread).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace allot {

// What wakes a watcher of a cgroup event (an OOM): `fd` (non-blocking)
// becomes readable on each event, reading it drains it; `held` stays open
// as long as the registration must (v1: the watched control file).
struct CgroupEventSource {
  UniqueFd fd;
  UniqueFd held;
};

class CgroupFs {
 public:
  virtual ~CgroupFs() = default;

  virtual Status writeFile(const std::string& path, const std::string& value) const = 0;
  virtual Result<std::string> readFile(const std::string& path) const = 0;
  // A control file or directory exists (feature detection: cgroup.kill,
  // io.weight, memory.swap.max...).
  virtual bool exists(const std::string& path) const = 0;
  // Creates a cgroup directory; an existing one is fine.
  virtual Status makeDir(const std::string& path) const = 0;
  // Removes one cgroup directory, one attempt: EBUSY (members still being
  // torn down) is returned for the caller to retry. A missing one is fine.
  virtual Status removeDir(const std::string& path) const = 0;
  // Subdirectory names of `dir`.
  virtual std::vector<std::string> subdirs(const std::string& dir) const = 0;
  // Sends `sig` to a member process found in cgroup.procs. A process that
  // already exited is fine.
  virtual Status signal(pid_t pid, int sig) const = 0;
  // Events on the control file `path`. v1 (`eventControl`: the cgroup's
  // cgroup.event_control): an eventfd the kernel signals through
  // cgroup.event_control (memory.oom_control: an OOM, or the cgroup's
  // removal). v2 (`eventControl` empty): an inotify watch for changes of
  // `path` (memory.events).
  virtual Result<CgroupEventSource> watchEvents(const std::string& path, const std::string& eventControl) const = 0;

  // First integer of the file ("max" reads as -1).
  Result<int64_t> readInt(const std::string& path) const;
  // Value of `key` in a "key value" file (memory.events, cpu.stat, ...).
  Result<int64_t> readKey(const std::string& path, const std::string& key) const;
  // Members of the cgroup `dir` (cgroup.procs); none when unreadable.
  std::vector<pid_t> procs(const std::string& dir) const;
};

// The kernel's cgroupfs (one shared stateless instance).
std::shared_ptr<CgroupFs> realCgroupFs();

namespace cgroupfs {

Status writeFile(const std::string& path, const std::string& value);
Result<std::string> readFile(const std::string& path);
Result<int64_t> readInt(const std::string& path);
Result<int64_t> readKey(const std::string& path, const std::string& key);
bool exists(const std::string& path);
Status makeDir(const std::string& path);
// rmdir, one attempt (a missing directory is success).
Status removeDir(const std::string& path);
std::vector<pid_t> procs(const std::string& dir);
std::vector<std::string> subdirs(const std::string& dir);

// Parsers shared by the real filesystem and its twin.
Result<int64_t> parseInt(const std::string& path, const std::string& text);
Result<int64_t> parseKey(const std::string& path, const std::string& text, const std::string& key);
std::vector<pid_t> parsePids(const std::string& text);

}  // namespace cgroupfs
}  // namespace allot
