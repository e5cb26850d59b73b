#include "isolators/isolator_table.h"
#include "isolators/cgroup_values.h"

#include <set>

#include "base/files.h"
#include "base/log.h"
#include "isolators/cgroup_host.h"
#include "isolators/cgroup_layer.h"
#include "isolators/cgroup_isolators.h"
#include "isolators/cgroupfs.h"
#include "isolators/disk_isolator.h"
#include "isolators/namespaces_isolator.h"
#include "isolators/network_isolator.h"
#include "isolators/solaris_project.h"
#include "isolators/seccomp_isolator.h"
#include "isolators/filesystem_isolator.h"

namespace allot {
namespace {

constexpr IsolatorEntry kIsolatorTable[] = {
    {"cgroups/cpu", "cpu", makeCpuIsolator},
    {"cgroups/mem", "memory", makeMemIsolator},
    {"cgroups/blkio", "io", makeBlkioIsolator},
    {"cgroups/pids", "pids", makePidsIsolator},
    {"cgroups/cpuset", "cpuset", makeCpusetIsolator},
    {"disk/du", nullptr, [](const IsolatorContext& c) { return makeDiskIsolatorFromOptions(c.options); }},
    {"network/netns", nullptr, [](const IsolatorContext& c) { return makeNetworkIsolator(c.options.network, c.options.io); }},
    {"solaris/project", nullptr,
     [](const IsolatorContext& c) { return makeSolarisProjectIsolator(makeHostSolarisPlatform(), c.options.pidsMax); }},
    {"namespaces/pid", nullptr, makePidNamespaceIsolator},
    {"seccomp", nullptr, makeSeccompIsolator},
    {"filesystem/linux", nullptr, [](const IsolatorContext& c) { return makeFilesystemIsolator(c.options); }},
};

std::string validNames() {
  std::string out;
  for (const auto& e : isolatorTable()) out += (out.empty() ? "" : ", ") + std::string(e.name);
  return out;
}

Result<std::set<std::string>> parseNames(std::string_view isolation) {
  std::set<std::string> names;
  size_t start = 0;
  while (start <= isolation.size()) {
    size_t comma = isolation.find(',', start);
    if (comma == std::string_view::npos) comma = isolation.size();
    std::string name(isolation.substr(start, comma - start));
    start = comma + 1;
    while (!name.empty() && name.front() == ' ') name.erase(0, 1);
    while (!name.empty() && name.back() == ' ') name.pop_back();
    if (name.empty()) continue;
    bool known = false;
    for (const auto& e : isolatorTable()) known |= name == e.name;
    if (!known) return Error{"unknown isolator '" + name + "' (valid: " + validNames() + ")"};
    names.insert(name);
  }
  return names;
}

// Why this host cannot enforce `entry`'s controller, or "" when it can.
std::string whyNot(const CgroupHost& host, const IsolatorEntry& entry) {
  if (!entry.controller) return "";
  std::string c = entry.controller;
  if (host.versionOf(c) != CgroupVersion::kNone) return "";
  std::string v1 = c == "io" ? "blkio" : c;
  return std::string(entry.name) + " needs the " + c + " controller, which is neither mounted as a v1 hierarchy (" +
         v1 + ") nor enabled for the agent's cgroup2 subtree on this " + cgroupModeName(host.mode) + " host";
}

}  // namespace

std::string ContainerId::name() const { return containerName(frameworkId, executorId); }

void addIsolatorFlags(Flags& flags, IsolatorOptions* o) {
  flags.addString("cgroups-root", &o->cgroupsRoot,
                  "the agent's cgroup subtree (in every hierarchy) holding one cgroup per executor "
                  "(default: allot, or allot.<work dir with / as .> for a work dir other than the default)");
  flags.addBool("cgroups-enable-cfs", &o->cfsQuota,
                "cap each executor's CPU time at its cpus (CFS quota / cpu.max), not just weight it");
  flags.addString("cgroups-blkio-limits", &o->blkioLimits,
                  "per-executor block I/O throttles: 'MAJ:MIN rbps=N wbps=N riops=N wiops=N[; ...]'");
  flags.addInt("cgroups-blkio-weight", &o->blkioWeight,
               "block I/O weight of every executor (0: 100 per cpu; v1 10..1000, v2 1..10000)");
  flags.addInt("cgroups-root-cpu-weight", &o->rootCpuWeight,
               "CPU weight of the agent's cgroup root against the rest of the system, 1..10000 on the v2 "
               "scale (v1 cpu.shares: * 1024 / 100); 0: leave it to whoever made the root "
               "(not written when the root is the agent's own delegated cgroup: systemd's CPUWeight= decides)");
  flags.addInt("cgroups-agent-cpu-weight", &o->agentCpuWeight,
               "CPU weight of the agent's own cgroup <root>/agent against its executors (each 100 per cpu), "
               "1..10000 on the v2 scale (v1 cpu.shares: * 1024 / 100); 0 (default): the kernel's default, "
               "one cpu's worth. A heavy leaf inflates the root's load where the agent runs, so the kernel gives "
               "the root less weight on the CPUs where its executors run (docs/hog-analysis.md)");
  flags.addBool("cgroups-favor-dynmods", &o->favorDynmods,
                "where executors join v1 cgroups (hybrid or legacy hosts), reconfigure the host's cgroup2 mount "
                "with favordynmods (Linux 6.0+) so that a launch's cgroup.procs writes do not wait for RCU grace "
                "periods; forks and exits on the host get slightly dearer (docs/decisions.md)");
  flags.addInt("cgroups-pids-max", &o->pidsMax, "process cap per executor (0: 1024 per cpu, 256..32768)");
  flags.addDouble("disk-watch-interval", &o->diskWatchIntervalS,
                   "disk/du: seconds between measurements of each executor's sandbox against its disk "
                   "resource (an executor past it ends with REASON_DISK_LIMIT)");
  addNetworkFlags(flags, &o->network);
  flags.addString("seccomp-profile", &o->seccompProfile,
                  "seccomp profile file for the seccomp isolator (format: isolators/seccomp_profile.h; "
                  "default: allot's built-in profile)");
  flags.addString("volume-allow", &o->volumeAllow,
                  "filesystem/linux: comma-separated host paths (each with everything below it) that tasks' "
                  "volumes may mount; empty: only sandbox-relative volumes");
  flags.addString("resolv-conf", &o->resolvConf,
                  "filesystem/linux: the resolv.conf executors with a network namespace of their own "
                  "(network/netns) get at /etc/resolv.conf (the others get the host's)");
}

std::span<const IsolatorEntry> isolatorTable() { return kIsolatorTable; }

std::vector<std::string> knownIsolators() {
  std::vector<std::string> out;
  for (const auto& e : isolatorTable()) out.push_back(e.name);
  return out;
}

Result<std::vector<std::unique_ptr<Isolator>>> createIsolatorsOn(const CgroupHost& host,
                                                                 std::string_view isolation,
                                                                 const IsolatorOptions& options) {
  auto names = parseNames(isolation);
  if (!names) return names.error();
  std::set<std::string> controllers;
  for (const auto& e : isolatorTable()) {
    if (!names->count(e.name)) continue;
    if (std::string why = whyNot(host, e); !why.empty()) return Error{why};
    if (e.controller) controllers.insert(e.controller);
  }
  if (options.cgroupsRoot.empty() || options.cgroupsRoot.find("..") != std::string::npos ||
      options.cgroupsRoot.front() == '/') {
    return Error{"--cgroups-root '" + options.cgroupsRoot + "' must be a relative path without '..'"};
  }
  if (host.v2.empty() && !host.v1.count("freezer")) {
    return Error{"no cgroup can hold the executors: neither a cgroup2 mount nor a v1 freezer hierarchy"};
  }
  if (options.rootCpuWeight < 0 || options.rootCpuWeight > 10000) {
    return Error{"--cgroups-root-cpu-weight " + std::to_string(options.rootCpuWeight) + " is not in 0..10000"};
  }
  if (options.agentCpuWeight < 0 || options.agentCpuWeight > 10000) {
    return Error{"--cgroups-agent-cpu-weight " + std::to_string(options.agentCpuWeight) + " is not in 0..10000"};
  }
  auto layer = std::make_shared<CgroupLayer>(host, options.cgroupsRoot, controllers, options.rootCpuWeight,
                                             options.agentCpuWeight);
  if (Status st = layer->setUp(); !st) {
    return Error{"setting up the agent's cgroups: " + st.error().describe(), st.error().errnum};
  }
  std::vector<std::unique_ptr<Isolator>> out;
  out.push_back(makeContainmentIsolator(layer));
  for (const auto& e : isolatorTable()) {
    if (!names->count(e.name)) continue;
    auto made = e.make(IsolatorContext{options, host, e.controller ? layer : nullptr});
    if (!made) return made.error();
    out.push_back(std::move(*made));
  }
  return out;
}

namespace {

// Whether a child joins some cgroup by writing cgroup.procs (a v1
// hierarchy: a controller's, or the freezer that tracks executors when no
// cgroup2 is mounted) rather than being born in it (CLONE_INTO_CGROUP).
bool joinsByWrite(const CgroupHost& host, const std::set<std::string>& names) {
  if (host.v2.empty()) return true;
  for (const auto& e : isolatorTable()) {
    if (names.count(e.name) && e.controller && host.versionOf(e.controller) == CgroupVersion::kV1) return true;
  }
  return false;
}

void favorDynmodsFor(const CgroupHost& host, const std::set<std::string>& names) {
  if (!joinsByWrite(host, names)) return;
  auto favored = favorDynamicMigrations(host);
  if (!favored) {
    LOG_WARNING("cgroups: could not set favordynmods (each launch's v1 cgroup joins wait for RCU grace periods): "
                << favored.error().describe());
  } else if (*favored) {
    LOG_INFO("cgroups: favordynmods is set on the cgroup2 mount " << host.v2
                                                                  << ": v1 cgroup joins wait for no RCU grace period");
  } else {
    LOG_INFO("cgroups: favordynmods is not available here (Linux 6.0+ with a cgroup2 mount in the host's cgroup "
             "namespace): each launch's v1 cgroup joins wait for an RCU grace period");
  }
}

}  // namespace

Result<std::vector<std::unique_ptr<Isolator>>> createIsolators(std::string_view isolation,
                                                               const IsolatorOptions& options) {
  auto names = parseNames(isolation);
  if (!names) return names.error();
  auto host = detectCgroupHost(options.cgroupsRoot);
  if (!host) return host.error();
  static bool logged = false;
  if (!logged) LOG_INFO("cgroups: " << host->describe());
  logged = true;
  if (options.favorDynmods) favorDynmodsFor(*host, *names);
  return createIsolatorsOn(*host, isolation, options);
}

}  // namespace allot
