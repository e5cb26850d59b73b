// The ZooKeeper RoleStore (master/role_store.h): the run-time role settings
// of a master group in one znode, <group path>/roles, holding
// encodeRoleSettings() text, written through the leader's own session.
//
// Fencing: a write names the znode version this leader last read or wrote
// (ZooKeeper's conditional setData). load() reads the znode and at once
// writes it back unchanged under the new leader's epoch (the "claim"):
// from then on a write of any earlier leader names an old version and
// fails with kBadVersion, so a fenced ex-leader can never overwrite what a
// newer leader stored. A claim that loses a race (the old leader wrote in
// between) reads again. A save() that meets kBadVersion fails: someone
// else leads now; nothing is retried blindly.
//
// With --zk-credentials the znode is writable only by the masters' digest
// identity and readable by anyone (ZkClientOptions::credentials): load()
// sets that ACL first, also on a znode someone else left open.
//
// The group path exists (the contender made it). A missing znode is made
// (persistent) by load(). Connection loss during load() is retried every
// kRoleStoreRetry, up to kRoleStoreLoadAttemptsMax times; a leader whose
// link stays down is fenced by its contender long before that.
#pragma once

#include <memory>
#include <string>

#include "ha/zk_session.h"
#include "master/role_store.h"

namespace allot {

constexpr Duration kRoleStoreRetry = std::chrono::milliseconds(500);
constexpr int kRoleStoreLoadAttemptsMax = 40;

// The znode the settings of the group at `groupPath` live in.
std::string roleSettingsPath(const std::string& groupPath);

// `session` must outlive the store (the contender's session: it lives as
// long as this master leads). `epoch`: this leader's, written with each
// save for the logs.
std::unique_ptr<RoleStore> makeZooKeeperRoleStore(asio::io_context& io, ZkSession& session,
                                                  std::string groupPath, uint64_t epoch);

}  // namespace allot
