#include "isolators/network_links.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/bridge.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/route/route.h>
#include <netlink/route/tc.h>

#include "isolators/network_pool.h"

#include <algorithm>
#include <fstream>
#include <cerrno>

namespace allot {
namespace {

// libnl returns negative NLE_* codes; map the common ones back to errno.
int errnoOf(int nle) {
  switch (-nle) {
    case NLE_EXIST: return EEXIST;
    case NLE_OBJ_NOTFOUND:
    case NLE_NODEV: return ENODEV;
    case NLE_PERM: return EPERM;
    case NLE_NOMEM: return ENOMEM;
    case NLE_BUSY: return EBUSY;
    case NLE_INVAL: return EINVAL;
    default: return EIO;
  }
}

Error nlError(const std::string& what, int nle) {
  return Error{what + ": " + nl_geterror(nle), errnoOf(nle)};
}

struct LinkPut {
  void operator()(rtnl_link* l) const { rtnl_link_put(l); }
};
using LinkPtr = std::unique_ptr<rtnl_link, LinkPut>;

struct NlAddrPut {
  void operator()(nl_addr* a) const { nl_addr_put(a); }
};
using NlAddrPtr = std::unique_ptr<nl_addr, NlAddrPut>;

NlAddrPtr ipv4Addr(uint32_t address, int prefixLength) {
  uint32_t be = htonl(address);
  NlAddrPtr a(nl_addr_build(AF_INET, &be, sizeof be));
  if (a) nl_addr_set_prefixlen(a.get(), prefixLength);
  return a;
}

NlAddrPtr ipv6Addr(const Ipv6Address& address, int prefixLength) {
  uint8_t bytes[16];
  address.toBytes(bytes);
  NlAddrPtr a(nl_addr_build(AF_INET6, bytes, sizeof bytes));
  if (a) nl_addr_set_prefixlen(a.get(), prefixLength);
  return a;
}

using AddrPtr = std::unique_ptr<rtnl_addr, void (*)(rtnl_addr*)>;

Status addAddressOn(nl_sock* sock, int ifindex, NlAddrPtr local, int prefixLength, int flags,
                    const std::string& text) {
  AddrPtr addr(rtnl_addr_alloc(), rtnl_addr_put);
  if (!addr || !local) return Error{"libnl: out of memory", ENOMEM};
  rtnl_addr_set_ifindex(addr.get(), ifindex);
  rtnl_addr_set_local(addr.get(), local.get());
  rtnl_addr_set_prefixlen(addr.get(), prefixLength);
  if (flags) rtnl_addr_set_flags(addr.get(), flags);
  int err = rtnl_addr_add(sock, addr.get(), NLM_F_CREATE | NLM_F_EXCL);
  if (err < 0 && err != -NLE_EXIST) {
    return nlError("adding address " + text + "/" + std::to_string(prefixLength) + " to interface " +
                       std::to_string(ifindex),
                   err);
  }
  return okStatus();
}

Status addDefaultRouteOn(nl_sock* sock, int ifindex, int family, NlAddrPtr dst, NlAddrPtr via,
                         const std::string& text) {
  std::unique_ptr<rtnl_route, void (*)(rtnl_route*)> route(rtnl_route_alloc(), rtnl_route_put);
  rtnl_nexthop* nh = rtnl_route_nh_alloc();
  if (!route || !dst || !via || !nh) {
    if (nh) rtnl_route_nh_free(nh);
    return Error{"libnl: out of memory", ENOMEM};
  }
  rtnl_route_set_family(route.get(), family);
  rtnl_route_set_dst(route.get(), dst.get());
  rtnl_route_set_table(route.get(), RT_TABLE_MAIN);
  rtnl_route_set_protocol(route.get(), RTPROT_STATIC);
  rtnl_route_nh_set_ifindex(nh, ifindex);
  rtnl_route_nh_set_gateway(nh, via.get());
  rtnl_route_nh_set_flags(nh, RTNH_F_ONLINK);
  rtnl_route_add_nexthop(route.get(), nh);  // the route owns nh now
  if (int err = rtnl_route_add(sock, route.get(), NLM_F_CREATE); err < 0 && err != -NLE_EXIST) {
    return nlError("adding the default route via " + text, err);
  }
  return okStatus();
}

}  // namespace

Result<Netlink> Netlink::open() {
  nl_sock* sock = nl_socket_alloc();
  if (!sock) return Error{"libnl: cannot allocate a netlink socket", ENOMEM};
  if (int err = nl_connect(sock, NETLINK_ROUTE); err < 0) {
    nl_socket_free(sock);
    return nlError("libnl: connecting a NETLINK_ROUTE socket", err);
  }
  return Netlink(sock);
}

Netlink::Netlink(Netlink&& o) noexcept : sock_(std::exchange(o.sock_, nullptr)) {}

Netlink& Netlink::operator=(Netlink&& o) noexcept {
  if (this != &o) {
    if (sock_) nl_socket_free(sock_);
    sock_ = std::exchange(o.sock_, nullptr);
  }
  return *this;
}

Netlink::~Netlink() {
  if (sock_) nl_socket_free(sock_);
}

Result<int> Netlink::ifindex(const std::string& name) {
  rtnl_link* raw = nullptr;
  if (int err = rtnl_link_get_kernel(sock_, 0, name.c_str(), &raw); err < 0) {
    return nlError("interface " + name, err);
  }
  LinkPtr link(raw);
  return rtnl_link_get_ifindex(link.get());
}

Result<int> Netlink::ensureBridge(const std::string& name) {
  rtnl_link* raw = nullptr;
  int err = rtnl_link_get_kernel(sock_, 0, name.c_str(), &raw);
  if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) {
    if (int e = rtnl_link_bridge_add(sock_, name.c_str()); e < 0 && e != -NLE_EXIST) {
      return nlError("creating bridge " + name, e);
    }
    err = rtnl_link_get_kernel(sock_, 0, name.c_str(), &raw);
  }
  if (err < 0) return nlError("bridge " + name, err);
  LinkPtr link(raw);
  const char* type = rtnl_link_get_type(link.get());
  if (!type || std::string(type) != "bridge") {
    return Error{"--network-bridge " + name + " exists and is not a bridge (it is a " +
                 std::string(type ? type : "device without a type") + ")"};
  }
  int index = rtnl_link_get_ifindex(link.get());
  // No duplicate address detection on the bridge's IPv6 addresses, set
  // before it comes up: its link-local address is made at "up" and stays
  // tentative until DAD ends 1-2 s after the first executor's veth brings
  // carrier, and until then the host cannot resolve executors' addresses
  // for IPv6 traffic it forwards from other hosts (neighbour solicitations
  // need a usable link-local source). Without IPv6 there is no such file.
  Status noDad = writeNetFile("/proc/sys/net/ipv6/conf/" + name + "/accept_dad", "0");
  if (!noDad && noDad.error().errnum != ENOENT) return noDad.error();
  // No IGMP/MLD snooping: its ports are isolated and only the host routes
  // between them, so the multicast database would only cost. With it, every
  // executor's eth0 joins groups (IPv6 solicited-node) and deleting its veth
  // waits, under the rtnl lock, for the bridge's multicast garbage
  // collection (br_multicast_del_port: ~25 ms per executor end on this
  // machine, during which no veth can be made; docs/benchmarks.md).
  if (auto st = writeNetFile("/sys/class/net/" + name + "/bridge/multicast_snooping", "0"); !st) return st.error();
  if (auto st = setUp(index); !st) return st.error();
  return index;
}

