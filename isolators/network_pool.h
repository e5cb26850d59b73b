// IPv4 addresses for network/netns: a CIDR and the pool of executor
// addresses inside it. The first host address is the gateway (held by the
// agent's bridge); executors get the others, never the network or the
// broadcast address. Plain data, no kernel calls; not thread-safe.
#pragma once

#include <cstdint>
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
