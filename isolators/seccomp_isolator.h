// The seccomp isolator (--isolation seccomp): every executor, and so every
// task it starts (filters are inherited across fork and execve), runs under
// one seccomp filter: --seccomp-profile FILE, or allot's default profile
// (isolators/seccomp_profile.h). The profile is compiled once when the
// agent starts; prepare() hands the BPF program to the launcher, which
// installs it last, after no_new_privs, before execve. A SetupOnlyIsolator
// (isolator.h): no per-container state, the filter goes with the processes.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "isolators/isolator.h"
#include "isolators/isolator_table.h"

namespace allot {

// Builds the isolator from a profile file ("" : the default profile).
// Errors name the file and line.
Result<std::unique_ptr<Isolator>> makeSeccompIsolatorFromFile(const std::string& profilePath);

// The table's factory: IsolatorOptions::seccompProfile (--seccomp-profile).
Result<std::unique_ptr<Isolator>> makeSeccompIsolator(const IsolatorContext& context);

}  // namespace allot
