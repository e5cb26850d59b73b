#include "isolators/cgroupfs_twin.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <filesystem>
#include <fstream>

namespace allot {
namespace {

namespace fsys = std::filesystem;

std::string baseName(const std::string& path) { return path.substr(path.rfind('/') + 1); }
std::string parentOf(const std::string& path) { return path.substr(0, path.rfind('/')); }

bool isDir(const std::string& path) {
  std::error_code ec;
  return fsys::is_directory(path, ec);
}

Status writeReal(const std::string& path, const std::string& value) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return Error{"open " + path, ENOENT};
  out << value;
  return out ? okStatus() : Error{"write '" + value + "' to " + path, EIO};
}

}  // namespace

const std::set<std::string>& DirCgroupFs::kernelFiles() {
  static const std::set<std::string> files = {
      "cgroup.procs", "cgroup.kill", "cgroup.subtree_control", "cgroup.controllers",
      "cgroup.event_control", "cgroup.events", "cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us",
      "cpu.weight", "cpu.max", "cpu.stat", "cpuacct.usage", "memory.limit_in_bytes",
      "memory.memsw.limit_in_bytes", "memory.usage_in_bytes", "memory.max_usage_in_bytes",
      "memory.oom_control", "memory.max", "memory.oom.group", "memory.swap.max", "memory.current",
      "memory.peak", "memory.events", "blkio.weight", "blkio.bfq.weight",
      "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
      "blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device",
      "blkio.throttle.io_service_bytes", "io.weight", "io.max", "io.stat", "pids.max", "pids.current",
      "pids.events", "cpuset.cpus", "cpuset.mems", "cpuset.cpus.effective", "cpuset.cpus.partition",
      "freezer.state"};
  return files;
}

bool DirCgroupFs::isKernelFile(const std::string& path) const {
  std::string name = baseName(path);
  return kernelFiles().count(name) && !absent_.count(name) && isDir(parentOf(path));
}

Status DirCgroupFs::writeFile(const std::string& path, const std::string& value) const {
  bool real = fsys::exists(path);
  if (!real && !isKernelFile(path)) return Error{"open " + path, ENOENT};
  std::string name = baseName(path);
  if (name == "cgroup.kill" && value == "1") {
    std::string left;
    for (pid_t pid : procs(parentOf(path))) left += unkillable_.count(pid) ? std::to_string(pid) + "\n" : "";
    return writeReal(parentOf(path) + "/cgroup.procs", left);
  }
  if (name == "cgroup.procs") {
    // A process is in one cgroup per hierarchy: joining one leaves the
    // others of the same hierarchy (the first directory below dir()).
    long pid = std::strtol(value.c_str(), nullptr, 10);
    if (pid > 0 && path.rfind(dir_ + "/", 0) == 0) {
      std::string rest = path.substr(dir_.size() + 1);
      dropPid(dir_ + "/" + rest.substr(0, rest.find('/')), static_cast<pid_t>(pid));
    }
    auto current = readFile(path);
    std::string text = current ? *current : "";
    return writeReal(path, text + value + "\n");
  }
  return writeReal(path, value);
}

Result<std::string> DirCgroupFs::readFile(const std::string& path) const {
  auto text = cgroupfs::readFile(path);
  if (text || !isKernelFile(path)) return text;
  // The effective cpus of a cgroup that sets none are its parent's.
  if (baseName(path) == "cpuset.cpus.effective" && parentOf(path) != dir_) {
    return readFile(parentOf(parentOf(path)) + "/cpuset.cpus.effective");
  }
  return std::string();
}

bool DirCgroupFs::exists(const std::string& path) const {
  return fsys::exists(path) ? !absent_.count(baseName(path)) : isKernelFile(path);
}

Status DirCgroupFs::makeDir(const std::string& path) const { return cgroupfs::makeDir(path); }

Status DirCgroupFs::removeDir(const std::string& path) const {
  if (!isDir(path)) return okStatus();
  if (!subdirs(path).empty() || !procs(path).empty()) return Error{"rmdir " + path, EBUSY};
  std::error_code ec;
  fsys::remove_all(path, ec);
  if (ec) return Error{"rmdir " + path + ": " + ec.message()};
  return okStatus();
}

std::vector<std::string> DirCgroupFs::subdirs(const std::string& dir) const { return cgroupfs::subdirs(dir); }

void DirCgroupFs::dropPid(const std::string& dir, pid_t pid) const {
  std::string procsFile = dir + "/cgroup.procs";
  if (fsys::exists(procsFile)) {
    auto members = procs(dir);
    if (std::find(members.begin(), members.end(), pid) != members.end()) {
      std::string text;
      for (pid_t p : members) text += p == pid ? "" : std::to_string(p) + "\n";
      (void)writeReal(procsFile, text);
    }
  }
  for (const auto& sub : subdirs(dir)) dropPid(dir + "/" + sub, pid);
}

Status DirCgroupFs::signal(pid_t pid, int sig) const {
  signals_.emplace_back(pid, sig);
  if (sig == SIGKILL && !unkillable_.count(pid)) dropPid(dir_, pid);
  return okStatus();
}

Result<CgroupEventSource> DirCgroupFs::watchEvents(const std::string& path, const std::string& eventControl) const {
  if (!exists(path)) return Error{"open " + path, ENOENT};
  if (!fsys::exists(path)) {
    auto text = readFile(path);
    if (Status st = writeReal(path, text ? *text : ""); !st) return st.error();
  }
  if (eventControl.empty()) return realCgroupFs()->watchEvents(path, "");
  if (!exists(eventControl)) return Error{"open " + eventControl, ENOENT};
  CgroupEventSource source;
  source.fd = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (source.fd.get() < 0) return Error::fromErrno("eventfd");
  UniqueFd dup(fcntl(source.fd.get(), F_DUPFD_CLOEXEC, 0));
  if (dup.get() < 0) return Error::fromErrno("dup eventfd");
  eventFds_.emplace_back(path, std::move(dup));
  return source;
}

Status DirCgroupFs::fireEvent(const std::string& path) {
  bool fired = false;
  for (const auto& [file, fd] : eventFds_) {
    uint64_t one = 1;
    if (file == path && ::write(fd.get(), &one, sizeof one) == sizeof one) fired = true;
  }
  return fired ? okStatus() : Error{"no event registered on " + path, ENOENT};
}

CgroupHost twinCgroupHost(std::shared_ptr<DirCgroupFs> fs, CgroupMode mode) {
  static const char* kV1[] = {"cpu", "cpuacct", "memory", "blkio", "pids", "freezer", "cpuset"};
  CgroupHost host;
  host.mode = mode;
  const std::string& dir = fs->dir();
  if (mode != CgroupMode::kUnified) {
    for (const char* c : kV1) {
      host.v1[c] = dir + "/" + c;
      (void)fs->makeDir(host.v1[c]);
    }
    (void)fs->writeFile(host.v1["cpuset"] + "/cpuset.cpus", "0-3");
    (void)fs->writeFile(host.v1["cpuset"] + "/cpuset.mems", "0");
  }
  if (mode != CgroupMode::kLegacy) {
    host.v2 = dir + "/unified";
    (void)fs->makeDir(host.v2);
    if (mode == CgroupMode::kUnified) {
      host.v2Usable = {"cpu", "cpuset", "io", "memory", "pids"};
      (void)fs->writeFile(host.v2 + "/cpuset.cpus.effective", "0-3");
    }
  }
  host.fs = std::move(fs);
  return host;
}

}  // namespace allot