Status Netlink::setUp(int ifindex) {
  LinkPtr orig(rtnl_link_alloc()), change(rtnl_link_alloc());
  rtnl_link_set_ifindex(orig.get(), ifindex);
  rtnl_link_set_flags(change.get(), IFF_UP);
  if (int err = rtnl_link_change(sock_, orig.get(), change.get(), 0); err < 0) {
    return nlError("setting interface " + std::to_string(ifindex) + " up", err);
  }
  return okStatus();
}

Status Netlink::addAddress(int ifindex, uint32_t address, int prefixLength) {
  return addAddressOn(sock_, ifindex, ipv4Addr(address, prefixLength), prefixLength, 0, ipv4ToString(address));
}

Status Netlink::addAddress6(int ifindex, const Ipv6Address& address, int prefixLength) {
  return addAddressOn(sock_, ifindex, ipv6Addr(address, prefixLength), prefixLength, IFA_F_NODAD,
                      address.toString());
}

Status Netlink::createVeth(const std::string& hostName, int bridgeIndex, int netnsFd, const std::string& peerName) {
  LinkPtr host(rtnl_link_veth_alloc());
  if (!host) return Error{"libnl: out of memory", ENOMEM};
  LinkPtr peer(rtnl_link_veth_get_peer(host.get()));  // a reference (libnl >= 3.2.26)
  rtnl_link_set_name(host.get(), hostName.c_str());
  rtnl_link_set_master(host.get(), bridgeIndex);
  rtnl_link_set_flags(host.get(), IFF_UP);
  // Not IFF_UP here: the kernel opens the peer before the pair is linked
  // (veth_open fails with ENOTCONN); the caller sets it up inside.
  rtnl_link_set_name(peer.get(), peerName.c_str());
  rtnl_link_set_ns_fd(peer.get(), netnsFd);
  if (int err = rtnl_link_add(sock_, host.get(), NLM_F_CREATE | NLM_F_EXCL); err < 0) {
    return nlError("creating veth " + hostName + " (peer " + peerName + " in the executor's namespace)", err);
  }
  return okStatus();
}

Status Netlink::deleteLink(const std::string& name) {
  LinkPtr link(rtnl_link_alloc());
  rtnl_link_set_name(link.get(), name.c_str());
  int err = rtnl_link_delete(sock_, link.get());
  if (err < 0 && err != -NLE_OBJ_NOTFOUND && err != -NLE_NODEV) return nlError("deleting interface " + name, err);
  return okStatus();
}

