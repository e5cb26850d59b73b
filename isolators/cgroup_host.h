// CgroupHost: which cgroup hierarchies this host has and where each
// controller lives, detected once at agent start (legacy v1, hybrid, or
// unified v2). Isolators use v2 for a controller when the agent's v2 root
// can use it, else the v1 hierarchy, else they refuse to start.
//
// The host also carries the CgroupFs the cgroup code goes through: the
// kernel's (detectCgroupHost), or a temp-dir twin in unit tests
// (twinCgroupHost in cgroupfs_twin.h).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "base/result.h"
#include "isolators/cgroupfs.h"

namespace allot {

enum class CgroupMode { kLegacy, kHybrid, kUnified };
enum class CgroupVersion { kNone, kV1, kV2 };

struct CgroupHost {
  CgroupMode mode = CgroupMode::kLegacy;
  std::map<std::string, std::string> v1;  // controller -> mount point
  std::string v2;                          // cgroup2 mount point, "" when none
  // Controllers the agent may enable below its v2 root (those enabled in
  // the root's parent's cgroup.subtree_control: the delegation boundary).
  std::set<std::string> v2Usable;
  // The agent's own cgroup2 path ("/allot" or "/system.slice/x"), "" when
  // unknown: setUp moves the agent out of its root when it sits in it.
  std::string agentV2Cgroup;
  // The agent's own v1 cgroup per controller ("cpu" -> "/" or
  // "/system.slice/allot-agent.service"), from /proc/self/cgroup; a
  // controller missing here is unknown.
  std::map<std::string, std::string> agentV1Cgroups;
  // The v2 root carries a service manager's delegation mark (systemd's
  // trusted.delegate xattr: a unit with Delegate=yes, such as
  // allot-executors.service). Its directory and attributes are the unit's:
  // the agent never weighs or removes it, and stays out of it when it is
  // not the agent's own cgroup.
  bool rootDelegated = false;
  std::shared_ptr<CgroupFs> fs;

  // v2 names: "cpu", "memory", "io", "pids", "cpuset"; v1 "blkio" is "io".
  CgroupVersion versionOf(const std::string& controller) const;
  // The directory of the hierarchy holding `controller`.
  std::string hierarchyOf(const std::string& controller) const;
  std::string describe() const;
};

// Detects the real host: v1 mounts through libcgroup, cgroup2 from
// /proc/self/mountinfo. `root` is the agent's subtree name (--cgroups-root).
Result<CgroupHost> detectCgroupHost(const std::string& root);

const char* cgroupModeName(CgroupMode mode);

// Makes moving a process into a cgroup (a cgroup.procs write, how a child
// joins its v1 cgroups) cheap: the cgroup2 superblock option favordynmods
// (Linux 6.0+). It acts on every hierarchy, v1 included: the lock it
// changes is the kernel's one cgroup_threadgroup_rwsem. Without it, each
// cgroup.procs write takes that rwsem for writing, which first waits for an
// RCU grace period (rcu_sync), stretched to 10-20 ms while network
// namespaces and veths are torn down; with it the rwsem stays in its slow
// mode (no grace period to wait for), and from 6.18 on the write locks only
// the moving process's thread group. The price: forks and exits take the
// rwsem's slower path (docs/decisions.md). Reconfigures the cgroup2 mount at
// host.v2 with its current cgroup2 options plus favordynmods (fspick +
// fsconfig; the mount's own flags stay). True when the option is in effect
// afterwards; false, with no error, when no cgroup2 is mounted, the kernel
// lacks the option, or (outside the host's cgroup namespace) the kernel
// ignored it. Real kernel only: the twin hosts of unit tests never call it.
Result<bool> favorDynamicMigrations(const CgroupHost& host);

}  // namespace allot
