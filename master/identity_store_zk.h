// The ZooKeeper IdentityStore (master/identity_store.h): one persistent
// znode per framework, <group path>/frameworks/<identityKey(id)>, holding
// encodeIdentity() text, written through the leader's own session.
//
// With --zk-credentials every znode is created with the masters' ACL (only
// their digest identity writes, anyone reads: the record holds a salted
// hash, never a secret), and load() locks <group>/frameworks to it first,
// also when someone else left it open; a node it cannot lock fails load().
//
// put() creates the znode, or replaces its data when it exists, and
// answers once ZooKeeper has; remove() deletes it, fire-and-forget (a
// failure is logged). ZooKeeper applies one session's requests in order.
// load() may run again after it failed.
#pragma once

#include <memory>
#include <string>

#include "ha/zk_session.h"
#include "master/identity_store.h"

namespace allot {

// The znode under which the identities of the group at `groupPath` live.
std::string identitiesPath(const std::string& groupPath);

// `session` must outlive the store (the contender's session: it lives as
// long as this master leads).
std::unique_ptr<IdentityStore> makeZooKeeperIdentityStore(asio::io_context& io, ZkSession& session,
                                                          std::string groupPath);

}  // namespace allot
