// The link shard an allot-master runs beside itself (--agent-shard-listen):
// a hot standby is otherwise idle, so it carries agents for the leader while
// it waits, and keeps carrying them once it leads (its shard then links to
// its own --shard-listen over loopback, and its agents never notice).
//
// The shard is allot-shard's LinkShard on a thread of its own
// (shard/shard_thread.h). It follows the leader exactly as allot-shard does:
// with --zk it follows the group's leader, without it this master. It takes
// the master's --acls and --tls-ca, and a certificate of role `shard` of its
// own (--agent-shard-tls-cert/-key) when the master runs TLS: agents given
// --shards expect that role, and the leader takes shard links only from it.
//
// Thread: the master's main thread (before its loop runs).
#pragma once

#include <memory>
#include <string>

#include "base/flags.h"
#include "proto/tls.h"
#include "shard/shard_thread.h"

namespace allot {

struct AgentShardSettings {
  std::string listen;  // empty: no shard
  std::string portFile;
  std::string advertise;
  std::string announce;
  std::string tlsCert;
  std::string tlsKey;
  std::string httpListen;
  std::string httpPortFile;
};

void addAgentShardFlags(Flags& flags, AgentShardSettings* s);

// The master's own settings the shard uses.
struct AgentShardContext {
  TlsFiles tls;           // the master's --tls-*: the CA is shared
  std::string acls;       // --acls: its register_agent rules apply at the shard
  bool insecure = false;
  std::string zk;         // --zk; empty: the shard links to this master
  HostPort shardListen;   // this master's --shard-listen, its port bound
};

// Null without --agent-shard-listen. The shard's ports are bound and their
// port files written; it runs from ShardThread::start().
Result<std::unique_ptr<ShardThread>> makeAgentShard(const AgentShardSettings& s, const AgentShardContext& master);

}  // namespace allot
