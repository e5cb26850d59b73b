// Addresses for network/netns: an IPv4 CIDR and the pool of executor
// addresses inside it, and the optional IPv6 prefix (--network-cidr6) that
// gives every executor a second address. The first host address is the
// gateway (held by the agent's bridge); executors get the others, never the
// network or the broadcast address. An executor's IPv6 address is the one
// at the same offset in the IPv6 prefix as its IPv4 address in the IPv4
// CIDR (Ipv6Cidr::executorAddress), so one allocation names both.
// Plain data, no kernel calls; not thread-safe.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "base/result.h"

namespace allot {

// Host byte order throughout.
std::string ipv4ToString(uint32_t address);
Result<uint32_t> parseIpv4(std::string_view text);

struct Ipv4Cidr {
  uint32_t network = 0;  // host bits zero
  int prefixLength = 0;

  // "10.77.0.0/16"; host bits must be zero; prefix 8..29 (at least one
  // executor address besides the gateway, at most 2^24 addresses).
  static Result<Ipv4Cidr> parse(std::string_view text);
  std::string toString() const;
  uint32_t mask() const;
  uint32_t gateway() const { return network + 1; }
  uint32_t broadcast() const { return network | ~mask(); }
  bool contains(uint32_t address) const { return (address & mask()) == network; }
};

// An IPv6 address as two host-order halves.
struct Ipv6Address {
  uint64_t high = 0;
  uint64_t low = 0;
  auto operator<=>(const Ipv6Address&) const = default;
  std::string toString() const;                      // RFC 5952 text ("fd77::5")
  static Result<Ipv6Address> parse(std::string_view text);
  void toBytes(uint8_t out[16]) const;               // network order
  static Ipv6Address fromBytes(const uint8_t in[16]);
};

// An IPv6 executor prefix, /64 to /120: the host part fits the low 64 bits.
// Reserved: the network address (the subnet-router anycast address, RFC
// 4291 2.6.1), the gateway (network + 1) and the highest 128 addresses
// (reserved subnet anycast, RFC 2526); every other one can be an
// executor's.
struct Ipv6Cidr {
  Ipv6Address network;  // host bits zero
  int prefixLength = 0;

  static constexpr int kShortestPrefix = 64;
  static constexpr int kLongestPrefix = 120;    // 256 addresses, 126 for executors
  static constexpr uint64_t kReservedTop = 128;  // RFC 2526

  // "fd77::/64"; refuses IPv4 text, host bits, prefixes outside 64..120
  // and ranges that cannot be an executor's (unspecified/loopback/IPv4-
  // mapped or -compatible ::/64, link-local fe80::/10, multicast ff00::/8).
  static Result<Ipv6Cidr> parse(std::string_view text);
  std::string toString() const;
  Ipv6Address at(uint64_t offset) const { return {network.high, network.low + offset}; }
  Ipv6Address gateway() const { return at(1); }
  // The highest offset an executor may have (size - 1 - kReservedTop).
  uint64_t lastExecutorOffset() const;
  // Executor addresses in the prefix: lastExecutorOffset() - 1 (2 is the first).
  uint64_t capacity() const { return lastExecutorOffset() - 1; }
  bool contains(const Ipv6Address& a) const;
  // The IPv6 address of the executor whose IPv4 address is `v4` in `cidr`
  // (same offset); nothing if that offset is not an executor's here.
  std::optional<Ipv6Address> executorAddress(const Ipv4Cidr& cidr, uint32_t v4) const;
};

// Why `cidr6` cannot go with `cidr` (an executor of the IPv4 pool would
// have no IPv6 address), or nothing.
std::optional<std::string> dualStackMismatch(const Ipv4Cidr& cidr, const Ipv6Cidr& cidr6);

// One executor's addresses: IPv4 always, IPv6 with --network-cidr6.
struct ExecutorAddresses {
  uint32_t v4 = 0;
  std::optional<Ipv6Address> v6;
};

class AddressPool {
 public:
  explicit AddressPool(Ipv4Cidr cidr) : cidr_(cidr), next_(cidr.gateway() + 1) {}

  // The next free executor address after the last one handed out (so a
  // just-released address is not reused at once), or an error when every
  // address is taken.
  Result<uint32_t> allocate();
  // Marks a recovered address as taken; false if it is outside the pool,
  // the gateway, or already taken.
  bool claim(uint32_t address);
  void release(uint32_t address) { used_.erase(address); }
  bool taken(uint32_t address) const { return used_.count(address) > 0; }
  size_t usedCount() const { return used_.size(); }
  // Executor addresses in the pool (all but network, gateway, broadcast).
  uint64_t capacity() const { return uint64_t(cidr_.broadcast()) - cidr_.gateway() - 1; }
  const Ipv4Cidr& cidr() const { return cidr_; }

 private:
  bool assignable(uint32_t address) const {
    return cidr_.contains(address) && address > cidr_.gateway() && address < cidr_.broadcast();
  }

  Ipv4Cidr cidr_;
  uint32_t next_;
  std::set<uint32_t> used_;
};

}  // namespace allot
