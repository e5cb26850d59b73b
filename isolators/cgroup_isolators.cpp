#include "isolators/cgroup_isolators.h"

#include <sstream>

#include "base/log.h"
#include "isolators/cgroup_values.h"
#include "isolators/cgroupfs.h"

namespace allot {

CgroupIsolator::CgroupIsolator(std::shared_ptr<CgroupLayer> layer, std::string controller)
    : layer_(std::move(layer)), controller_(std::move(controller)) {}

Status CgroupIsolator::recover(const std::vector<KnownContainer>& known) {
  std::set<std::string> keep;
  for (const auto& k : known) keep.insert(k.id.name());
  Status result;
  for (const auto& name : layer_->existing()) {
    if (keep.count(name)) continue;
    // An orphan (the agent died mid-launch, or its checkpoint lost it): the
    // directory name is all we have, and all destroying needs.
    // Blocking (reap waits for the kernel): recovery runs once, before the
    // agent registers or takes any executor.
    LOG_INFO("destroying unknown container cgroup " << name);
    Status st = layer_->reap(name);
    if (st) st = layer_->destroyByName(name);
    if (!st && result) result = st;
  }
  return result;
}

Status CgroupIsolator::prepare(const ContainerId& id, const ContainerConfig& config, ChildSetup* setup) {
  if (Status st = layer_->create(id, setup); !st) return st;
  return apply(id, config.limits);
}

Status CgroupIsolator::isolate(const ContainerId& id, pid_t pid) { return layer_->join(id, pid); }

Status CgroupIsolator::watch(const ContainerId&, std::function<void(const Limitation&)>) {
  return okStatus();
}

Status CgroupIsolator::update(const ContainerId& id, const Resources& limits) {
  return apply(id, limits);
}

Status CgroupIsolator::cleanup(const ContainerId& id) {
  forget(id);
  return layer_->destroy(id);
}

namespace {

class CpuIsolator final : public CgroupIsolator {
 public:
  CpuIsolator(std::shared_ptr<CgroupLayer> layer, bool cfsQuota)
      : CgroupIsolator(std::move(layer), "cpu"), cfsQuota_(cfsQuota) {}
  std::string_view name() const override { return "cgroups/cpu"; }

  Status usage(const ContainerId& id, wire::ResourceUsage* usage) override {
    if (v2()) {
      auto us = fs().readKey(file(id, "cpu.stat"), "usage_usec");
      if (!us) return us.error();
      usage->set_cpu_time_s(static_cast<double>(*us) / 1e6);
      return okStatus();
    }
    if (!layer_->host().v1.count("cpuacct")) return okStatus();
    auto ns = fs().readInt(layer_->dir(id, "cpuacct") + "/cpuacct.usage");
    if (!ns) return ns.error();
    usage->set_cpu_time_s(static_cast<double>(*ns) / 1e9);
    return okStatus();
  }

 protected:
  Status apply(const ContainerId& id, const Resources& limits) override {
    double cpus = limits.scalar("cpus");
    if (v2()) {
      if (Status st = fs().writeFile(file(id, "cpu.weight"), std::to_string(cpuWeight(cpus))); !st) {
        return st;
      }
      if (!cfsQuota_) return okStatus();
      int64_t quota = cfsQuotaUs(cpus);
      return fs().writeFile(file(id, "cpu.max"), (quota < 0 ? std::string("max") : std::to_string(quota)) +
                                                          " " + std::to_string(kCfsPeriodUs));
    }
    if (Status st = fs().writeFile(file(id, "cpu.shares"), std::to_string(cpuShares(cpus))); !st) {
      return st;
    }
    if (!cfsQuota_) return okStatus();
    if (Status st = fs().writeFile(file(id, "cpu.cfs_period_us"), std::to_string(kCfsPeriodUs)); !st) {
      return st;
    }
    return fs().writeFile(file(id, "cpu.cfs_quota_us"), std::to_string(cfsQuotaUs(cpus)));
  }

 private:
  bool cfsQuota_;
};

// Not in the table: every agent runs it first, so every executor has a
// tracking cgroup (CgroupLayer) and its reaping kills all it started.
class ContainmentIsolator final : public CgroupIsolator {
 public:
  explicit ContainmentIsolator(std::shared_ptr<CgroupLayer> layer) : CgroupIsolator(std::move(layer), "") {}
  std::string_view name() const override { return "containment"; }
  Status usage(const ContainerId&, wire::ResourceUsage*) override { return okStatus(); }
  std::function<Status()> reapJob(const ContainerId& id) override {
    return [layer = layer_, name = id.name()] { return layer->reap(name); };
  }

 protected:
  Status apply(const ContainerId&, const Resources&) override { return okStatus(); }
};

class PidsIsolator final : public CgroupIsolator {
 public:
  PidsIsolator(std::shared_ptr<CgroupLayer> layer, int64_t configured)
      : CgroupIsolator(std::move(layer), "pids"), configured_(configured) {}
  std::string_view name() const override { return "cgroups/pids"; }

  Status usage(const ContainerId& id, wire::ResourceUsage* usage) override {
    auto n = fs().readInt(file(id, "pids.current"));
    if (!n) return n.error();
    usage->set_processes(static_cast<uint32_t>(*n));
    return okStatus();
  }

