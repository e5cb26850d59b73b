// PeerIdentity: who is on the other end of a Connection (docs/links.md
// section 2). Kept apart from proto/tls.h so that code free of sockets (the
// Master state machine) can take one without pulling in Asio and OpenSSL.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace allot {

struct PeerIdentity {
  bool tls = false;
  std::string principal;  // TLS: the certificate subject's CN; else empty
  std::string certRole;   // TLS: the subject's OU; else empty
  // An agent behind a link shard: that shard's name (its ShardHello, by
  // default its HOST:PORT); empty for a direct link.
  std::string via;
  // Unix sockets: the peer process's SO_PEERCRED, read at accept/connect.
  std::optional<int32_t> pid;
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;

  std::string describe() const;  // "principal agent-7 (agent)", "uid 1000 pid 42", "anonymous"
};

}  // namespace allot
