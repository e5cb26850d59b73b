// Conntrack entries of executors in the agent's network namespace.
//
// When an executor ends, the flows the host tracked for it (DNATed to it
// from offered ports, masqueraded from it, to and from other executors) are
// deleted, so that the next executor given the same address inherits none
// of them (an old NAT mapping, an established state that lets a client's
// packets through to a port the new executor was never offered). When a
// running executor loses offered ports (its task ended, the executor keeps
// running), the flows made to those ports go: the `established` state and
// the DNAT mapping would otherwise keep a client connected to a port that is
// no longer the executor's.
//
// Through libnl's netfilter part (libnl-nf-3, the same libnl as the links):
// one dump of the host's table per address family that has work (the
// kernel sends only that family's entries), each entry matched on its raw
// attributes (no object per entry), and every match deleted by its tuple.
// Blocking and linear in the size of the host's table of that family: run
// it off the agent's loop. See docs/decisions.md.
// Thread: any; each call opens its own sockets.
#pragma once

#include <cstddef>
#include <vector>

#include "base/result.h"
#include "isolators/network_pool.h"
#include "proto/resources.h"

struct nl_sock;

namespace allot {

// Which flows of one executor go.
struct ExecutorFlows {
  ExecutorAddresses addresses;
  // Empty: every entry naming one of the addresses (either direction,
  // source or destination). Otherwise only TCP and UDP flows made to these
  // ports of the executor: the reply comes from an address of it and from
  // one of the ports (DNATed from the host's offered port, which keeps the
  // port, or straight from another executor).
  Resources::Ranges ports;
};

struct ConntrackFlush {
  size_t seen = 0;     // entries dumped (the host's table, of the families asked)
  size_t deleted = 0;  // entries of the addresses deleted (gone meanwhile: not counted)
};

// One NETLINK_NETFILTER socket kept for every flush, opened at the first.
// Not one per flush: the kernel handles the release of such a socket by
// taking nftables' commit mutex and waiting, under it, for pending nftables
// transaction cleanups (an RCU grace period: nft_rcv_nl_event), and a
// launch's nftables elements wait behind that mutex (docs/benchmarks.md).
// Thread: one caller at a time (the isolator's flush thread).
class ConntrackFlusher {
 public:
  ConntrackFlusher() = default;
  ~ConntrackFlusher();
  ConntrackFlusher(const ConntrackFlusher&) = delete;
  ConntrackFlusher& operator=(const ConntrackFlusher&) = delete;

  // Deletes the entries `flows` names, in one dump per address family. An
  // error when the table cannot be read or an entry cannot be deleted
  // (after trying all); a socket that failed is replaced at the next call.
  Result<ConntrackFlush> flush(const std::vector<ExecutorFlows>& flows);

 private:
  nl_sock* sock_ = nullptr;
};

// The same with a socket of its own (tools, tests).
Result<ConntrackFlush> flushConntrack(const std::vector<ExecutorFlows>& flows);
// Every flow of each executor in `executors` (v4, and v6 when set).
Result<ConntrackFlush> flushConntrack(const std::vector<ExecutorAddresses>& executors);

}  // namespace allot
