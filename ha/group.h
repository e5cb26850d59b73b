// The masters' contender group in ZooKeeper: how members are named and what
// each member's znode holds. Shared by the contender (masters) and the
// detector (every client), so both read the group the same way.
//
//   <path>/member_<guid>_<sequence>   ephemeral + sequential, one per master
//   data: "address=HOST:PORT\nid=MASTER_ID\n[http=HOST:PORT\n][shards=HOST:PORT\n]"
//
// Lines are key=value; readers skip keys they do not know, so a key can be
// added without breaking older readers. `http` (the master's operator API,
// its --http-listen, for allotctl) is absent when the master serves no HTTP
// or predates it: readers must cope with its absence. `shards` (its
// --shard-listen, where link shards follow the leader) likewise.
//
// The guid (128 random bits, hex) lets a master find its own znode after a
// create whose reply was lost. The member with the lowest sequence leads;
// its leader epoch is the znode's czxid (ZooKeeper's global transaction id of
// the create), which grows with every new leader: a new leader is always a
// member created after the previous leader's znode.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "proto/leader.h"

namespace allot {

constexpr size_t kMaxMemberDataBytes = 4096;
// More children than this in the group directory are ignored (a directory
// filled by a runaway process must not make every listing unbounded).
constexpr size_t kMaxGroupMembers = 10000;

struct GroupMember {
  std::string name;  // the znode's name under the group path
  std::string guid;
  int64_t sequence = 0;
};

// The members among `children`, lowest sequence first; names that are not
// members (other files in the directory) are skipped.
std::vector<GroupMember> parseMembers(const std::vector<std::string>& children);

std::string memberPrefix(const std::string& guid);  // "member_<guid>_"
std::string newMemberGuid();                        // 32 hex digits from the kernel

struct MemberData {
  Endpoint address;                  // the protocol endpoint (agents, schedulers)
  std::string masterId;
  std::optional<Endpoint> http;      // the operator API (HTTP), when served
  std::optional<Endpoint> shards;    // where link shards connect, when it takes them
};
std::string encodeMemberData(const MemberData& member);
Result<MemberData> decodeMemberData(const std::string& data);

// The leader epoch reported for a member created in transaction `czxid`
// (never 0: 0 means "standalone").
inline uint64_t epochOf(int64_t czxid) { return czxid > 0 ? static_cast<uint64_t>(czxid) : 1; }

}  // namespace allot
