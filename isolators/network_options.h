// Settings of network/netns (flags --network-*; see network_isolator.h).
#pragma once

#include <cstdint>
#include <string>

namespace allot {

struct NetworkOptions {
  std::string bridge = "allot0";
  std::string cidr = "10.77.0.0/16";
  std::string cidr6;  // "": IPv4 only; else every executor gets an address here too
  double egressMbitPerS = 0;  // 0: unlimited (an executor's net_mbps wins)
  bool allowExecutorTraffic = false;
  std::string stateDir;  // "": /run/allot/network/<bridge>
  int64_t warmPool = 4;  // networks made ahead of launches (0: none)
};

}  // namespace allot
