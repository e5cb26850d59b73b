// CgroupLayer: the per-container cgroup directories every cgroup isolator
// shares, in every hierarchy they use, plus the whole-container kill, and
// where the agent's own process sits and what the root weighs.
//
// Layout: <hierarchy>/<root>/<container name> (root is --cgroups-root).
// Every container has a tracking cgroup even with no controller in use
// (cgroup2 when mounted, else the v1 freezer): see hierarchies(). On
// v2 one directory holds every controller; the agent enables controllers
// only in <root>/cgroup.subtree_control. On v1 each controller's hierarchy
// gets a directory, plus freezer (to kill a container without racing its
// forks) and cpuacct (cpu time).
//
// CPU weights (docs/hog-analysis.md says why). With the cpu controller in
// use:
//   <root>            weight rootCpuWeight (v2 scale 1..10000; v1 cpu.shares
//                     = weight * 1024 / 100, systemd's conversion), written
//                     unless the root is the cgroup the agent was started in
//                     or another unit's delegated cgroup (CgroupHost::
//                     rootDelegated: its weight is the unit's CPUWeight=);
//                     0 leaves it alone
//   <root>/agent      the agent's own process, weight agentCpuWeight (same
//                     scale; 0, the default: the kernel's default, one
//                     cpu's worth). Not written when the agent stays in its
//                     own unit (its CPUWeight= decides). A heavy leaf is
//                     not the default: its load makes the kernel give the
//                     root less weight on the CPUs where executors run
//                     (docs/hog-analysis.md, "The agent's loop and the
//                     CPU").
//   <root>/<name>     each executor, weighted by its cpus (cgroups/cpu)
// The agent also moves into <root>/agent on v2 when it sits in <root> and
// enables v2 controllers there (no processes in inner nodes). It moves back
// to where it came from when the layer is destroyed (not out of a root it
// was started in). A root that is another unit's delegated cgroup
// (allot-executors.service) holds executors only: the agent stays in its
// own unit and never removes that root; the unit's placeholder process
// moves into <root>/holder.
//
// Thread: the agent's io_context thread, which it never blocks, except
// reap(), which blocks for the kernel (a freeze, a kill, an rmdir retried
// on EBUSY; bounded to ~3 s) and may run on any thread: it reads only what
// the constructor set.
#pragma once

#include <sys/types.h>

#include <cstdint>

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
  // The agent's leaf under the root (never a container's name: those
  // always hold a '.').
  static constexpr const char* kAgentLeaf = "agent";
  // Where the processes a service manager keeps in a delegated root (the
  // placeholder of allot-executors.service) move, so that controllers can
  // be enabled there (no processes in inner nodes). Not a container.
  static constexpr const char* kHolderLeaf = "holder";

  // `controllers`: v2 names of the controllers the enabled isolators use.
  // `rootCpuWeight`: see above (0: leave the root's weight alone);
  // `agentCpuWeight`: <root>/agent's (0: the kernel's default).
  CgroupLayer(CgroupHost host, std::string root, std::set<std::string> controllers,
              int64_t rootCpuWeight = 0, int64_t agentCpuWeight = 0);
  // Moves the agent back where it came from, then removes the agent's root
  // in each hierarchy when no container is left in it (executors that
  // outlive the agent keep it, and their cgroups).
  ~CgroupLayer();

  const CgroupHost& host() const { return host_; }
  const CgroupFs& fs() const { return *host_.fs; }
  const std::string& root() const { return root_; }
  // Creates the agent's root in each hierarchy (idempotent), weights it,
  // places the agent's process (see above) and enables v2 controllers.
  Status setUp();

  // This container's directory for `controller`.
  std::string dir(const ContainerId& id, const std::string& controller) const;
  // Creates the container's directories and tells the launcher how the
  // child joins them (v2: a directory fd for CLONE_INTO_CGROUP; v1: the
  // cgroup.procs files). Idempotent.
  Status create(const ContainerId& id, ChildSetup* setup);
  // Makes sure `pid` is in every directory (a process that already exited
  // is fine). Closes the v2 directory fd. A no-op after create() handed the
  // joining to the child's setup (the launcher joins it before exec, or the
  // launch fails): the child may still be on its way (Launcher::start()).
  Status join(const ContainerId& id, pid_t pid);
  // Forgets the container and removes what reap() left, without waiting
  // for the kernel: when a directory is still there, one kill (cgroup.kill
  // or SIGKILL to each member) and one rmdir, then an Error naming the
  // directory that is still busy. Idempotent; a container that never
  // existed, or one reap() already removed, is fine.
  Status destroy(const ContainerId& id);
  // The same for a directory name found under the root.
  Status destroyByName(const std::string& name);
  // Kills every process of container `name` and removes its directories,
  // waiting for the kernel (a freeze, the kill, an rmdir retried on EBUSY;
  // bounded to ~3 s). An Error when processes are left after that (one in
  // uninterruptible sleep): the caller retries later. Thread-safe: the
  // agent's worker pool runs it before destroy(), which then finds nothing
  // left; recovery runs it for unknown containers.
  Status reap(const std::string& name) const;
  // Container names present under the root in any hierarchy.
  std::set<std::string> existing() const;
  // Processes in the container (from the first hierarchy).
  std::vector<pid_t> processes(const ContainerId& id) const;

 private:
  std::vector<std::string> hierarchies() const;  // distinct, v1 freezer/cpuacct included
  Status killV2(const std::string& dir) const;
  Status killV1(const std::string& name) const;
  void signalAll(const std::string& name) const;  // no wait
  Status removeDir(const std::string& dir) const;
  Status prepareCpuset(const std::string& dir);
  // The agent's own cgroup in hierarchy `h` ("" when unknown).
  std::string agentCgroupIn(const std::string& h) const;
  // Hierarchies where the agent moves into <root>/agent.
  std::vector<std::string> agentHierarchies() const;
  Status weighRoot();
  Status placeAgent();
  Status weighAgent();
  Status enableV2Controllers();  // moves a unit's processes to <root>/holder first
  Status moveUnitProcesses();

  CgroupHost host_;
  std::string root_;
  std::set<std::string> controllers_;
  int64_t rootCpuWeight_;
  int64_t agentCpuWeight_;
  std::map<std::string, UniqueFd> dirFds_;  // v2 directory fds until join()
  std::set<std::string> created_;           // containers whose directories create() made
  std::set<std::string> handedToChild_;     // create() gave their joining to a child's setup
  // Hierarchy -> the cgroup the agent left for <root>/agent (to go back).
  std::map<std::string, std::string> agentCameFrom_;
};

}  // namespace allot
