// Picks the LeaderDetector (proto/leader.h) for a --master / --zk value:
//   "host:port", "tcp:host:port", "unix:/path"  -> the fixed detector
//   "zk://host:port[,host:port...]/path"        -> the ZooKeeper detector
// Design: docs/links.md section 4.
#pragma once

#include <memory>
#include <string>

#include "base/asio.h"
#include "base/result.h"
#include "proto/leader.h"

namespace allot {

// True when `text` names a ZooKeeper group ("zk://...").
bool isZooKeeperUrl(const std::string& text);

// An error names the value and what is wrong with it.
Result<std::unique_ptr<LeaderDetector>> makeLeaderDetector(asio::io_context& io,
                                                           const std::string& text);

}  // namespace allot
