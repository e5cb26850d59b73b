#include "isolators/network_conntrack.h"

#include <arpa/inet.h>

#include <netlink/msg.h>
#include <netlink/netfilter/ct.h>
#include <netlink/netfilter/nfnl.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include <cstring>
#include <memory>
#include <set>
#include <vector>

namespace allot {
namespace {

// Matched entries held at once; a pass that finds more deletes these and
// dumps again.
constexpr size_t kMatchesPerPass = 16384;
constexpr int kPassesMax = 8;

struct SockFree {
  void operator()(nl_sock* s) const { nl_socket_free(s); }
};
using SockPtr = std::unique_ptr<nl_sock, SockFree>;

Result<SockPtr> connectNetfilter() {
  SockPtr sock(nl_socket_alloc());
  if (!sock) return Error{"libnl: cannot allocate a netlink socket", ENOMEM};
  if (int err = nfnl_connect(sock.get()); err < 0) {
    return Error{std::string("libnl: connecting a NETLINK_NETFILTER socket: ") + nl_geterror(err)};
  }
  return sock;
}

struct Ours {
  std::set<uint32_t> v4;
  std::set<Ipv6Address> v6;
};

bool isOurs(nl_addr* a, const Ours& ours) {
  if (!a) return false;
  const void* bytes = nl_addr_get_binary_addr(a);
  if (nl_addr_get_family(a) == AF_INET && nl_addr_get_len(a) == 4) {
    uint32_t be;
    std::memcpy(&be, bytes, sizeof be);
    return ours.v4.count(ntohl(be)) > 0;
  }
  if (nl_addr_get_family(a) == AF_INET6 && nl_addr_get_len(a) == 16) {
    return ours.v6.count(Ipv6Address::fromBytes(static_cast<const uint8_t*>(bytes))) > 0;
  }
  return false;
}

struct Pass {
  const Ours* ours = nullptr;
  size_t seen = 0;
  bool more = false;  // matches beyond kMatchesPerPass
  std::vector<nfnl_ct*> matched;
  ~Pass() {
    for (nfnl_ct* ct : matched) nfnl_ct_put(ct);
  }
};

int onEntry(nl_msg* msg, void* arg) {
  auto* pass = static_cast<Pass*>(arg);
  nfnl_ct* ct = nullptr;
  if (nfnlmsg_ct_parse(nlmsg_hdr(msg), &ct) < 0) return NL_SKIP;
  ++pass->seen;
  bool ours = false;
  for (int reply : {0, 1}) {
    ours = ours || isOurs(nfnl_ct_get_src(ct, reply), *pass->ours) ||
           isOurs(nfnl_ct_get_dst(ct, reply), *pass->ours);
  }
  if (ours && pass->matched.size() < kMatchesPerPass) {
    pass->matched.push_back(ct);
    return NL_OK;
  }
  pass->more = pass->more || ours;
  nfnl_ct_put(ct);
  return NL_OK;
}

// One dump of the whole table, the matching entries kept in `pass`.
Status dump(Pass& pass) {
  auto sock = connectNetfilter();
  if (!sock) return sock.error();
  nl_socket_modify_cb(sock->get(), NL_CB_VALID, NL_CB_CUSTOM, onEntry, &pass);
  if (int err = nfnl_ct_dump_request(sock->get()); err < 0) {
    return Error{std::string("conntrack dump request: ") + nl_geterror(err)};
  }
  int err = nl_recvmsgs_default(sock->get());
  // The table changed under the dump: what was read is still worth
  // deleting, and the next pass reads it again.
  if (err == -NLE_DUMP_INTR) {
    pass.more = true;
    return okStatus();
  }
  if (err < 0) return Error{std::string("conntrack dump: ") + nl_geterror(err)};
  return okStatus();
}

}  // namespace

Result<ConntrackFlush> flushConntrack(const std::vector<ExecutorAddresses>& executors) {
  Ours ours;
  for (const auto& e : executors) {
    ours.v4.insert(e.v4);
    if (e.v6) ours.v6.insert(*e.v6);
  }
  ConntrackFlush out;
  if (executors.empty()) return out;
  Status first = okStatus();
  for (int i = 0; i < kPassesMax; ++i) {
    Pass pass;
    pass.ours = &ours;
    if (auto st = dump(pass); !st) return st.error();
    out.seen = pass.seen;
    auto sock = connectNetfilter();
    if (!sock) return sock.error();
    for (nfnl_ct* ct : pass.matched) {
      int err = nfnl_ct_del(sock->get(), ct, 0);
      if (err >= 0) {
        ++out.deleted;
      } else if (err != -NLE_OBJ_NOTFOUND && first) {
        first = Error{std::string("deleting a conntrack entry: ") + nl_geterror(err)};
      }
    }
    if (!pass.more) break;
  }
  if (!first) return first.error();
  return out;
}

}  // namespace allot
