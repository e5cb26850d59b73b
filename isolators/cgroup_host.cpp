#include "isolators/cgroup_host.h"

#include <fcntl.h>
#include <libcgroup.h>
#include <sys/mount.h>
#include <sys/xattr.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/unique_fd.h"
#include "isolators/cgroupfs.h"

namespace allot {
namespace {

const char* kV1Controllers[] = {"cpu", "cpuacct", "memory", "blkio", "pids", "freezer", "cpuset"};

std::string v1Name(const std::string& controller) { return controller == "io" ? "blkio" : controller; }

// The cgroup2 lines of /proc/self/mountinfo: mount point -> super options
// ("... mount-point ... - cgroup2 source rw,nsdelegate").
std::map<std::string, std::string> cgroup2Mounts() {
  std::map<std::string, std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string id, parent, devices, root, mountPoint, type, source, options;
    fields >> id >> parent >> devices >> root >> mountPoint;
    tail >> type >> source >> options;
    out.emplace(mountPoint, options);
  }
  return out;
}

std::set<std::string> splitOptions(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  std::string option;
  while (std::getline(in, option, ',')) out.insert(option);
  return out;
}

std::string findCgroup2Mount() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // "... mount-point ... - fstype source options"
    auto dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, devices, root, mountPoint;
    fields >> id >> parent >> devices >> root >> mountPoint;
    return mountPoint;
  }
  return "";
}

std::string ownV2Cgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

// systemd marks a delegated unit's cgroup with trusted.delegate=1 (and
// user.delegate=1 from v253 on).
bool delegatedBySystemd(const std::string& dir) {
  for (const char* name : {"trusted.delegate", "user.delegate"}) {
    char value[8] = {};
    if (getxattr(dir.c_str(), name, value, sizeof value - 1) == 1 && value[0] == '1') return true;
  }
  return false;
}

// "4:cpu,cpuacct:/path" lines: every v1 controller of the line -> path.
std::map<std::string, std::string> ownV1Cgroups() {
  std::map<std::string, std::string> out;
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    auto first = line.find(':');
    auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos || second == first + 1) continue;  // v2 ("0::/x") or malformed
    std::istringstream names(line.substr(first + 1, second - first - 1));
    std::string name;
    while (std::getline(names, name, ',')) out[name] = line.substr(second + 1);
  }
  return out;
}

std::set<std::string> wordSet(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  std::string w;
  while (in >> w) out.insert(w);
  return out;
}

}  // namespace

CgroupVersion CgroupHost::versionOf(const std::string& controller) const {
  if (!v2.empty() && v2Usable.count(controller)) return CgroupVersion::kV2;
  if (v1.count(v1Name(controller))) return CgroupVersion::kV1;
  return CgroupVersion::kNone;
}

std::string CgroupHost::hierarchyOf(const std::string& controller) const {
  switch (versionOf(controller)) {
    case CgroupVersion::kV2: return v2;
    case CgroupVersion::kV1: return v1.at(v1Name(controller));
    case CgroupVersion::kNone: return "";
  }
  return "";
}

std::string CgroupHost::describe() const {
  std::string out = std::string(cgroupModeName(mode)) + " (v1:";
  for (const auto& [c, m] : v1) out += " " + c;
  out += v1.empty() ? " none" : "";
  out += "; v2: " + (v2.empty() ? std::string("none") : v2) + " usable:";
  for (const auto& c : v2Usable) out += " " + c;
  out += v2Usable.empty() ? " none" : "";
  return out + ")";
}

const char* cgroupModeName(CgroupMode mode) {
  switch (mode) {
    case CgroupMode::kLegacy: return "legacy cgroups v1";
    case CgroupMode::kHybrid: return "hybrid cgroups v1+v2";
    case CgroupMode::kUnified: return "unified cgroups v2";
  }
  return "?";
}

Result<bool> favorDynamicMigrations(const CgroupHost& host) {
  constexpr const char* kOption = "favordynmods";
  if (host.v2.empty()) return false;
  // The cgroup2 mount options this kernel knows (Documentation/admin-guide/cgroup-v2.rst).
  auto features = cgroupfs::readFile("/sys/kernel/cgroup/features");
  std::set<std::string> known = features ? wordSet(*features) : std::set<std::string>{};
  if (!known.count(kOption)) return false;
  auto current = splitOptions(cgroup2Mounts()[host.v2]);
  if (current.count(kOption)) return true;
  UniqueFd context(fspick(AT_FDCWD, host.v2.c_str(), FSPICK_CLOEXEC));
  if (!context) return Error::fromErrno("fspick " + host.v2);
  // A reconfiguration sets every cgroup2 root option anew: the ones set
  // now are passed again (rw, seclabel and the like are not cgroup2's).
  current.insert(kOption);
  for (const auto& option : current) {
    if (!known.count(option)) continue;
    if (fsconfig(context.get(), FSCONFIG_SET_FLAG, option.c_str(), nullptr, 0) != 0) {
      return Error::fromErrno("fsconfig " + option + " on " + host.v2);
    }
  }
  if (fsconfig(context.get(), FSCONFIG_CMD_RECONFIGURE, nullptr, nullptr, 0) != 0) {
    return Error::fromErrno("reconfiguring the cgroup2 mount " + host.v2 + " with " + kOption);
  }
  return splitOptions(cgroup2Mounts()[host.v2]).count(kOption) > 0;
}

Result<CgroupHost> detectCgroupHost(const std::string& root) {
  CgroupHost host;
  host.fs = realCgroupFs();
  host.agentV2Cgroup = ownV2Cgroup();
  host.agentV1Cgroups = ownV1Cgroups();
  // libcgroup reads the mount table correctly for v1 hierarchies (including
  // co-mounted ones like cpu,cpuacct); see docs/decisions.md.
  // libcgroup 2.0.2 also answers with the cgroup2 mount for a controller
  // that only v2 has (seen in the vm suite): those are not v1 hierarchies.
  host.v2 = findCgroup2Mount();
  if (cgroup_init() == 0) {
    for (const char* c : kV1Controllers) {
      char* mount = nullptr;
      if (cgroup_get_subsys_mount_point(c, &mount) == 0 && mount && host.v2 != mount) host.v1[c] = mount;
      free(mount);
    }
  }
  if (!host.v2.empty()) {
    // The delegation boundary: what the root's parent enables for it. On a
    // unified host the top level lists its controllers in cgroup.controllers
    // and enables them in cgroup.subtree_control.
    std::string parent = host.v2;
    auto slash = root.rfind('/');
    if (slash != std::string::npos) parent += "/" + root.substr(0, slash);
    host.rootDelegated = delegatedBySystemd(host.v2 + "/" + root);
    auto enabled = cgroupfs::readFile(parent + "/cgroup.subtree_control");
    if (enabled) host.v2Usable = wordSet(*enabled);
    // A v1 hierarchy that holds a controller keeps it away from v2.
    for (auto it = host.v2Usable.begin(); it != host.v2Usable.end();) {
      it = host.v1.count(v1Name(*it)) ? host.v2Usable.erase(it) : std::next(it);
    }
  }
  if (host.v1.empty() && host.v2.empty()) return Error{"no cgroup hierarchy is mounted"};
  host.mode = host.v1.empty() ? CgroupMode::kUnified
              : host.v2.empty() ? CgroupMode::kLegacy
                                : CgroupMode::kHybrid;
  return host;
}

}  // namespace allot
