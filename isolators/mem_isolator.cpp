// cgroups/mem: the hard memory limit and OOM as an event.
//
// v1: an eventfd registered on memory.oom_control through
// cgroup.event_control; it also fires when the cgroup is removed, so a wake
// counts as an OOM only when memory.oom_control's oom_kill is non-zero.
// v2: an inotify IN_MODIFY watch on memory.events, re-read right after the
// watch is added (an OOM before the watch is not missed); oom_kill > 0 is
// an OOM. memory.oom.group=1 makes the kernel kill the whole group; on v1
// the agent's cleanup does that (freezer + SIGKILL).
#include <poll.h>
#include <unistd.h>

#include <cmath>
#include <map>

#include "base/log.h"
#include "base/unique_fd.h"
#include "isolators/cgroup_isolators.h"
#include "isolators/cgroup_values.h"
#include "isolators/cgroupfs.h"

namespace allot {
namespace {

constexpr size_t kMaxWatchedContainers = 100000;

class MemIsolator final : public CgroupIsolator {
 public:
  MemIsolator(std::shared_ptr<CgroupLayer> layer, UringPoller* poller)
      : CgroupIsolator(std::move(layer), "memory"), poller_(poller) {}
  ~MemIsolator() override {
    for (auto& [name, w] : watches_) poller_->cancel(w.pollId);
  }
  std::string_view name() const override { return "cgroups/mem"; }

  Status watch(const ContainerId& id, std::function<void(const Limitation&)> onLimitation) override {
    if (watches_.count(id.name())) return okStatus();
    if (!poller_) return Error{"cgroups/mem: no event poller to watch OOM events with"};
    if (watches_.size() >= kMaxWatchedContainers) return Error{"cgroups/mem: too many containers watched"};
    Watch w;
    w.onLimitation = std::move(onLimitation);
    w.id = id;
    if (Status st = arm(id, &w); !st) return st;
    std::string key = id.name();
    auto made = poller_->watch(w.fd.get(), POLLIN, true, [this, key](uint32_t) { onEvent(key); });
    if (!made) return made.error();
    w.pollId = *made;
    watches_.emplace(key, std::move(w));
    onEvent(key);  // an OOM that happened before the watch existed
    return okStatus();
  }

  Status usage(const ContainerId& id, wire::ResourceUsage* usage) override {
    auto current = fs().readInt(file(id, v2() ? "memory.current" : "memory.usage_in_bytes"));
    if (!current) return current.error();
    usage->set_mem_bytes(static_cast<uint64_t>(*current));
    auto peak = fs().readInt(file(id, v2() ? "memory.peak" : "memory.max_usage_in_bytes"));
    if (peak) usage->set_mem_peak_bytes(static_cast<uint64_t>(*peak));
    return okStatus();
  }

 protected:
  Status apply(const ContainerId& id, const Resources& limits) override {
    int64_t bytes = memoryBytes(limits.scalar("mem"));
    limits_[id.name()] = bytes;
    if (v2()) {
      std::string value = bytes < 0 ? "max" : std::to_string(bytes);
      if (Status st = fs().writeFile(file(id, "memory.max"), value); !st) return st;
      if (Status st = fs().writeFile(file(id, "memory.oom.group"), "1"); !st) return st;
      // Swap would let the executor exceed its limit: none (absent without swap).
      if (fs().exists(file(id, "memory.swap.max"))) {
        return fs().writeFile(file(id, "memory.swap.max"), "0");
      }
      return okStatus();
    }
    // v1: memsw (memory+swap) must stay >= the memory limit: when raising,
    // memsw goes first; when lowering, the memory limit goes first.
    std::string memsw = file(id, "memory.memsw.limit_in_bytes");
    bool haveMemsw = fs().exists(memsw);
    auto old = fs().readInt(file(id, "memory.limit_in_bytes"));
    bool raising = bytes < 0 || !old || *old < 0 || bytes >= *old;
    std::string value = std::to_string(bytes);
    if (haveMemsw && raising) {
      if (Status st = fs().writeFile(memsw, value); !st) return st;
    }
    Status st = fs().writeFile(file(id, "memory.limit_in_bytes"), value);
    if (!st && st.error().errnum == EBUSY) {
      return Error{"cannot lower the memory limit of " + id.name() + " to " + value +
                       " bytes below its current usage", EBUSY};
    }
    if (!st) return st;
    if (haveMemsw && !raising) return fs().writeFile(memsw, value);
    return okStatus();
  }

  void forget(const ContainerId& id) override {
    auto it = watches_.find(id.name());
    if (it != watches_.end()) {
      poller_->cancel(it->second.pollId);  // before the fds close
      watches_.erase(it);
    }
    limits_.erase(id.name());
  }

 private:
  struct Watch {
    ContainerId id;
    UniqueFd fd;          // v1 eventfd, v2 inotify (CgroupEventSource)
    UniqueFd controlFd;   // v1 memory.oom_control, open while registered
    UringPoller::WatchId pollId = 0;
    std::function<void(const Limitation&)> onLimitation;
    bool fired = false;
  };

  // The kernel's OOM report, through the seam (the twin can fire one).
  Status arm(const ContainerId& id, Watch* w) {
    auto source = v2() ? fs().watchEvents(file(id, "memory.events"), "")
                       : fs().watchEvents(file(id, "memory.oom_control"), file(id, "cgroup.event_control"));
    if (!source) return source.error();
    w->fd = std::move(source->fd);
    w->controlFd = std::move(source->held);
    return okStatus();
  }

  // Drains the fd, then decides from the counters (a wake alone can be a
  // cgroup removal on v1, or another memory.events counter on v2).
  void onEvent(const std::string& key) {
    auto it = watches_.find(key);
    if (it == watches_.end()) return;
    Watch& w = it->second;
    char buf[4096];
    bool woke = false;
    while (read(w.fd.get(), buf, sizeof buf) > 0) woke = true;
    if (w.fired) return;
    std::string counters = file(w.id, v2() ? "memory.events" : "memory.oom_control");
    auto kills = fs().readKey(counters, "oom_kill");
    // v1 signals the eventfd before the OOM killer has picked its victim (so
    // oom_kill may still read 0); a wake while the cgroup exists is an OOM
    // (our own rmdir cancels the watch first).
    bool oom = (kills && *kills > 0) || (!v2() && woke && fs().exists(counters));
    if (!oom) return;
    w.fired = true;
    Limitation limitation;
    limitation.reason = wire::REASON_MEMORY_LIMIT;
    int64_t limit = limits_.count(key) ? limits_[key] : -1;
    limitation.message = "memory limit " + (limit < 0 ? std::string("(none)") : std::to_string(limit >> 20) + " MiB") +
                         " exceeded (OOM kill)";
    (void)usage(w.id, &limitation.usage);
    LOG_INFO("container " << key << ": " << limitation.message << ", peak "
                          << limitation.usage.mem_peak_bytes() << " bytes");
    auto callback = w.onLimitation;  // may call cleanup(), which erases w
    callback(limitation);
  }

  UringPoller* poller_;
  std::map<std::string, Watch> watches_;
  std::map<std::string, int64_t> limits_;
};

}  // namespace

Result<std::unique_ptr<Isolator>> makeMemIsolator(const IsolatorContext& context) {
  if (!context.options.poller) return Error{"cgroups/mem needs an event poller for OOM events"};
  return std::unique_ptr<Isolator>(std::make_unique<MemIsolator>(context.cgroups, context.options.poller));
}

}  // namespace allot
