// The isolator table: every isolator allot knows, in the fixed order they
// run (cleanup in reverse), and the --isolation flag that picks among them.
//
// Adding an isolator: write its factory (IsolatorFactory) and add one line
// to kIsolatorTable in isolator_table.cpp, at the place in the run order
// where it belongs. A cgroup isolator names the (v2) controller it needs and
// gets the shared CgroupLayer; any other passes nullptr and gets none.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/flags.h"
#include "base/result.h"
#include "isolators/cgroup_host.h"
#include "isolators/isolator.h"

namespace allot {

class CgroupLayer;

// What a factory builds an isolator from. Lives for the factory call only.
struct IsolatorContext {
  const IsolatorOptions& options;
  const CgroupHost& host;
  // The agent's per-container cgroups, shared by the cgroup isolators; null
  // for an entry that names no controller.
  std::shared_ptr<CgroupLayer> cgroups;
};

// Builds one isolator, or says why this host or these options cannot have
// it ("--cgroups-enable-cfs needs CFS bandwidth control...").
using IsolatorFactory = Result<std::unique_ptr<Isolator>> (*)(const IsolatorContext& context);

struct IsolatorEntry {
  const char* name;        // as written in --isolation
  const char* controller;  // cgroup controller (v2 name) it needs; nullptr: none
  IsolatorFactory make;
};

// The table, in run order.
std::span<const IsolatorEntry> isolatorTable();

void addIsolatorFlags(Flags& flags, IsolatorOptions* options);

// Names accepted by --isolation, in run order.
std::vector<std::string> knownIsolators();

// Builds the isolators named in `isolation` ("cgroups/cpu,cgroups/mem"),
// ordered by the table whatever order the flag used, after the
// "containment" isolator that every agent runs first (even for an empty
// `isolation`): each executor's own cgroup, killed whole when it ends. Unknown names are an
// error listing the valid ones; a name this host cannot enforce (controller
// missing, cgroup mode unsupported) is an error saying why.
Result<std::vector<std::unique_ptr<Isolator>>> createIsolators(std::string_view isolation,
                                                               const IsolatorOptions& options);

// The same on a given host (the detected one, or a temp-dir twin from
// twinCgroupHost() in unit tests).
Result<std::vector<std::unique_ptr<Isolator>>> createIsolatorsOn(const CgroupHost& host,
                                                                 std::string_view isolation,
                                                                 const IsolatorOptions& options);

}  // namespace allot
