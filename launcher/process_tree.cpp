#include "launcher/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <unordered_map>

#include "base/unique_fd.h"

namespace allot {
namespace {

struct ProcEntry {
  pid_t ppid = 0;
  pid_t session = 0;
  uint64_t startTime = 0;
};

// Parses /proc/<pid>/stat: the fields after "(comm)" are state (3), ppid
// (4), pgrp (5), session (6), ..., starttime (22). comm may hold spaces
// and parentheses, so parsing starts after its last ')'.
std::optional<ProcEntry> readStat(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char buf[1024];
  ssize_t n;
  do {
    n = ::read(fd.get(), buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  std::string stat(buf, static_cast<size_t>(n));
  size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return std::nullopt;
  const char* p = stat.c_str() + close + 2;
  ProcEntry e;
  char* end = nullptr;
  for (int field = 3; field <= 22; ++field) {
    while (*p == ' ') ++p;
    if (*p == '\0') return std::nullopt;
    if (field == 3) {
      ++p;  // state: one character
      continue;
    }
    unsigned long long v = std::strtoull(p, &end, 10);
    if (end == p) return std::nullopt;
    if (field == 4) e.ppid = static_cast<pid_t>(v);
    if (field == 6) e.session = static_cast<pid_t>(v);
    if (field == 22) e.startTime = v;
    p = end;
  }
  return e;
}

std::unordered_map<pid_t, ProcEntry> readProcessTable() {
  std::unordered_map<pid_t, ProcEntry> table;
  DIR* dir = ::opendir("/proc");
  if (!dir) return table;
  while (dirent* d = ::readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(d->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    if (auto e = readStat(static_cast<pid_t>(pid))) table[static_cast<pid_t>(pid)] = *e;
  }
  ::closedir(dir);
  return table;
}

// Everything below `root` in `table`: descendants by parent pid (to a fixed
// point: the table is unordered) and, when root leads its session, the
// session's members.
std::set<pid_t> treeOf(pid_t root, bool leadsSession, const std::unordered_map<pid_t, ProcEntry>& table) {
  std::set<pid_t> tree{root};
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto& [pid, e] : table) {
      if (!tree.count(pid) && tree.count(e.ppid)) grew = tree.insert(pid).second || grew;
    }
  }
  if (leadsSession) {
    for (const auto& [pid, e] : table) {
      if (e.session == root) tree.insert(pid);
    }
  }
  tree.erase(root);
  return tree;
}

int pidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

bool pidfdSignal(int pidfd, int sig) { return ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0; }

}  // namespace

std::optional<uint64_t> processStartTimeOf(pid_t pid) {
  auto e = readStat(pid);
  if (!e) return std::nullopt;
  return e->startTime;
}

bool signalIfSame(pid_t pid, uint64_t startTime, int sig) {
  if (pid <= 1 || pid == ::getpid()) return false;
  UniqueFd fd(pidfdOpen(pid));
  if (!fd) return false;
  // The pidfd names whatever process has this pid now; it is the scanned
  // one only if it started when the scan saw it start.
  auto now = readStat(pid);
  if (!now || now->startTime != startTime) return false;
  return pidfdSignal(fd.get(), sig);
}

size_t killProcessTree(int rootPidfd, pid_t root, int sig) {
  if (root <= 1 || root == ::getpid()) return 0;
  size_t signalled = 0;
  std::set<std::pair<pid_t, uint64_t>> done;
  bool leadsSession = false;
  uint64_t rootStart = 0;
  for (int round = 0; round < kTreeKillRoundsMax; ++round) {
    auto table = readProcessTable();
    size_t before = signalled;
    auto it = table.find(root);
    if (round == 0) {
      // The first scan is read while the root is alive (its children still
      // point at it). The root is signalled right after it, before anything
      // under it: killed last, a root that waits for its children (a
      // shell's `wait`) could see them die and exit on its own before its
      // signal came, and its exit would not say it was killed.
      leadsSession = it != table.end() && it->second.session == root;
      if (it != table.end()) rootStart = it->second.startTime;
      if (rootPidfd >= 0 && pidfdSignal(rootPidfd, sig)) ++signalled;
    } else if (it != table.end() && it->second.startTime != rootStart) {
      // The root's pid names another process now: its children and its
      // session are not the root's (while any member of the root's session
      // lived, the pid could not be reused).
      break;
    }
    // Later rounds keep the session found in the first: the root may be
    // reaped by then while members of its session still live.
    for (pid_t pid : treeOf(root, leadsSession, table)) {
      uint64_t start = table[pid].startTime;
      if (!done.insert({pid, start}).second) continue;
      if (signalIfSame(pid, start, sig)) ++signalled;
    }
    if (signalled == before && round > 0) break;
  }
  return signalled;
}

size_t killProcessTree(pid_t root, std::optional<uint64_t> rootStartTime, int sig) {
  if (root <= 1 || root == ::getpid()) return 0;
  UniqueFd fd(pidfdOpen(root));
  if (!fd) return 0;
  if (rootStartTime && processStartTimeOf(root) != rootStartTime) return 0;
  return killProcessTree(fd.get(), root, sig);
}

}  // namespace allot
