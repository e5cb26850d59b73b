// What this node offers: cpus, memory and disk, detected from the kernel
// unless the operator wrote them in --resources, and the --attributes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "proto/allot.pb.h"
#include "proto/resources.h"

namespace allot {

// Memory left to the node itself when mem is detected: the larger of
// kMemReserveMinMib and kMemReserveFraction of the total.
inline constexpr double kMemReserveMinMib = 1024;
inline constexpr double kMemReserveFraction = 0.1;
inline constexpr double kDiskReserveFraction = 0.1;

// The node as the kernel describes it (or as a test fakes it).
struct NodeFacts {
  int cpus = 0;                 // CPUs this process may run on
  double memTotalMib = 0;       // MemTotal of /proc/meminfo
  double diskAvailableMib = 0;  // free space of the work dir's file system
};

// Reads sched_getaffinity, /proc/meminfo and statvfs(workDir).
Result<NodeFacts> readNodeFacts(const std::string& workDir);

// The agent's total resources: every entry of `flagText` (the --resources
// text form) as written, and cpus, mem and disk from `facts` where the text
// does not name them (mem and disk minus a reserve). Errors name the
// malformed entry.
Result<Resources> agentResources(std::string_view flagText, const NodeFacts& facts);

// Parses --attributes "rack:r1;zone:a". Names must be non-empty and unique.
Result<std::vector<wire::Attribute>> parseAttributes(std::string_view text);

}  // namespace allot
