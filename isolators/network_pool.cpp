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

bool AddressPool::claim(uint32_t address) {
  if (!assignable(address)) return false;
  return used_.insert(address).second;
}

}  // namespace allot
