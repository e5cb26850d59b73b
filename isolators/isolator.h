// Isolator: one kind of per-executor isolation (a cgroup controller, a
// network namespace, a seccomp filter). The agent runs the enabled
// isolators (chosen by --isolation, see isolator_table.h) in a fixed order
// for every executor ("container"), and cleanup in reverse order:
//
//   recover(known)                         once at agent start
//   prepare(id, config, &spec)             before the process starts
//   <launcher starts the process>
//   isolate(id, pid)                       right after it starts
//   watch(id, onLimitation)                a limit hit ends the container
//   update(id, limits)                     whenever its tasks change
//   usage(id)                              on demand
//   reapJob(id) on a worker (until it succeeds), then cleanup(id)
//                                          after it ended (or failed)
//
// Contract: every method is idempotent per container id and safe to call on
// a container whose process already exited or whose files vanished;
// cleanup() must leave nothing behind (cgroup directories, namespaces) once
// the reap job succeeded, and after a failed prepare(). Errors name the file, value and errno that
// failed. Thread: the agent's io_context thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/asio.h"
#include "base/result.h"
#include "base/worker_pool.h"
#include "base/uring_poller.h"
#include "isolators/network_options.h"
#include "launcher/launcher.h"
#include "proto/allot.pb.h"
#include "proto/resources.h"

namespace allot {

namespace images {
class LayerStore;
}

// Names one container (one executor) on this agent. name() is its cgroup
// directory name, the same name its sandbox and checkpoint carry:
// containerName() of base/files.h, injective and stable across restarts.
struct ContainerId {
  std::string frameworkId;
  std::string executorId;
  std::string name() const;  // containerName(frameworkId, executorId)
  bool operator==(const ContainerId&) const = default;
};

// A path mounted inside a container's root filesystem (filesystem/linux).
struct ContainerVolume {
  std::string hostPath;       // absolute (allowed by --volume-allow) or relative to the sandbox
  std::string containerPath;  // absolute, inside the root
  bool readOnly = false;
};

// What an isolator is told about a container when it prepares it (and, for
// the containers that outlive an agent restart, at recover()).
struct ContainerConfig {
  // Implicit: most isolators need the limits only.
  ContainerConfig(Resources limits = {}, std::string sandbox = {})
      : limits(std::move(limits)), sandbox(std::move(sandbox)) {}
  Resources limits;     // the executor's resources plus all its tasks'
  std::string sandbox;  // its sandbox directory, absolute; made before prepare()
  // filesystem/linux: the image's layers (blob digests as 64 hex, bottom
  // first; empty: the host's filesystem, today's behaviour), the volumes,
  // and the working directory inside the root ("": the sandbox).
  std::vector<std::string> imageLayers;
  std::vector<ContainerVolume> volumes;
  std::string workingDir;
  // The built-in executor: it stays on the node's filesystem and each of
  // its tasks enters the root (the plan goes in its environment,
  // launcher/rootfs_env.h); false: the executor process itself enters it.
  bool rootForTasksOnly = false;
};

// A container the agent still knows at recover(), with what it was
// prepared with (its limits as of the agent's last checkpoint).
struct KnownContainer {
  KnownContainer(ContainerId id, ContainerConfig config = {}) : id(std::move(id)), config(std::move(config)) {}
  ContainerId id;
  ContainerConfig config;
};

// Why a container must end: a limit it hit.
struct Limitation {
  wire::Reason reason = wire::REASON_NONE;  // REASON_MEMORY_LIMIT, _PIDS_LIMIT, _DISK_LIMIT
  std::string message;                      // "memory limit 64 MiB exceeded (OOM kill)"
  wire::ResourceUsage usage;                // at the time, when known
};

// Settings shared by the isolators; addIsolatorFlags() (isolator_table.h)
// exposes them as allot-agent flags (--cgroups-root, --cgroups-enable-cfs,
// block I/O limits...). An isolator that needs a setting of its own adds it
// here and its flag in addIsolatorFlags().
// The largest v2 cpu.weight: allot's executors come first on the node.
constexpr int64_t kDefaultRootCpuWeight = 10000;
// The agent's own leaf <root>/agent, inside the root beside its executors
// (100 per cpu): the kernel's default (one cpu's worth) unless set; a
// heavy leaf costs the executors (docs/hog-analysis.md).
constexpr int64_t kDefaultAgentCpuWeight = 0;

struct IsolatorOptions {
  UringPoller* poller = nullptr;      // for OOM and other kernel events; required
  std::string cgroupsRoot = "allot";  // the agent's subtree in every hierarchy
  bool cfsQuota = false;              // hard CPU cap from cpus (--cgroups-enable-cfs)
  std::string blkioLimits;            // per-executor "MAJ:MIN rbps=N wbps=N riops=N wiops=N"
  int64_t blkioWeight = 0;            // 0: proportional to cpus
  int64_t pidsMax = 0;                // 0: derived from the executor's resources
  // CPU weight of the agent's cgroup root against the system's other
  // top-level groups, v2 scale 1..10000 (v1: * 1024 / 100); 0 leaves it
  // alone. See CgroupLayer and docs/hog-analysis.md.
  int64_t rootCpuWeight = kDefaultRootCpuWeight;
  // CPU weight of <root>/agent against the executors beside it, same scale
  // (--cgroups-agent-cpu-weight); 0 leaves the kernel's default (100).
  int64_t agentCpuWeight = kDefaultAgentCpuWeight;
  // Where executors join v1 cgroups (a cgroup.procs write per launch), set
  // the cgroup2 mount option favordynmods at start so those writes do not
  // wait for RCU grace periods (favorDynamicMigrations, cgroup_host.h).
  bool favorDynmods = true;
  NetworkOptions network;  // network/netns (--network-*)
  // The seccomp isolator's profile file ("": the built-in default profile).
  std::string seccompProfile;
  // The agent's loop, outliving the isolators, for isolators that work off
  // it and post results back (network/netns's warm pool). Optional.
  asio::io_context* io = nullptr;
  // For isolators that work off the loop on a schedule (disk/du's periodic
  // usage check): a worker pool that outlives the isolators. Required by
  // disk/du (with io).
  WorkerPool* pool = nullptr;
  double diskWatchIntervalS = 15;  // disk/du: seconds between checks of a sandbox
  // filesystem/linux: the agent's layer store (required by it; outlives the
  // isolators), where executors' writable layers go, the host paths volumes
  // may name (--volume-allow, comma-separated), and the host paths every
  // root gets read-only (the executor's files, the agent's socket).
  images::LayerStore* imageStore = nullptr;
  std::string rootfsDir;
  std::string volumeAllow;
  std::vector<RootfsBind> hostBinds;
  // The resolv.conf of roots in a network namespace of their own (the
  // host's may name a resolver on the host's loopback).
  std::string resolvConf = "/etc/resolv.conf";
};

class Isolator {
 public:
  virtual ~Isolator() = default;

