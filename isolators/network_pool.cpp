#include "isolators/network_pool.h"

#include <arpa/inet.h>

namespace allot {

std::string ipv4ToString(uint32_t address) {
  return std::to_string(address >> 24) + "." + std::to_string((address >> 16) & 0xff) + "." +
         std::to_string((address >> 8) & 0xff) + "." + std::to_string(address & 0xff);
}

Result<uint32_t> parseIpv4(std::string_view text) {
  in_addr a{};
  std::string s(text);
  if (s.size() > 15 || inet_pton(AF_INET, s.c_str(), &a) != 1) return Error{"'" + s + "' is not an IPv4 address"};
  return ntohl(a.s_addr);
}

Result<Ipv4Cidr> Ipv4Cidr::parse(std::string_view text) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) return Error{"'" + std::string(text) + "' is not a CIDR (a.b.c.d/len)"};
  auto address = parseIpv4(text.substr(0, slash));
  if (!address) return address.error();
  std::string len(text.substr(slash + 1));
  if (len.empty() || len.size() > 2 || len.find_first_not_of("0123456789") != std::string::npos) {
    return Error{"'" + std::string(text) + "': bad prefix length"};
  }
  Ipv4Cidr c;
  c.prefixLength = std::stoi(len);
  if (c.prefixLength < 8 || c.prefixLength > 29) {
    return Error{"'" + std::string(text) + "': prefix length must be 8..29"};
  }
  c.network = *address;
  if ((c.network & ~c.mask()) != 0) {
    return Error{"'" + std::string(text) + "': host bits are set (network is " +
                 ipv4ToString(c.network & c.mask()) + "/" + len + ")"};
  }
  return c;
}

std::string Ipv4Cidr::toString() const { return ipv4ToString(network) + "/" + std::to_string(prefixLength); }

uint32_t Ipv4Cidr::mask() const { return prefixLength == 0 ? 0 : ~uint32_t(0) << (32 - prefixLength); }

Result<uint32_t> AddressPool::allocate() {
  if (used_.size() >= capacity()) {
    return Error{"address pool " + cidr_.toString() + " is exhausted (" + std::to_string(used_.size()) +
                 " executors)"};
  }
  // Linear in the number of taken addresses at worst: the set is ordered,
  // so a run of taken addresses after next_ is skipped one by one.
  for (uint64_t tries = 0; tries <= capacity(); ++tries) {
    if (!assignable(next_)) next_ = cidr_.gateway() + 1;
    uint32_t candidate = next_++;
    if (!used_.count(candidate)) {
      used_.insert(candidate);
      return candidate;
    }
  }
  return Error{"address pool " + cidr_.toString() + " is exhausted"};
}

void Ipv6Address::toBytes(uint8_t out[16]) const {
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<uint8_t>(high >> (56 - 8 * i));
    out[8 + i] = static_cast<uint8_t>(low >> (56 - 8 * i));
  }
}

Ipv6Address Ipv6Address::fromBytes(const uint8_t in[16]) {
  Ipv6Address a;
  for (int i = 0; i < 8; ++i) {
    a.high = (a.high << 8) | in[i];
    a.low = (a.low << 8) | in[8 + i];
  }
  return a;
}

std::string Ipv6Address::toString() const {
  uint8_t bytes[16];
  toBytes(bytes);
  char text[INET6_ADDRSTRLEN];
  if (!inet_ntop(AF_INET6, bytes, text, sizeof text)) return "?";
  return text;
}

Result<Ipv6Address> Ipv6Address::parse(std::string_view text) {
  std::string s(text);
  uint8_t bytes[16];
  if (s.size() >= INET6_ADDRSTRLEN || inet_pton(AF_INET6, s.c_str(), bytes) != 1) {
    return Error{"'" + s + "' is not an IPv6 address"};
  }
  return fromBytes(bytes);
}

namespace {

// The low-half bits of an IPv6 prefix's host part (prefix 64..128).
uint64_t hostMask6(int prefixLength) {
  int hostBits = 128 - prefixLength;
  return hostBits >= 64 ? ~uint64_t(0) : (uint64_t(1) << hostBits) - 1;
}

}  // namespace

Result<Ipv6Cidr> Ipv6Cidr::parse(std::string_view text) {
  std::string t(text);
  size_t slash = t.find('/');
  if (slash == std::string::npos) return Error{"'" + t + "' is not an IPv6 prefix (like fd77::/64)"};
  in_addr v4{};
  if (inet_pton(AF_INET, t.substr(0, slash).c_str(), &v4) == 1) {
    return Error{"'" + t + "' is an IPv4 CIDR; an IPv6 prefix is like fd77::/64"};
  }
  auto address = Ipv6Address::parse(t.substr(0, slash));
  if (!address) return address.error();
  std::string len = t.substr(slash + 1);
  if (len.empty() || len.size() > 3 || len.find_first_not_of("0123456789") != std::string::npos) {
    return Error{"'" + t + "': bad prefix length"};
  }
  Ipv6Cidr c;
  c.prefixLength = std::stoi(len);
  if (c.prefixLength < kShortestPrefix || c.prefixLength > kLongestPrefix) {
    return Error{"'" + t + "': prefix length must be " + std::to_string(kShortestPrefix) + ".." +
                 std::to_string(kLongestPrefix)};
  }
  c.network = *address;
  if ((c.network.low & hostMask6(c.prefixLength)) != 0) {
    Ipv6Address net{c.network.high, c.network.low & ~hostMask6(c.prefixLength)};
    return Error{"'" + t + "': host bits are set (the prefix is " + net.toString() + "/" + len + ")"};
  }
  if (c.network.high == 0) {
    return Error{"'" + t + "': ::/64 holds the unspecified, loopback and IPv4-mapped addresses"};
  }
  if ((c.network.high >> 54) == 0x3fa) return Error{"'" + t + "': a link-local prefix (fe80::/10)"};
  if ((c.network.high >> 56) == 0xff) return Error{"'" + t + "': a multicast prefix (ff00::/8)"};
  return c;
}

std::string Ipv6Cidr::toString() const { return network.toString() + "/" + std::to_string(prefixLength); }

uint64_t Ipv6Cidr::lastExecutorOffset() const { return hostMask6(prefixLength) - kReservedTop; }

bool Ipv6Cidr::contains(const Ipv6Address& a) const {
  return a.high == network.high && (a.low & ~hostMask6(prefixLength)) == network.low;
}

std::optional<Ipv6Address> Ipv6Cidr::executorAddress(const Ipv4Cidr& cidr, uint32_t v4) const {
  if (!cidr.contains(v4)) return std::nullopt;
  uint64_t offset = v4 - cidr.network;
  if (offset < 2 || offset > lastExecutorOffset()) return std::nullopt;
  return at(offset);
}

std::optional<std::string> dualStackMismatch(const Ipv4Cidr& cidr, const Ipv6Cidr& cidr6) {
  uint64_t lastV4 = uint64_t(cidr.broadcast()) - cidr.network - 1;
  if (lastV4 <= cidr6.lastExecutorOffset()) return std::nullopt;
  return cidr6.toString() + " has room for " + std::to_string(cidr6.capacity()) + " executors, " + cidr.toString() +
         " for " + std::to_string(lastV4 - 1) + ": every executor needs one address of each";
}

bool AddressPool::claim(uint32_t address) {
  if (!assignable(address)) return false;
  return used_.insert(address).second;
}

}  // namespace allot
