// cgroups/cpuset: executors whose cpus are a whole number get that many
// cores of their own; every other executor shares the cores nobody holds.
//
// The pool is the agent root's cpuset (v1 cpuset.cpus, v2
// cpuset.cpus.effective). A grant never takes the last shared core: an
// executor that cannot get its cores shares instead (and says so in the
// log). Each grant or release rewrites the shared executors' cpuset.cpus at
// once. On v2 an exclusive executor also becomes a partition root
// (cpuset.cpus.partition "root") when the agent's root is one, so the
// kernel keeps the rest of the agent's subtree off its cores; otherwise the
// split holds among the agent's executors only. Grants are not checkpointed:
// after a restart they are rebuilt by the next update() of each executor.
#include <cerrno>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "base/log.h"
#include "isolators/cgroup_isolators.h"
#include "isolators/cgroupfs.h"

namespace allot {
namespace {

using Cpus = std::set<int>;

Cpus parseCpuList(const std::string& text) {
  Cpus out;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.find_first_of("0123456789") == std::string::npos) continue;
    auto dash = part.find('-');
    int a = std::stoi(part.substr(0, dash));
    int b = dash == std::string::npos ? a : std::stoi(part.substr(dash + 1));
    for (int c = a; c <= b; ++c) out.insert(c);
  }
  return out;
}

std::string formatCpuList(const Cpus& cpus) {
  std::string out;
  for (int c : cpus) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

class CpusetIsolator final : public CgroupIsolator {
 public:
  explicit CpusetIsolator(std::shared_ptr<CgroupLayer> layer) : CgroupIsolator(std::move(layer), "cpuset") {}
  std::string_view name() const override { return "cgroups/cpuset"; }

  Status usage(const ContainerId&, wire::ResourceUsage*) override { return okStatus(); }

 protected:
  Status apply(const ContainerId& id, const Resources& limits) override {
    auto pool = readPool();
    if (!pool) return pool.error();
    double cpus = limits.scalar("cpus");
    int whole = static_cast<int>(std::llround(cpus));
    bool wantsCores = cpus >= 1 && std::fabs(cpus - whole) < 1e-6;
    std::string key = id.name();
    ids_[key] = id;
    auto held = exclusive_.find(key);
    if (held != exclusive_.end() && (!wantsCores || static_cast<int>(held->second.size()) != whole)) {
      exclusive_.erase(held);
    }
    if (wantsCores && !exclusive_.count(key)) {
      Cpus free = sharedCores(*pool);
      if (static_cast<int>(free.size()) > whole) {
        Cpus mine(free.begin(), std::next(free.begin(), whole));
        exclusive_[key] = mine;
      } else {
        LOG_INFO("container " << key << " shares cores: " << whole << " exclusive cores would leave none shared");
      }
    }
    // The grant's own cpuset first (its cores were still shared), then the others.
    if (exclusive_.count(key)) {
      if (Status st = writeCpus(id, exclusive_[key]); !st) return st;
      if (Status st = setPartition(id, true); !st) return st;
    } else if (Status st = setPartition(id, false); !st) {
      return st;
    }
    return rewriteShared(*pool, key);
  }

  void forget(const ContainerId& id) override {
    ids_.erase(id.name());
    if (exclusive_.erase(id.name()) == 0) return;
    auto pool = readPool();
    if (pool) (void)rewriteShared(*pool, "");
  }

 private:
  Result<Cpus> readPool() const {
    const CgroupHost& host = layer_->host();
    std::string root = host.hierarchyOf("cpuset") + "/" + rootName();
    auto text = fs().readFile(root + (v2() ? "/cpuset.cpus.effective" : "/cpuset.cpus"));
    if (!text) return text.error();
    Cpus pool = parseCpuList(*text);
    if (pool.empty()) return Error{root + " has no cpus"};
    return pool;
  }

  std::string rootName() const { return layer_->root(); }

  Cpus sharedCores(const Cpus& pool) const {
    Cpus out = pool;
    for (const auto& [name, cores] : exclusive_) {
      for (int c : cores) out.erase(c);
    }
    return out;
  }

  Status writeCpus(const ContainerId& id, const Cpus& cpus) {
    return fs().writeFile(file(id, "cpuset.cpus"), formatCpuList(cpus));
  }

  // v2 only: a partition root when the agent's root is one.
  Status setPartition(const ContainerId& id, bool exclusive) {
    if (!v2()) return okStatus();
    std::string rootDir = layer_->host().hierarchyOf("cpuset") + "/" + rootName();
    auto mode = fs().readFile(rootDir + "/cpuset.cpus.partition");
    if (!mode || mode->rfind("root", 0) != 0) return okStatus();
    return fs().writeFile(file(id, "cpuset.cpus.partition"), exclusive ? "root" : "member");
  }

  // Every shared executor gets the cores nobody holds. Another executor
  // whose directory is gone needs none (its executor ended: the containment
  // isolator removes its cgroups off the loop before cleanup() forgets it
  // here; a launch under the hog's CPU hog failed on that once); `own`'s
  // directory must be there.
  Status rewriteShared(const Cpus& pool, const std::string& own) {
    Cpus shared = sharedCores(pool);
    for (const auto& [name, id] : ids_) {
      if (exclusive_.count(name)) continue;
      Status st = writeCpus(id, shared);
      if (!st && (name == own || st.error().errnum != ENOENT)) return st;
    }
    return okStatus();
  }

  std::map<std::string, ContainerId> ids_;       // every prepared container
  std::map<std::string, Cpus> exclusive_;        // container -> its own cores
};

}  // namespace

Result<std::unique_ptr<Isolator>> makeCpusetIsolator(const IsolatorContext& context) {
  return std::unique_ptr<Isolator>(std::make_unique<CpusetIsolator>(context.cgroups));
}

}  // namespace allot
