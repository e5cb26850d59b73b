// network/netns: every executor in its own network namespace, joined to
// the host through a veth pair on the agent's bridge.
//
//   prepare   takes a network made ahead by the warm pool
//             (--network-warm-pool, network_warm.h), or else makes one:
//             an address from the pool (--network-cidr; the bridge
//             holds the first one as gateway), checkpointed first, the
//             namespace (lo up), the veth pair (host end on the bridge,
//             "eth0" inside with address/32 and a default route via the
//             gateway; with --network-cidr6 also the IPv6 address at the
//             same offset, /128, and a default route via the IPv6
//             gateway), the egress tbf on "eth0" (the executor's `net_mbps`
//             resource, else --network-egress-rate) and the
//             executor's offered ports in the nftables map; hands the
//             namespace fd to the launcher and ALLOT_NETWORK_ADDRESS /
//             ALLOT_NETWORK_GATEWAY (and ALLOT_NETWORK_ADDRESS6 /
//             ALLOT_NETWORK_GATEWAY6) to the executor's environment.
//   update    replaces the executor's port elements and egress rate when
//             its tasks change (the rate through /proc/<pid>/ns/net).
//   reapJob   deletes the veth (on the agent's worker pool)
//   cleanup   deletes the port elements (and the veth if still there) and
//             the checkpoint (the namespace dies with its last process),
//             then on the isolator's flush thread the host's conntrack
//             entries of its addresses (network_conntrack.h); the address
//             returns to the pool once they are gone.
//   recover   adopts the checkpointed executors the agent still knows,
//             deletes everything else (veths on the bridge, checkpoints,
//             port elements, conntrack entries) and rewrites the nftables
//             tables (ip, and ip6 with --network-cidr6) atomically.
//
// Executors route everything through the host (a /32 address, isolated
// bridge ports), so the host's forward hook sees executor-to-executor
// traffic: only offered ports pass unless --network-allow-executor-traffic.
// Checkpoints live in --network-state-dir (default /run/allot/network/<bridge>:
// tmpfs, because neither namespaces nor executors outlive a reboot).
// Thread: the agent's io_context thread (a prepare without a warm network
// enters the new namespace on that thread for one unshare and returns at
// once); the warm pool's worker makes networks beside it.
#pragma once

#include <memory>
#include <string>

#include "base/asio.h"
#include "base/flags.h"
#include "base/result.h"
#include "isolators/isolator.h"
#include "isolators/network_options.h"

namespace allot {

void addNetworkFlags(Flags& flags, NetworkOptions* options);

// Sets up (or adopts) the bridge, its gateway address, forwarding and
// route_localnet on it, and the nftables table; errors say what failed.
// With `io` (the agent's loop, outliving the isolator) and a warm pool size
// above 0, networks are made ahead of launches on a worker thread whose
// results come back on `io`; without, every prepare() makes its own.
Result<std::unique_ptr<Isolator>> makeNetworkIsolator(const NetworkOptions& options, asio::io_context* io = nullptr);

// Removes the bridge, the nftables table and the state directory (for
// tests and uninstall; executors still attached lose their network).
Status removeNetwork(const NetworkOptions& options);

// Names used for `options` (validated): the nftables table and state dir.
std::string networkTableName(const NetworkOptions& options);
std::string networkStateDir(const NetworkOptions& options);

}  // namespace allot
