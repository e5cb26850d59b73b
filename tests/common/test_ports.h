// TCP ports for tests that need a fixed port number rather than one their
// server binds itself (port 0): a server that cannot report its port
// (ZooKeeper's Java server), or a host port that an executor is offered and
// the agent forwards.
//
// Ports come from [kTestPortLow, kTestPortHigh), below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default), so
// the kernel never hands one out to a bind(0) or an outgoing connection of
// any process; what is left to collide with is another test that picks the
// same way, which the random pick and the bind check below make rare and
// which ReservedPort rules out for as long as it is held.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <random>

namespace allot::testing {

inline constexpr uint16_t kTestPortLow = 20000;
inline constexpr uint16_t kTestPortHigh = 30000;

// A port held by a bound, not listening, dual-stack TCP socket on [::]
// (0.0.0.0 without IPv6): while held, no other socket can bind it on any
// address, and a connection to it is refused. port() is 0 when no free port
// was found (the test then fails on it).
class ReservedPort {
 public:
  ReservedPort() {
    std::random_device seed;
    std::mt19937 random(seed());
    std::uniform_int_distribution<int> pick(kTestPortLow, kTestPortHigh - 1);
    for (int attempt = 0; attempt < 200 && port_ == 0; ++attempt) {
      uint16_t port = static_cast<uint16_t>(pick(random));
      if (ephemeral(port)) continue;
      fd_ = bindAny(port);
      if (fd_ >= 0) port_ = port;
    }
  }
  ~ReservedPort() { release(); }
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;

  uint16_t port() const { return port_; }
  // Lets go of the port (for a server that binds it itself); port() stays.
  void release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  static bool ephemeral(uint16_t port) {
    int low = 32768, high = 60999;
    std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
    return port >= low && port <= high;
  }
  // Without SO_REUSEADDR: fails while anything holds the port, even a
  // connection in TIME_WAIT.
  static int bindAny(uint16_t port) {
    int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      int off = 0;
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
      sockaddr_in6 a6{};
      a6.sin6_family = AF_INET6;
      a6.sin6_addr = in6addr_any;
      a6.sin6_port = htons(port);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&a6), sizeof a6) == 0) return fd;
      ::close(fd);
      return -1;
    }
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // a host without IPv6
    if (fd < 0) return -1;
    sockaddr_in a4{};
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    a4.sin_port = htons(port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a4), sizeof a4) == 0) return fd;
    ::close(fd);
    return -1;
  }

  int fd_ = -1;
  uint16_t port_ = 0;
};

// A port free right now (see the header comment for who else may take it
// before the caller's server binds it).
inline uint16_t unusedTestPort() { return ReservedPort().port(); }

}  // namespace allot::testing
