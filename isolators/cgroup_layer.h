// CgroupLayer: the per-container cgroup directories every cgroup isolator
// shares, in every hierarchy they use, plus the whole-container kill.
//
// Layout: <hierarchy>/<root>/<container name> (root is --cgroups-root).
// Every container has a tracking cgroup even with no controller in use
// (cgroup2 when mounted, else the v1 freezer): see hierarchies(). On
// v2 one directory holds every controller; the agent enables controllers
// only in <root>/cgroup.subtree_control and, if it lives in <root> itself,
// first moves into the leaf <root>/agent (no processes in inner nodes).
// On v1 each controller's hierarchy gets a directory, plus freezer (to kill
// a container without racing its forks) and cpuacct (cpu time).
//
// Thread: the agent's io_context thread, except reap(), which blocks for
// the kernel (a freeze, a kill, an rmdir retried on EBUSY; bounded to
// ~3 s) and may run on any thread: it reads only what the constructor set.
#pragma once

#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "isolators/cgroup_host.h"
#include "isolators/isolator.h"

namespace allot {

class CgroupLayer {
 public:
  // `controllers`: v2 names of the controllers the enabled isolators use.
  CgroupLayer(CgroupHost host, std::string root, std::set<std::string> controllers);
  // Removes the agent's root in each hierarchy when no container is left
  // in it (executors that outlive the agent keep it, and their cgroups).
  ~CgroupLayer();

  const CgroupHost& host() const { return host_; }
  const CgroupFs& fs() const { return *host_.fs; }
  const std::string& root() const { return root_; }
  // Creates the agent's root in each hierarchy (idempotent).
  Status setUp();

  // This container's directory for `controller`.
  std::string dir(const ContainerId& id, const std::string& controller) const;
  // Creates the container's directories and tells the launcher how the
  // child joins them (v2: a directory fd for CLONE_INTO_CGROUP; v1: the
  // cgroup.procs files). Idempotent.
  Status create(const ContainerId& id, ChildSetup* setup);
  // Makes sure `pid` is in every directory (a no-op when it was born there;
  // a process that already exited is fine). Closes the v2 directory fd.
  Status join(const ContainerId& id, pid_t pid);
  // Kills every process of the container and removes its directories.
  // Idempotent; a container that never existed is fine.
  Status destroy(const ContainerId& id);
  // The same for a directory name found under the root (recovery).
  Status destroyByName(const std::string& name);
  // The blocking part of destroy: kills every process of container `name`
  // and removes its directories. Thread-safe (a worker thread runs it
  // before destroy(), which then finds nothing left).
  Status reap(const std::string& name) const;
  // Container names present under the root in any hierarchy.
  std::set<std::string> existing() const;
  // Processes in the container (from the first hierarchy).
  std::vector<pid_t> processes(const ContainerId& id) const;

 private:
  std::vector<std::string> hierarchies() const;  // distinct, v1 freezer/cpuacct included
  Status killV2(const std::string& dir) const;
  Status killV1(const std::string& name) const;
  Status removeDir(const std::string& dir) const;
  Status prepareCpuset(const std::string& dir);

  CgroupHost host_;
  std::string root_;
  std::set<std::string> controllers_;
  std::map<std::string, UniqueFd> dirFds_;  // v2 directory fds until join()
};

}  // namespace allot
