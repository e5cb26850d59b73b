// Conntrack entries of an executor's addresses in the agent's network
// namespace. When an executor ends, the flows the host tracked for it
// (DNATed to it from offered ports, masqueraded from it, to and from other
// executors) are deleted, so that the next executor given the same address
// inherits none of them (an old NAT mapping, an established state that
// lets a client's packets through to a port the new executor was never
// offered).
//
// Through libnl's netfilter part (libnl-nf-3, the same libnl as the links):
// a dump of the host's conntrack table, and every entry with one of the
// addresses as source or destination of either direction deleted by its
// tuple. Blocking and linear in the size of the host's table: run it off
// the agent's loop. See docs/decisions.md.
// Thread: any; each call opens its own sockets.
#pragma once

#include <cstddef>
#include <vector>

#include "base/result.h"
#include "isolators/network_pool.h"

namespace allot {

struct ConntrackFlush {
  size_t seen = 0;     // entries dumped (the host's table)
  size_t deleted = 0;  // entries of the addresses deleted (gone meanwhile: not counted)
};

// Deletes the entries of every executor in `executors` (v4, and v6 when
// set) in one dump of the table. An error when the table cannot be read or
// an entry cannot be deleted (after trying all).
Result<ConntrackFlush> flushConntrack(const std::vector<ExecutorAddresses>& executors);

}  // namespace allot
