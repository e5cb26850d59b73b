#include "isolators/network_conntrack.h"

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <netinet/in.h>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netfilter/ct.h>
#include <netlink/netfilter/nfnl.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include <cstring>
#include <map>
#include <vector>

namespace allot {
namespace {

// Matched entries held at once; a pass that finds more deletes these and
// dumps again.
constexpr size_t kMatchesPerPass = 16384;
constexpr int kPassesMax = 8;

Result<nl_sock*> connectNetfilter() {
  nl_sock* sock = nl_socket_alloc();
  if (!sock) return Error{"libnl: cannot allocate a netlink socket", ENOMEM};
  if (int err = nfnl_connect(sock); err < 0) {
    nl_socket_free(sock);
    return Error{std::string("libnl: connecting a NETLINK_NETFILTER socket: ") + nl_geterror(err)};
  }
  return sock;
}

// What goes of one address: everything, or the flows to some of its ports.
struct Rule {
  bool all = false;
  Resources::Ranges ports;
  bool matchesPort(uint16_t port) const {
    for (const auto& [b, e] : ports) {
      if (port >= b && port <= e) return true;
    }
    return false;
  }
};

struct Rules {
  std::map<uint32_t, Rule> v4;
  std::map<Ipv6Address, Rule> v6;
};

void addRule(Rule& r, const ExecutorFlows& f) {
  if (f.ports.empty()) r.all = true;
  r.ports.insert(r.ports.end(), f.ports.begin(), f.ports.end());
}

// One direction of an entry, read from its attributes as they are.
struct Tuple {
  int family = 0;  // AF_INET, AF_INET6, 0: unreadable
  const uint8_t* src = nullptr;
  const uint8_t* dst = nullptr;
  uint8_t proto = 0;
  uint16_t srcPort = 0;  // host order; 0 without one
};

Tuple readTuple(nlattr* attr) {
  Tuple t;
  if (!attr) return t;
  nlattr* tb[CTA_TUPLE_MAX + 1];
  if (nla_parse_nested(tb, CTA_TUPLE_MAX, attr, nullptr) < 0 || !tb[CTA_TUPLE_IP]) return t;
  nlattr* ip[CTA_IP_MAX + 1];
  if (nla_parse_nested(ip, CTA_IP_MAX, tb[CTA_TUPLE_IP], nullptr) < 0) return t;
  if (ip[CTA_IP_V4_SRC] && ip[CTA_IP_V4_DST] && nla_len(ip[CTA_IP_V4_SRC]) == 4 && nla_len(ip[CTA_IP_V4_DST]) == 4) {
    t.family = AF_INET;
    t.src = static_cast<const uint8_t*>(nla_data(ip[CTA_IP_V4_SRC]));
    t.dst = static_cast<const uint8_t*>(nla_data(ip[CTA_IP_V4_DST]));
  } else if (ip[CTA_IP_V6_SRC] && ip[CTA_IP_V6_DST] && nla_len(ip[CTA_IP_V6_SRC]) == 16 &&
             nla_len(ip[CTA_IP_V6_DST]) == 16) {
    t.family = AF_INET6;
    t.src = static_cast<const uint8_t*>(nla_data(ip[CTA_IP_V6_SRC]));
    t.dst = static_cast<const uint8_t*>(nla_data(ip[CTA_IP_V6_DST]));
  } else {
    return t;
  }
  nlattr* proto[CTA_PROTO_MAX + 1];
  if (tb[CTA_TUPLE_PROTO] && nla_parse_nested(proto, CTA_PROTO_MAX, tb[CTA_TUPLE_PROTO], nullptr) >= 0) {
    if (proto[CTA_PROTO_NUM]) t.proto = nla_get_u8(proto[CTA_PROTO_NUM]);
    if (proto[CTA_PROTO_SRC_PORT]) t.srcPort = ntohs(nla_get_u16(proto[CTA_PROTO_SRC_PORT]));
  }
  return t;
}

const Rule* ruleOf(const Rules& rules, int family, const uint8_t* a) {
  if (family == AF_INET) {
    uint32_t be;
    std::memcpy(&be, a, sizeof be);
    auto it = rules.v4.find(ntohl(be));
    return it == rules.v4.end() ? nullptr : &it->second;
  }
  auto it = rules.v6.find(Ipv6Address::fromBytes(a));
  return it == rules.v6.end() ? nullptr : &it->second;
}

bool matches(const Rules& rules, const Tuple& orig, const Tuple& reply) {
  for (const Tuple* t : {&orig, &reply}) {
    if (!t->family) continue;
    for (const uint8_t* a : {t->src, t->dst}) {
      const Rule* r = ruleOf(rules, t->family, a);
      if (r && r->all) return true;
    }
  }
  // A flow made to the executor's port: it answers from that address and port.
  if (reply.family && (reply.proto == IPPROTO_TCP || reply.proto == IPPROTO_UDP)) {
    const Rule* r = ruleOf(rules, reply.family, reply.src);
    if (r && r->matchesPort(reply.srcPort)) return true;
  }
  return false;
}

struct Pass {
  const Rules* rules = nullptr;
  size_t seen = 0;
  bool more = false;  // matches beyond kMatchesPerPass
  std::vector<nfnl_ct*> matched;
  ~Pass() {
    for (nfnl_ct* ct : matched) nfnl_ct_put(ct);
  }
};

int onEntry(nl_msg* msg, void* arg) {
  auto* pass = static_cast<Pass*>(arg);
  nlmsghdr* hdr = nlmsg_hdr(msg);
  nlattr* tb[CTA_MAX + 1];
  if (nlmsg_parse(hdr, sizeof(nfgenmsg), tb, CTA_MAX, nullptr) < 0) return NL_SKIP;
  ++pass->seen;
  if (!matches(*pass->rules, readTuple(tb[CTA_TUPLE_ORIG]), readTuple(tb[CTA_TUPLE_REPLY]))) return NL_OK;
  if (pass->matched.size() >= kMatchesPerPass) {
    pass->more = true;
    return NL_OK;
  }
  // Only a match becomes an object (for its deletion by tuple).
  nfnl_ct* ct = nullptr;
  if (nfnlmsg_ct_parse(hdr, &ct) < 0) return NL_SKIP;
  pass->matched.push_back(ct);
  return NL_OK;
}

// One dump of the table's `family` entries (the kernel filters by the
// request's family) on `sock`, the matching entries kept in `pass`.
Status dump(nl_sock* sock, Pass& pass, int family) {
  if (int err = nfnl_send_simple(sock, NFNL_SUBSYS_CTNETLINK, IPCTNL_MSG_CT_GET, NLM_F_DUMP,
                                 static_cast<uint8_t>(family), 0);
      err < 0) {
    return Error{std::string("conntrack dump request: ") + nl_geterror(err)};
  }
  // The entry callback for this dump only; deletions keep the socket's own.
  nl_cb* cb = nl_cb_clone(nl_socket_get_cb(sock));
  if (!cb) return Error{"libnl: out of memory", ENOMEM};
  nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, onEntry, &pass);
  int err = nl_recvmsgs(sock, cb);
  nl_cb_put(cb);
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

ConntrackFlusher::~ConntrackFlusher() {
  if (sock_) nl_socket_free(sock_);
}

Result<ConntrackFlush> ConntrackFlusher::flush(const std::vector<ExecutorFlows>& flows) {
  Rules rules;
  for (const auto& f : flows) {
    addRule(rules.v4[f.addresses.v4], f);
    if (f.addresses.v6) addRule(rules.v6[*f.addresses.v6], f);
  }
  ConntrackFlush out;
  if (rules.v4.empty()) return out;
  if (!sock_) {
    auto sock = connectNetfilter();
    if (!sock) return sock.error();
    sock_ = *sock;
  }
  Status first = okStatus();
  for (int family : {AF_INET, AF_INET6}) {
    if (family == AF_INET6 && rules.v6.empty()) continue;
    for (int i = 0; i < kPassesMax; ++i) {
      Pass pass;
      pass.rules = &rules;
      if (auto st = dump(sock_, pass, family); !st) {
        // Whatever the socket holds now is not worth reading: a new one next time.
        nl_socket_free(sock_);
        sock_ = nullptr;
        return st.error();
      }
      if (i == 0) out.seen += pass.seen;
      for (nfnl_ct* ct : pass.matched) {
        int err = nfnl_ct_del(sock_, ct, 0);
        if (err >= 0) {
          ++out.deleted;
        } else if (err != -NLE_OBJ_NOTFOUND && first) {
          first = Error{std::string("deleting a conntrack entry: ") + nl_geterror(err)};
        }
      }
      if (!pass.more) break;
    }
  }
  if (!first) return first.error();
  return out;
}

Result<ConntrackFlush> flushConntrack(const std::vector<ExecutorFlows>& flows) {
  ConntrackFlusher flusher;
  return flusher.flush(flows);
}

Result<ConntrackFlush> flushConntrack(const std::vector<ExecutorAddresses>& executors) {
  std::vector<ExecutorFlows> flows;
  for (const auto& e : executors) flows.push_back({e, {}});
  return flushConntrack(flows);
}

}  // namespace allot
