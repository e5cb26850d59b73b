// The cgroup isolators: one per controller, all sharing one CgroupLayer (the
// container's directories, created by the first prepare(); the containment
// isolator's reapJob() kills every process in them and removes them off the
// loop, and cleanup() only checks that nothing is left). Each isolator writes only its own controller's files,
// v1 or v2 as the host decided (CgroupHost::versionOf).
//
//   cgroups/cpu    cpu.shares | cpu.weight, optional CFS quota | cpu.max;
//                  usage: cpu time (cpuacct.usage | cpu.stat usage_usec)
//   cgroups/mem    memory.limit_in_bytes | memory.max (+ swap off, v2
//                  memory.oom.group); OOM as an event (v1 eventfd on
//                  memory.oom_control, v2 inotify on memory.events) through
//                  the UringPoller; usage: current and peak bytes
//   cgroups/blkio  blkio.weight | io.weight and per-device throttles;
//                  usage: bytes read and written
//   cgroups/pids   pids.max; usage: process count
//   cgroups/cpuset exclusive cores for whole-cpu executors, the rest shared
//                  (cpuset_isolator.cpp; off unless listed)
#pragma once

#include <memory>
#include <string>

#include "isolators/cgroup_layer.h"
#include "isolators/isolator.h"
#include "isolators/isolator_table.h"

namespace allot {

class CgroupIsolator : public Isolator {
 public:
  CgroupIsolator(std::shared_ptr<CgroupLayer> layer, std::string controller);

  Status recover(const std::vector<KnownContainer>& known) override;
  Status prepare(const ContainerId& id, const ContainerConfig& config, ChildSetup* setup) override;
  Status isolate(const ContainerId& id, pid_t pid) override;
  Status watch(const ContainerId& id, std::function<void(const Limitation&)> onLimitation) override;
  Status update(const ContainerId& id, const Resources& limits) override;
  Status cleanup(const ContainerId& id) override;

 protected:
  // Writes this controller's limits (prepare and update).
  virtual Status apply(const ContainerId& id, const Resources& limits) = 0;
  // Drops per-container state (cleanup, before the directories go).
  virtual void forget(const ContainerId&) {}

  const CgroupFs& fs() const { return layer_->fs(); }
  bool v2() const { return layer_->host().versionOf(controller_) == CgroupVersion::kV2; }
  // A file of this controller in the container's directory.
  std::string file(const ContainerId& id, const std::string& name) const {
    return layer_->dir(id, controller_) + "/" + name;
  }

  std::shared_ptr<CgroupLayer> layer_;
  std::string controller_;
};

// The table's factories (isolator_table.cpp). cgroups/cpu checks CFS
// bandwidth control when asked for quotas (CgroupLayer weighs the agent's
// root); cgroups/mem needs the event poller.
Result<std::unique_ptr<Isolator>> makeCpuIsolator(const IsolatorContext& context);
Result<std::unique_ptr<Isolator>> makeMemIsolator(const IsolatorContext& context);
Result<std::unique_ptr<Isolator>> makeBlkioIsolator(const IsolatorContext& context);
Result<std::unique_ptr<Isolator>> makeCpusetIsolator(const IsolatorContext& context);
Result<std::unique_ptr<Isolator>> makePidsIsolator(const IsolatorContext& context);
// The tracking cgroup every executor gets (run first, whatever --isolation).
std::unique_ptr<Isolator> makeContainmentIsolator(std::shared_ptr<CgroupLayer> layer);

}  // namespace allot
