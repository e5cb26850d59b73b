// libnl-route calls for network/netns: namespaces, the bridge, veth pairs,
// addresses, routes and the egress qdisc. A Netlink object is one
// NETLINK_ROUTE socket; it talks to the network namespace it was opened in
// (a netlink socket stays in its namespace, whatever thread uses it).
// Errors name the interface, value and libnl error that failed.
// Thread: one caller at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "isolators/network_pool.h"

struct nl_sock;

namespace allot {

class Netlink {
 public:
  // A socket in the calling thread's network namespace.
  static Result<Netlink> open();
  Netlink() = default;  // not connected; assign from open()
  Netlink(Netlink&&) noexcept;
  Netlink& operator=(Netlink&&) noexcept;
  ~Netlink();

  // The interface's index, or an Error with errnum ENODEV.
  Result<int> ifindex(const std::string& name);
  // Creates the bridge unless it exists (then it must be a bridge), sets
  // it up; returns its index.
  Result<int> ensureBridge(const std::string& name);
  Status setUp(int ifindex);
  // Adds address/prefix (an address already there is fine).
  Status addAddress(int ifindex, uint32_t address, int prefixLength);
  // Adds address/prefix without duplicate address detection (so it is
  // usable at once, not "tentative" for a second); one already there is fine.
  Status addAddress6(int ifindex, const Ipv6Address& address, int prefixLength);
  // A veth pair: `hostName` up and enslaved to `bridgeIndex` here,
  // `peerName` (down) moved into the namespace `netnsFd`. One request.
  Status createVeth(const std::string& hostName, int bridgeIndex, int netnsFd, const std::string& peerName);
  // Deletes a link (and a veth's peer with it); a missing link is fine.
  Status deleteLink(const std::string& name);
  // default via `gateway` dev `ifindex` onlink.
  Status addDefaultRoute(int ifindex, uint32_t gateway);
  // default via `gateway` dev `ifindex` onlink, for IPv6.
  Status addDefaultRoute6(int ifindex, const Ipv6Address& gateway);
  // A tbf root qdisc shaping what leaves `ifindex` to `mbitPerS`.
  Status setEgressRate(int ifindex, double mbitPerS);
  // Back to the default qdisc (no limit); none there is fine.
  Status removeRootQdisc(int ifindex);
  // Names of the interfaces enslaved to `bridgeIndex`.
  Result<std::vector<std::string>> bridgePorts(int bridgeIndex);

 private:
  explicit Netlink(nl_sock* sock) : sock_(sock) {}
  nl_sock* sock_ = nullptr;
};

// A new network namespace (lo up) and a socket inside it. The calling
// thread enters the namespace only for the duration of the call.
struct NewNetns {
  UniqueFd fd;
  Netlink inside;
};
Result<NewNetns> createNetns();

// A socket inside the namespace `netnsFd` (entered and left the same way).
Result<Netlink> netlinkIn(int netnsFd);

// Writes a sysctl-style file under /proc/sys/net or /sys/class/net.
Status writeNetFile(const std::string& path, const std::string& value);

}  // namespace allot
