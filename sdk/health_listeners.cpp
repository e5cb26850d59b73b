#include "sdk/health_listeners.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace allot {
namespace {

constexpr int kTcpListen = 10;  // TCP_LISTEN in the kernel's tcp_states.h
constexpr uint32_t kLoopbackIfindex = 1;  // lo is 1 in every namespace
// A dump of one port's listeners fits a few reads; a full one is 32 KiB.
constexpr size_t kAnswerBufferBytes = 32 * 1024;

// SOCK_DIAG_BY_FAMILY dump of every TCP listener of one family.
struct DumpRequest {
  nlmsghdr header;
  inet_diag_req_v2 request;
};

DumpRequest makeRequest(int family, uint32_t sequence) {
  DumpRequest r{};
  r.header.nlmsg_len = sizeof(r);
  r.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  r.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  r.header.nlmsg_seq = sequence;
  r.request.sdiag_family = static_cast<uint8_t>(family);
  r.request.sdiag_protocol = IPPROTO_TCP;
  r.request.idiag_states = 1u << kTcpListen;
  return r;
}

// The IPV6_V6ONLY flag the kernel appends to an IPv6 socket's entry.
bool v6Only(const nlmsghdr* message, const inet_diag_msg* entry) {
  const char* end = reinterpret_cast<const char*>(message) + message->nlmsg_len;
  const char* at = reinterpret_cast<const char*>(entry) + NLMSG_ALIGN(sizeof(*entry));
  while (at + NLA_HDRLEN <= end) {
    nlattr a;
    std::memcpy(&a, at, sizeof(a));
    if (a.nla_len < NLA_HDRLEN || at + a.nla_len > end) return false;
    if (a.nla_type == INET_DIAG_SKV6ONLY && a.nla_len > NLA_HDRLEN) return at[NLA_HDRLEN] != 0;
    at += NLA_ALIGN(a.nla_len);
  }
  return false;
}

// Whether a connection to 127.0.0.1 reaches this listener.
bool reachesLoopback(const nlmsghdr* message, const inet_diag_msg* entry) {
  if (entry->id.idiag_if != 0 && entry->id.idiag_if != kLoopbackIfindex) return false;
  const uint32_t* a = entry->id.idiag_src;
  uint32_t loopback = htonl(INADDR_LOOPBACK);
  if (entry->idiag_family == AF_INET) return a[0] == 0 || a[0] == loopback;
  if (entry->idiag_family != AF_INET6 || a[0] != 0 || a[1] != 0) return false;
  if (a[2] == 0 && a[3] == 0) return !v6Only(message, entry);  // ::
  return a[2] == htonl(0xffff) && a[3] == loopback;            // ::ffff:127.0.0.1
}

}  // namespace

Result<LoopbackListeners> ListenerTable::loopback(uint16_t port, TimePoint now) {
  if (!dumpedAt_ || now - *dumpedAt_ > kListenerDumpMaxAge || now < *dumpedAt_) {
    auto fresh = refresh();
    if (!fresh) return fresh.error();
    dumpedAt_ = now;
  }
  auto it = ports_.find(port);
  return it == ports_.end() ? LoopbackListeners{} : it->second;
}

Result<void> ListenerTable::refresh() {
  dumpedAt_.reset();
  ports_.clear();
  listed_ = 0;
  if (!socket_.valid()) {
    socket_ = UniqueFd(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
    if (!socket_.valid()) return Error::fromErrno("socket(NETLINK_SOCK_DIAG)");
    buffer_.resize(kAnswerBufferBytes);
  }
  for (int family : {AF_INET, AF_INET6}) {
    auto done = dump(family);
    if (!done) {
      socket_.reset();  // a dump read halfway would answer the next question
      ports_.clear();
      return done.error();
    }
  }
  return okStatus();
}

Result<void> ListenerTable::dump(int family) {
  uint32_t sequence = ++sequence_;
  DumpRequest request = makeRequest(family, sequence);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(socket_.get(), &request, sizeof(request), 0, reinterpret_cast<sockaddr*>(&kernel),
             sizeof(kernel)) != static_cast<ssize_t>(sizeof(request))) {
    return Error::fromErrno("sock_diag: asking for TCP listeners");
  }
  // Each read is one datagram of whole messages; the dump ends with DONE.
  while (true) {
    auto ended = readAnswer(sequence);
    if (!ended) return ended.error();
    if (*ended) return okStatus();
  }
}

// True once the dump's DONE came. Every read holds at least one listener,
// so the listeners' limit bounds the reads.
Result<bool> ListenerTable::readAnswer(uint32_t sequence) {
  // MSG_TRUNC: the datagram's full length, to tell a cut one.
  ssize_t n = recv(socket_.get(), buffer_.data(), buffer_.size(), MSG_DONTWAIT | MSG_TRUNC);
  if (n < 0) return Error::fromErrno("sock_diag: reading TCP listeners");
  if (static_cast<size_t>(n) > buffer_.size()) return Error{"sock_diag: an answer larger than the buffer", 0};
  size_t left = static_cast<size_t>(n);
  for (auto* m = reinterpret_cast<nlmsghdr*>(buffer_.data()); NLMSG_OK(m, left); m = NLMSG_NEXT(m, left)) {
    if (m->nlmsg_seq != sequence) continue;  // from a question abandoned earlier
    if (m->nlmsg_type == NLMSG_DONE) return true;
    if (m->nlmsg_type == NLMSG_ERROR) {
      int code = 0;
      if (m->nlmsg_len >= NLMSG_LENGTH(sizeof(nlmsgerr))) {
        code = -static_cast<const nlmsgerr*>(NLMSG_DATA(m))->error;
      }
      return Error{"sock_diag: TCP listeners refused", code};
    }
    if (m->nlmsg_type != SOCK_DIAG_BY_FAMILY || m->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) continue;
    if (++listed_ > kHealthListenersMax) {
      return Error{"sock_diag: more than " + std::to_string(kHealthListenersMax) + " TCP listeners", 0};
    }
    const auto* entry = static_cast<const inet_diag_msg*>(NLMSG_DATA(m));
    if (entry->idiag_state != kTcpListen || !reachesLoopback(m, entry)) continue;
    LoopbackListeners& port = ports_[ntohs(entry->id.idiag_sport)];
    ++port.listeners;
    // A listener's rqueue is its accept queue, wqueue the backlog; the
    // kernel drops a SYN once the queue is past it (sk_acceptq_is_full).
    if (entry->idiag_rqueue <= entry->idiag_wqueue) ++port.accepting;
  }
  return false;
}

}  // namespace allot