 protected:
  Status apply(const ContainerId& id, const Resources& limits) override {
    return fs().writeFile(file(id, "pids.max"),
                               std::to_string(pidsMax(limits.scalar("cpus"), configured_)));
  }

 private:
  int64_t configured_;
};

class BlkioIsolator final : public CgroupIsolator {
 public:
  BlkioIsolator(std::shared_ptr<CgroupLayer> layer, std::vector<DeviceLimit> devices, int64_t weight)
      : CgroupIsolator(std::move(layer), "io"), devices_(std::move(devices)), weight_(weight) {}
  std::string_view name() const override { return "cgroups/blkio"; }

  // v1 blkio.throttle.io_service_bytes: "MAJ:MIN Read N" lines; v2 io.stat:
  // "MAJ:MIN rbytes=N wbytes=N ...".
  Status usage(const ContainerId& id, wire::ResourceUsage* usage) override {
    auto text = fs().readFile(file(id, v2() ? "io.stat" : "blkio.throttle.io_service_bytes"));
    if (!text) return text.error();
    uint64_t read = 0, written = 0;
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string dev, a, b;
      words >> dev >> a >> b;
      if (v2()) {
        for (std::istringstream kv(line.substr(dev.size())); kv >> a;) {
          if (a.rfind("rbytes=", 0) == 0) read += std::stoull(a.substr(7));
          if (a.rfind("wbytes=", 0) == 0) written += std::stoull(a.substr(7));
        }
      } else if (a == "Read") {
        read += std::stoull(b);
      } else if (a == "Write") {
        written += std::stoull(b);
      }
    }
    usage->set_io_read_bytes(read);
    usage->set_io_write_bytes(written);
    return okStatus();
  }

 protected:
  Status apply(const ContainerId& id, const Resources& limits) override {
    double cpus = limits.scalar("cpus");
    if (v2()) {
      // io.weight exists only with a weight-capable scheduler on some device.
      if (fs().exists(file(id, "io.weight"))) {
        std::string w = "default " + std::to_string(ioWeightV2(cpus, weight_));
        if (Status st = fs().writeFile(file(id, "io.weight"), w); !st) return st;
      }
      for (const auto& d : devices_) {
        if (Status st = fs().writeFile(file(id, "io.max"), ioMaxLine(d)); !st) return st;
      }
      return okStatus();
    }
    // blkio.weight belongs to CFQ (gone since 5.0) or BFQ (blkio.bfq.weight).
    for (const char* name : {"blkio.weight", "blkio.bfq.weight"}) {
      if (!fs().exists(file(id, name))) continue;
      if (Status st = fs().writeFile(file(id, name), std::to_string(blkioWeightV1(cpus, weight_))); !st) {
        return st;
      }
      break;
    }
    for (const auto& d : devices_) {
      const std::pair<const char*, int64_t> throttles[] = {{"read_bps_device", d.rbps},
                                                           {"write_bps_device", d.wbps},
                                                           {"read_iops_device", d.riops},
                                                           {"write_iops_device", d.wiops}};
      for (const auto& [suffix, value] : throttles) {
        // 0 removes a v1 throttle rule.
        std::string path = file(id, std::string("blkio.throttle.") + suffix);
        if (Status st = fs().writeFile(path, d.device + " " + std::to_string(value)); !st) return st;
      }
    }
    return okStatus();
  }

 private:
  std::vector<DeviceLimit> devices_;
  int64_t weight_;
};

}  // namespace

Result<std::unique_ptr<Isolator>> makeCpuIsolator(const IsolatorContext& context) {
  const CgroupHost& host = context.host;
  const IsolatorOptions& options = context.options;
  bool v2 = host.versionOf("cpu") == CgroupVersion::kV2;
  if (options.cfsQuota && !v2 && !host.fs->exists(host.hierarchyOf("cpu") + "/cpu.cfs_quota_us")) {
    return Error{"--cgroups-enable-cfs needs CFS bandwidth control (cpu.cfs_quota_us), "
                 "which this kernel was built without"};
  }
  return std::unique_ptr<Isolator>(std::make_unique<CpuIsolator>(context.cgroups, options.cfsQuota));
}

std::unique_ptr<Isolator> makeContainmentIsolator(std::shared_ptr<CgroupLayer> layer) {
  return std::make_unique<ContainmentIsolator>(std::move(layer));
}

Result<std::unique_ptr<Isolator>> makePidsIsolator(const IsolatorContext& context) {
  return std::unique_ptr<Isolator>(std::make_unique<PidsIsolator>(context.cgroups, context.options.pidsMax));
}

Result<std::unique_ptr<Isolator>> makeBlkioIsolator(const IsolatorContext& context) {
  auto devices = parseDeviceLimits(context.options.blkioLimits);
  if (!devices) return Error{"--cgroups-blkio-limits: " + devices.error().describe()};
  return std::unique_ptr<Isolator>(
      std::make_unique<BlkioIsolator>(context.cgroups, std::move(*devices), context.options.blkioWeight));
}

}  // namespace allot