Status Netlink::addDefaultRoute(int ifindex, uint32_t gateway) {
  return addDefaultRouteOn(sock_, ifindex, AF_INET, ipv4Addr(0, 0), ipv4Addr(gateway, 32), ipv4ToString(gateway));
}

Status Netlink::addDefaultRoute6(int ifindex, const Ipv6Address& gateway) {
  return addDefaultRouteOn(sock_, ifindex, AF_INET6, ipv6Addr({}, 0), ipv6Addr(gateway, 128), gateway.toString());
}

Status Netlink::setEgressRate(int ifindex, double mbitPerS) {
  std::unique_ptr<rtnl_qdisc, void (*)(rtnl_qdisc*)> q(rtnl_qdisc_alloc(), rtnl_qdisc_put);
  if (!q) return Error{"libnl: out of memory", ENOMEM};
  // tbf takes bytes per second in an int: 16 Gbit/s at most.
  double bytesPerS = std::clamp(mbitPerS * 1e6 / 8, 1e4, 2e9);
  int rate = static_cast<int>(bytesPerS);
  // A 10 ms bucket (at least 16 KiB so GSO-sized packets pass) keeps the
  // long-run rate exact; a 50 ms queue bounds the added latency.
  int burst = std::max(16 * 1024, rate / 100);
  int limit = std::max(2 * burst, rate / 20);
  rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
  rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_ROOT);
  rtnl_tc_set_handle(TC_CAST(q.get()), TC_HANDLE(1, 0));
  if (int err = rtnl_tc_set_kind(TC_CAST(q.get()), "tbf"); err < 0) return nlError("qdisc kind tbf", err);
  rtnl_qdisc_tbf_set_rate(q.get(), rate, burst, 0);
  rtnl_qdisc_tbf_set_limit(q.get(), limit);
  if (int err = rtnl_qdisc_add(sock_, q.get(), NLM_F_CREATE | NLM_F_REPLACE); err < 0) {
    return nlError("adding tbf qdisc (" + std::to_string(mbitPerS) + " Mbit/s) to interface " +
                       std::to_string(ifindex),
                   err);
  }
  return okStatus();
}

Status Netlink::removeRootQdisc(int ifindex) {
  std::unique_ptr<rtnl_qdisc, void (*)(rtnl_qdisc*)> q(rtnl_qdisc_alloc(), rtnl_qdisc_put);
  if (!q) return Error{"libnl: out of memory", ENOMEM};
  rtnl_tc_set_ifindex(TC_CAST(q.get()), ifindex);
  rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_ROOT);
  int err = rtnl_qdisc_delete(sock_, q.get());
  if (err < 0 && err != -NLE_OBJ_NOTFOUND && err != -NLE_NOADDR && err != -NLE_INVAL) {
    return nlError("removing the root qdisc of interface " + std::to_string(ifindex), err);
  }
  return okStatus();
}

Result<std::vector<std::string>> Netlink::bridgePorts(int bridgeIndex) {
  nl_cache* cache = nullptr;
  if (int err = rtnl_link_alloc_cache(sock_, AF_UNSPEC, &cache); err < 0) return nlError("listing interfaces", err);
  std::vector<std::string> out;
  for (nl_object* o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
    auto* link = reinterpret_cast<rtnl_link*>(o);
    if (rtnl_link_get_master(link) == bridgeIndex) out.push_back(rtnl_link_get_name(link));
  }
  nl_cache_free(cache);
  return out;
}

Result<NewNetns> createNetns() {
  UniqueFd self(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!self.valid()) return Error::fromErrno("opening /proc/thread-self/ns/net");
  if (unshare(CLONE_NEWNET) != 0) return Error::fromErrno("unshare(CLONE_NEWNET)");
  NewNetns made;
  made.fd = UniqueFd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  int openErrno = errno;
  auto sock = Netlink::open();
  // Back to the agent's namespace before anything else can fail; staying in
  // the new one would move every later socket of this thread there.
  if (setns(self.get(), CLONE_NEWNET) != 0) {
    return Error::fromErrno("returning to the agent's network namespace (setns)");
  }
  if (!made.fd.valid()) return Error{"opening the new namespace's /proc/thread-self/ns/net", openErrno};
  if (!sock) return sock.error();
  made.inside = std::move(*sock);
  auto lo = made.inside.ifindex("lo");
  if (!lo) return lo.error();
  if (auto st = made.inside.setUp(*lo); !st) return st.error();
  return made;
}

Result<Netlink> netlinkIn(int netnsFd) {
  UniqueFd self(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!self.valid()) return Error::fromErrno("opening /proc/thread-self/ns/net");
  if (setns(netnsFd, CLONE_NEWNET) != 0) return Error::fromErrno("entering the executor's network namespace");
  auto sock = Netlink::open();
  if (setns(self.get(), CLONE_NEWNET) != 0) {
    return Error::fromErrno("returning to the agent's network namespace (setns)");
  }
  return sock;
}

Status writeNetFile(const std::string& path, const std::string& value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return Error::fromErrno("opening " + path);
  if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return Error::fromErrno("writing '" + value + "' to " + path);
  }
  return okStatus();
}

}  // namespace allot
