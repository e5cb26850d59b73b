#include "isolators/isolator_table.h"
#include "isolators/cgroup_values.h"

#include <set>

#include "base/log.h"
#include "isolators/cgroup_host.h"
#include "isolators/cgroup_isolators.h"
#include "isolators/cgroupfs.h"

namespace allot {
namespace {

// The table: name, the controller it needs (v2 name), in run order.
struct Entry {
  const char* name;
  const char* controller;
};
constexpr Entry kTable[] = {
    {"cgroups/cpu", "cpu"},
    {"cgroups/mem", "memory"},
    {"cgroups/blkio", "io"},
    {"cgroups/pids", "pids"},
    {"cgroups/cpuset", "cpuset"},
};

std::string validNames() {
  std::string out;
  for (const auto& e : kTable) out += (out.empty() ? "" : ", ") + std::string(e.name);
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
    for (const auto& e : kTable) known |= name == e.name;
    if (!known) return Error{"unknown isolator '" + name + "' (valid: " + validNames() + ")"};
    names.insert(name);
  }
  return names;
}

// Why this host cannot enforce `entry`, or "" when it can.
std::string whyNot(const CgroupHost& host, const Entry& entry, const IsolatorOptions& options) {
  std::string c = entry.controller;
  if (host.versionOf(c) == CgroupVersion::kNone) {
    std::string v1 = c == "io" ? "blkio" : c;
    return std::string(entry.name) + " needs the " + c + " controller, which is neither mounted as a v1 hierarchy (" +
           v1 + ") nor enabled for the agent's cgroup2 subtree on this " + cgroupModeName(host.mode) + " host";
  }
  if (c == "cpu" && options.cfsQuota && host.versionOf("cpu") == CgroupVersion::kV1 && !host.fake &&
      !cgroupfs::exists(host.v1.at("cpu") + "/cpu.cfs_quota_us")) {
    return "--cgroups-enable-cfs needs CFS bandwidth control (cpu.cfs_quota_us), "
           "which this kernel was built without";
  }
  if (c == "memory" && !options.poller) return "cgroups/mem needs an event poller for OOM events";
  return "";
}

}  // namespace

std::string ContainerId::name() const {
  std::string out = frameworkId + "." + executorId;
  for (char& ch : out) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
              ch == '_' || ch == '.';
    if (!ok) ch = '_';
  }
  if (out.front() == '.') out.front() = '_';  // never "." or ".." or hidden
  return out;
}

void addIsolatorFlags(Flags& flags, IsolatorOptions* o) {
  flags.addString("cgroups-root", &o->cgroupsRoot,
                  "the agent's cgroup subtree (in every hierarchy) holding one cgroup per executor");
  flags.addBool("cgroups-enable-cfs", &o->cfsQuota,
                "cap each executor's CPU time at its cpus (CFS quota / cpu.max), not just weight it");
  flags.addString("cgroups-blkio-limits", &o->blkioLimits,
                  "per-executor block I/O throttles: 'MAJ:MIN rbps=N wbps=N riops=N wiops=N[; ...]'");
  flags.addInt("cgroups-blkio-weight", &o->blkioWeight,
               "block I/O weight of every executor (0: 100 per cpu; v1 10..1000, v2 1..10000)");
  flags.addInt("cgroups-pids-max", &o->pidsMax, "process cap per executor (0: 1024 per cpu, 256..32768)");
}

std::vector<std::string> knownIsolators() {
  std::vector<std::string> out;
  for (const auto& e : kTable) out.push_back(e.name);
  return out;
}

Result<std::vector<std::unique_ptr<Isolator>>> createIsolatorsOn(const CgroupHost& host,
                                                                 std::string_view isolation,
                                                                 const IsolatorOptions& options) {
  auto names = parseNames(isolation);
  if (!names) return names.error();
  std::set<std::string> controllers;
  for (const auto& e : kTable) {
    if (!names->count(e.name)) continue;
    if (std::string why = whyNot(host, e, options); !why.empty()) return Error{why};
    controllers.insert(e.controller);
  }
  std::vector<std::unique_ptr<Isolator>> out;
  if (controllers.empty()) return out;
  if (options.cgroupsRoot.empty() || options.cgroupsRoot.find("..") != std::string::npos ||
      options.cgroupsRoot.front() == '/') {
    return Error{"--cgroups-root '" + options.cgroupsRoot + "' must be a relative path without '..'"};
  }
  auto layer = std::make_shared<CgroupLayer>(host, options.cgroupsRoot, controllers);
  if (Status st = layer->setUp(); !st) return Error{"setting up the agent's cgroups: " + st.error().describe(),
                                                     st.error().errnum};
  if (names->count("cgroups/cpu") && options.rootCpus > 0) {
    std::string root = host.hierarchyOf("cpu") + "/" + options.cgroupsRoot;
    bool v2 = host.versionOf("cpu") == CgroupVersion::kV2;
    Status st = v2 ? cgroupfs::writeFile(root + "/cpu.weight", std::to_string(cpuWeight(options.rootCpus)))
                   : cgroupfs::writeFile(root + "/cpu.shares", std::to_string(cpuShares(options.rootCpus)));
    if (!st) return Error{"weighting the agent's cgroup root: " + st.error().describe(), st.error().errnum};
  }
  for (const auto& e : kTable) {
    if (!names->count(e.name)) continue;
    std::string n = e.name;
    if (n == "cgroups/cpu") out.push_back(makeCpuIsolator(layer, options.cfsQuota));
    if (n == "cgroups/mem") out.push_back(makeMemIsolator(layer, options.poller));
    if (n == "cgroups/pids") out.push_back(makePidsIsolator(layer, options.pidsMax));
    if (n == "cgroups/cpuset") out.push_back(makeCpusetIsolator(layer));
    if (n == "cgroups/blkio") {
      auto made = makeBlkioIsolator(layer, options);
      if (!made) return made.error();
      out.push_back(std::move(*made));
    }
  }
  return out;
}

Result<std::vector<std::unique_ptr<Isolator>>> createIsolators(std::string_view isolation,
                                                               const IsolatorOptions& options) {
  if (auto names = parseNames(isolation); !names) return names.error();
  auto host = detectCgroupHost(options.cgroupsRoot);
  if (!host) return host.error();
  static bool logged = false;
  if (!logged) LOG_INFO("cgroups: " << host->describe());
  logged = true;
  return createIsolatorsOn(*host, isolation, options);
}

}  // namespace allot
