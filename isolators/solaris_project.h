// solaris/project: maps an executor's resources onto a Solaris project's
// resource controls, where the platform has projects (Solaris, illumos):
//
//   prepare   projadd -c "allot executor <container>"
//                     -K "project.cpu-shares=(privileged,S,none)"
//                     -K "project.max-lwps=(privileged,L,deny)"
//                     -K "rcap.max-rss=B" allot.<container>
//   isolate   newtask -p allot.<container> -c <pid>   (the executor joins it)
//   update    projmod -s -K ... (the project database, read by rcapd for
//             rcap.max-rss) and prctl -r on the live project for
//             cpu-shares and max-lwps
//   cleanup   pkill -9 -J allot.<container>; projdel allot.<container>
//   recover   projdel of every allot.* project the agent no longer knows
//
// S = 100 per cpu (1..65535, FSS shares), B = mem MiB in bytes, L = the
// pids cap cgroups/pids would use (--cgroups-pids-max, else 1024 per cpu).
// The shim talks to the platform through SolarisPlatform; on a platform
// without projects (Linux) the isolator refuses to start with a message
// saying so. Thread: the agent's io_context thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "isolators/isolator.h"

namespace allot {

class SolarisPlatform {
 public:
  virtual ~SolarisPlatform() = default;
  // "" when the platform has projects, else why not (for the refusal).
  virtual std::string whyNoProjects() const = 0;
  // Runs one administrative command to completion (argv[0] absolute).
  virtual Status run(const std::vector<std::string>& argv) = 0;
  // Names of the projects in the project database (/etc/project).
  virtual Result<std::vector<std::string>> projects() = 0;
};

// This host: Solaris/illumos commands under /usr/bin and /usr/sbin.
std::unique_ptr<SolarisPlatform> makeHostSolarisPlatform();

// Fails with the platform's reason when it has no projects.
Result<std::unique_ptr<Isolator>> makeSolarisProjectIsolator(std::unique_ptr<SolarisPlatform> platform,
                                                             int64_t pidsMaxConfigured);

// "allot.<container>" (the project of an executor).
std::string solarisProjectName(const ContainerId& id);

}  // namespace allot
