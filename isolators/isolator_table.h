// The isolator table: every isolator allot knows, in the fixed order they
// run (cleanup in reverse), and the --isolation flag that picks among them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/flags.h"
#include "base/result.h"
#include "base/uring_poller.h"
#include "isolators/isolator.h"

namespace allot {

// Settings shared by the isolators; addIsolatorFlags() exposes them as
// allot-agent flags (--cgroups-root, --cgroups-enable-cfs, block I/O limits...).
struct IsolatorOptions {
  UringPoller* poller = nullptr;      // for OOM and other kernel events; required
  std::string cgroupsRoot = "allot";  // the agent's subtree in every hierarchy
  bool cfsQuota = false;              // hard CPU cap from cpus (--cgroups-enable-cfs)
  std::string blkioLimits;            // per-executor "MAJ:MIN rbps=N wbps=N riops=N wiops=N"
  int64_t blkioWeight = 0;            // 0: proportional to cpus
  int64_t pidsMax = 0;                // 0: derived from the executor's resources
  // The cpus this node offers: the agent's cgroup root gets the CPU weight
  // of that many cpus, so all executors together weigh like the share of
  // the machine they were given, not like one process (0: leave it).
  double rootCpus = 0;
};

void addIsolatorFlags(Flags& flags, IsolatorOptions* options);

// Names accepted by --isolation, in run order.
std::vector<std::string> knownIsolators();

// Builds the isolators named in `isolation` ("cgroups/cpu,cgroups/mem"),
// ordered by the table whatever order the flag used. Unknown names are an
// error listing the valid ones; a name this host cannot enforce (controller
// missing, cgroup mode unsupported) is an error saying why.
Result<std::vector<std::unique_ptr<Isolator>>> createIsolators(std::string_view isolation,
                                                               const IsolatorOptions& options);

// Added for tests: the same on a given host (e.g. fakeCgroupHost() in a temp
// dir) instead of the detected one.
struct CgroupHost;
Result<std::vector<std::unique_ptr<Isolator>>> createIsolatorsOn(const CgroupHost& host,
                                                                 std::string_view isolation,
                                                                 const IsolatorOptions& options);

}  // namespace allot
