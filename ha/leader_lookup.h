// findLeader: one look at the masters' contender group (ha/group.h) for a
// short-lived tool (allotctl): which master leads now, and the addresses
// its znode publishes. It follows nothing: no watch, no re-election; it
// lists the group once, reads the lowest member and returns. Daemons follow
// the leader with ZooKeeperDetector (ha/zk_detector.h) instead.
//
// Errors say what is wrong: the group does not exist or is empty (no master
// leads), the servers cannot be reached within `timeout`, the session
// expired, or the leader's znode is unreadable.
//
// Thread: runs `io` on the caller's thread until it has the answer or
// `timeout` passes, so `io` must hold no work the caller needs run
// meanwhile (a command-line tool's own io_context). `sessions` makes the
// one session it uses; the session is closed before it returns.
#pragma once

#include <cstdint>
#include <string>

#include "base/asio.h"
#include "base/clock.h"
#include "base/result.h"
#include "ha/group.h"
#include "ha/zk_session.h"

namespace allot {

struct LeaderEntry {
  std::string member;  // the znode's name under the group path
  uint64_t epoch = 0;  // as the detector reports it (the znode's czxid)
  MemberData data;
};

Result<LeaderEntry> findLeader(asio::io_context& io, const ZkSessionFactory& sessions,
                               const std::string& groupPath, Duration timeout);

}  // namespace allot
