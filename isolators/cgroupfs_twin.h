// DirCgroupFs: CgroupFs's twin in a temp directory, for unit tests of the
// cgroup code without root (leveldb's in-memory Env, on disk so that the
// real UringPoller can watch its files with inotify).
//
// It behaves like cgroupfs for what allot's cgroup code does:
// - every directory has the kernel's interface files (kernelFiles()): they
//   exist() and read as "" until written; withoutFile() takes one away
//   (a kernel without that feature), and writing it then fails ENOENT;
// - writing cgroup.procs adds the pid (and takes it out of every other
//   cgroup.procs of that hierarchy), writing "1" to cgroup.kill empties
//   cgroup.procs, signal(SIGKILL) removes the pid from every cgroup.procs;
// - removeDir() answers EBUSY while the directory has members or children,
//   and takes the interface files with it.
// - watchEvents() gives v2 the real inotify watch on the twin's file (made
//   on disk first); v1 gets an eventfd that fireEvent() signals, as the
//   kernel does on an OOM.
// - unkillable(pid): a process no kill ends (uninterruptible sleep): it
//   stays in every cgroup.procs through SIGKILL and cgroup.kill.
// signals() records every signal sent. Paths are real paths under dir().
// Thread: one test thread.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "isolators/cgroup_host.h"
#include "isolators/cgroupfs.h"

namespace allot {

class DirCgroupFs final : public CgroupFs {
 public:
  explicit DirCgroupFs(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const { return dir_; }
  void withoutFile(const std::string& name) { absent_.insert(name); }
  void unkillable(pid_t pid) { unkillable_.insert(pid); }
  const std::vector<std::pair<pid_t, int>>& signals() const { return signals_; }
  static const std::set<std::string>& kernelFiles();

  Status writeFile(const std::string& path, const std::string& value) const override;
  Result<std::string> readFile(const std::string& path) const override;
  bool exists(const std::string& path) const override;
  Status makeDir(const std::string& path) const override;
  Status removeDir(const std::string& path) const override;
  std::vector<std::string> subdirs(const std::string& dir) const override;
  Status signal(pid_t pid, int sig) const override;
  Result<CgroupEventSource> watchEvents(const std::string& path, const std::string& eventControl) const override;

  // Signals every v1 eventfd registered on `path` (memory.oom_control): an
  // OOM as the kernel reports it. An Error when none is registered.
  Status fireEvent(const std::string& path);

 private:
  bool isKernelFile(const std::string& path) const;
  void dropPid(const std::string& dir, pid_t pid) const;

  std::string dir_;
  std::set<std::string> absent_;
  std::set<pid_t> unkillable_;
  mutable std::vector<std::pair<pid_t, int>> signals_;
  mutable std::vector<std::pair<std::string, UniqueFd>> eventFds_;  // v1 registrations (dups)
};

// A host laid out under `fs->dir()` like /sys/fs/cgroup: v1 controllers as
// subdirectories (legacy, hybrid), a cgroup2 hierarchy in "unified" (hybrid:
// no controller usable, as on Debian 12's hybrid layout; unified: all). The
// top cpuset offers cpus 0-3 and memory node 0.
CgroupHost twinCgroupHost(std::shared_ptr<DirCgroupFs> fs, CgroupMode mode);

}  // namespace allot