  virtual std::string_view name() const = 0;

  // Adopts the containers the agent still knows (from its checkpoint) and
  // destroys any other container this isolator finds under its root.
  virtual Status recover(const std::vector<KnownContainer>& known) = 0;
  virtual Status prepare(const ContainerId& id, const ContainerConfig& config, ChildSetup* setup) = 0;
  virtual Status isolate(const ContainerId& id, pid_t pid) = 0;
  // Arms limit notifications; onLimitation fires at most once per container.
  virtual Status watch(const ContainerId& id, std::function<void(const Limitation&)> onLimitation) = 0;
  virtual Status update(const ContainerId& id, const Resources& limits) = 0;
  // Adds what this isolator measures to *usage (leaves other fields alone).
  virtual Status usage(const ContainerId& id, wire::ResourceUsage* usage) = 0;
  // Drops the container and removes what is left of its kernel objects,
  // without waiting for the kernel (it runs on the loop): after the reap
  // job succeeded, or a failed prepare(), nothing is left to wait for. An
  // Error when something is still busy (a process the reap did not end).
  virtual Status cleanup(const ContainerId& id) = 0;
  // Blocking work that cleanup() needs done first (kill every process of the
  // container, wait for the kernel to let go of it), as a job the agent runs
  // on its worker pool before it calls cleanup() on the loop, again later
  // while it fails. The job runs beside the loop: it may touch the kernel
  // only, never this isolator's state. nullptr (the default): nothing to do
  // off the loop.
  virtual std::function<Status()> reapJob(const ContainerId&) { return nullptr; }
};

// The base of an isolator that only sets the child up: prepare() fills
// ChildSetup (a namespace to enter, a filter to install) and the kernel
// ties what it set up to the executor's processes, so there is no
// per-container state to recover, isolate, watch, update, measure or clean
// up. Those are no-ops here, final: an isolator that needs one of them keeps
// state and derives from Isolator.
class SetupOnlyIsolator : public Isolator {
 public:
  Status recover(const std::vector<KnownContainer>&) final { return okStatus(); }
  Status isolate(const ContainerId&, pid_t) final { return okStatus(); }
  Status watch(const ContainerId&, std::function<void(const Limitation&)>) final { return okStatus(); }
  Status update(const ContainerId&, const Resources&) final { return okStatus(); }
  Status usage(const ContainerId&, wire::ResourceUsage*) final { return okStatus(); }
  Status cleanup(const ContainerId&) final { return okStatus(); }
};

}  // namespace allot
