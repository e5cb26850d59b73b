#include "isolators/network_warm.h"

#include <errno.h>

#include "base/log.h"
#include "isolators/network_pool.h"

namespace allot {
namespace {

Status plumbInside(Netlink& inside, const NetPlan& plan) {
  auto index = inside.ifindex(kInsideName);
  if (!index) return index.error();
  if (auto st = inside.setUp(*index); !st) return st;
  if (auto st = inside.addAddress(*index, plan.address, 32); !st) return st;
  if (auto st = inside.addDefaultRoute(*index, plan.gateway); !st) return st;
  if (plan.address6) {
    if (auto st = inside.addAddress6(*index, *plan.address6, 128); !st) return st;
    if (auto st = inside.addDefaultRoute6(*index, plan.gateway6); !st) return st;
  }
  if (plan.egressMbitPerS > 0) return inside.setEgressRate(*index, plan.egressMbitPerS);
  return okStatus();
}

}  // namespace

Result<MadeNet> makeNet(Netlink& host, const NetPlan& plan) {
  auto ns = createNetns();
  if (!ns) return ns.error();
  Status st = host.createVeth(plan.veth, plan.bridgeIndex, ns->fd.get(), kInsideName);
  if (!st && st.error().errnum == EEXIST) {
    // An earlier holder of this address whose interface is still going.
    if (st = host.deleteLink(plan.veth); st) st = host.createVeth(plan.veth, plan.bridgeIndex, ns->fd.get(), kInsideName);
  }
  if (!st) return st.error();
  // Isolated bridge ports cannot talk to each other at layer 2: executor
  // traffic goes through the host's forward hook (and its rules).
  st = writeNetFile("/sys/class/net/" + plan.veth + "/brport/isolated", "1");
  if (st) st = plumbInside(ns->inside, plan);
  if (!st) {
    (void)host.deleteLink(plan.veth);
    return st.error();
  }
  return MadeNet{plan, std::move(ns->fd)};
}

WarmPool::WarmPool(asio::io_context& io, size_t size, Planner plan, Releaser release)
    : io_(io), size_(size), plan_(std::move(plan)), release_(std::move(release)) {
  workers_.emplace(io, WorkerPoolOptions{.threads = 1, .queueMax = size});
}

WarmPool::~WarmPool() {
  {
    std::lock_guard lock(handoff_->mu);
    handoff_->closing = true;
  }
  workers_.reset();
  auto host = Netlink::open();
  if (!host) return;  // their namespaces die with the fds; the kernel takes the veths along
  for (const auto& net : ready_) (void)host->deleteLink(net.plan.veth);
  for (const auto& veth : handoff_->unreceived) (void)host->deleteLink(veth);
}

std::optional<MadeNet> WarmPool::take() {
  std::optional<MadeNet> out;
  if (!ready_.empty()) {
    out = std::move(ready_.front());
    ready_.pop_front();
  }
  failed_ = false;
  if (!refillPosted_) {
    refillPosted_ = true;
    asio::post(io_, [this, handoff = handoff_] {
      {
        std::lock_guard lock(handoff->mu);
        if (handoff->closing) return;  // the pool is gone or going
      }
      refillPosted_ = false;
      refill();
    });
  }
  return out;
}

void WarmPool::refill() {
  while (!failed_ && ready_.size() + making_ < size_) {
    auto plan = plan_();
    if (!plan) {
      failed_ = true;
      LOG_WARNING("network/netns: warm pool: " << plan.error().describe());
      return;
    }
    std::shared_ptr<Handoff> handoff = handoff_;
    std::function<Result<MadeNet>()> job = [handoff, plan = *plan]() -> Result<MadeNet> {
      auto host = Netlink::open();
      if (!host) return host.error();
      auto net = makeNet(*host, plan);
      if (!net) return net;
      std::lock_guard lock(handoff->mu);
      if (handoff->closing) {
        (void)host->deleteLink(plan.veth);
        return Error{"the warm pool is closing"};
      }
      handoff->unreceived.insert(plan.veth);
      return net;
    };
    Status queued = workers_->submit<Result<MadeNet>>(
        std::move(job), [this, p = *plan](Result<MadeNet> r) { made(p, std::move(r)); });
    if (!queued) {
      release_(*plan);
      failed_ = true;
      return;
    }
    ++making_;
  }
}

void WarmPool::made(const NetPlan& plan, Result<MadeNet> result) {
  --making_;
  {
    std::lock_guard lock(handoff_->mu);
    handoff_->unreceived.erase(plan.veth);
  }
  if (!result) {
    LOG_WARNING("network/netns: warm pool: making " << plan.veth << " for " << ipv4ToString(plan.address) << ": "
                                                    << result.error().describe());
    release_(plan);
    failed_ = true;
    return;
  }
  ready_.push_back(std::move(*result));
}

std::vector<std::string> WarmPool::waitingVeths() const {
  std::vector<std::string> out;
  for (const auto& net : ready_) out.push_back(net.plan.veth);
  return out;
}

}  // namespace allot
