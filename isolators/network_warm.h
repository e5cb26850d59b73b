// How network/netns makes one executor's network, and the warm pool that
// makes them ahead of launches.
//
// makeNet() does every kernel step of an executor's network — a new
// namespace (lo up), the veth pair (host end up on the bridge, bridge port
// isolated, peer "eth0" up inside with the executor's /32 address and a
// default route via the gateway, and with IPv6 its /128 address and a
// default route via the IPv6 gateway), the egress qdisc — in blocking netlink
// requests. Most of its time goes to waiting for the kernel's rtnl lock,
// which the teardown of earlier executors' veths and namespaces holds
// across RCU grace periods (docs/benchmarks.md, netns_steps_bench).
//
// WarmPool keeps `size` such networks made ahead, each with an address
// already reserved in the isolator's AddressPool, refilled by one worker
// thread off the agent's loop. A launch that takes one only adds its
// nftables elements and checkpoint: no rtnl request on the launch path.
// Entries are not checkpointed: they live as long as the pool's fds, and a
// crash of the agent frees their namespaces (the kernel removes the veth
// with its namespace); recover() removes any leftover bridge port.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/asio.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "base/worker_pool.h"
#include "isolators/network_links.h"

namespace allot {

// The executor's end of its veth pair, inside its namespace.
inline constexpr const char* kInsideName = "eth0";

// What one executor's network is made of.
struct NetPlan {
  int bridgeIndex = 0;
  std::string veth;  // the host end ("ve" + the address in hex)
  uint32_t address = 0;
  uint32_t gateway = 0;
  double egressMbitPerS = 0;  // 0: no qdisc
  std::optional<Ipv6Address> address6;  // with --network-cidr6: /128 and a default route
  Ipv6Address gateway6;
};

struct MadeNet {
  NetPlan plan;
  UniqueFd netns;  // the executor's namespace
};

// Makes the network of `plan` with `host` (a socket in the agent's
// namespace); the calling thread enters the new namespace for one unshare
// and leaves it. A stale interface with the plan's veth name (an earlier
// executor's, still being torn down) is deleted first: the address, and so
// the name, is the plan's alone. On error nothing of it is left but the
// namespace, which dies with its fd. Thread: any; `host` used by one at a time.
Result<MadeNet> makeNet(Netlink& host, const NetPlan& plan);

class WarmPool {
 public:
  // Reserves an address and says what to make (on the loop); an Error when
  // the address pool is exhausted.
  using Planner = std::function<Result<NetPlan>()>;
  // Gives back what a plan reserved (on the loop), for a failed make.
  using Releaser = std::function<void(const NetPlan&)>;

  // Starts no work until refill(). `size` networks at most, made and
  // waiting; one worker thread.
  WarmPool(asio::io_context& io, size_t size, Planner plan, Releaser release);
  // Waits for the worker, then deletes the veths of the networks still
  // waiting or made and not yet handed to the loop (blocking: a few ms
  // each; the agent is stopping).
  ~WarmPool();
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  // A made network (the oldest; its qdisc is the default rate), or nothing
  // when none waits (the caller makes one itself). Either way a refill
  // starts at the loop's next turn, not now: the launch the network is
  // taken for (the caller's clone of the executor, a fork-like copy of the
  // agent's address space) does not share the CPUs, the mm and the rtnl lock
  // with a worker making the next one (docs/benchmarks.md).
  std::optional<MadeNet> take();
  // Asks the worker for networks until `size` are waiting or being made.
  // After a failed make it asks again only at the next take() or refill().
  void refill();
  size_t waiting() const { return ready_.size(); }
  size_t making() const { return making_; }
  // Veth names of the networks waiting (their addresses are reserved).
  std::vector<std::string> waitingVeths() const;

 private:
  // What the worker's jobs share with the destructor: the veths made and
  // not yet received on the loop, and whether the pool is closing (a job
  // that ends after that deletes what it made itself).
  struct Handoff {
    std::mutex mu;
    bool closing = false;
    std::set<std::string> unreceived;
  };

  void made(const NetPlan& plan, Result<MadeNet> result);

  asio::io_context& io_;
  size_t size_;
  bool refillPosted_ = false;  // a take()'s refill waits for the loop
  std::shared_ptr<Handoff> handoff_ = std::make_shared<Handoff>();
  Planner plan_;
  Releaser release_;
  std::deque<MadeNet> ready_;
  size_t making_ = 0;
  bool failed_ = false;  // the last make failed: no automatic retry
  std::optional<WorkerPool> workers_;  // reset (joined) first in the destructor
};

}  // namespace allot
