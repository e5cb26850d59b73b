// The TCP check's question to the kernel (sdk/health_listeners.h) against
// real sockets of this process's network namespace: which listeners a
// connection to 127.0.0.1 reaches, a full accept queue, answers' age.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/unique_fd.h"
#include "sdk/health_listeners.h"

namespace allot {
namespace {

using namespace std::chrono_literals;

uint16_t portOf(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

// A socket bound to `address` on a kernel-chosen port; listening with
// `backlog` unless it is negative.
UniqueFd bound4(const char* address, int backlog) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, address, &a.sin_addr);
  EXPECT_EQ(bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << address;
  if (backlog >= 0) {
    EXPECT_EQ(listen(fd.get(), backlog), 0);
  }
  return fd;
}

UniqueFd listening6(bool v6only) {
  UniqueFd fd(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return fd;
  int on = v6only ? 1 : 0;
  setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd.get(), 8) != 0) return UniqueFd();
  return fd;
}

// Each question at its own time, so no answer comes from an earlier dump.
class ListenerTableTest : public ::testing::Test {
 protected:
  LoopbackListeners ask(uint16_t port) {
    at_ += kListenerDumpMaxAge + 1ms;
    auto found = table_.loopback(port, at_);
    if (!found) ADD_FAILURE() << found.error().describe();
    return found ? *found : LoopbackListeners{};
  }
  ListenerTable table_;
  TimePoint at_ = SteadyClock::now();
};

TEST_F(ListenerTableTest, BoundButNotListeningIsNothing) {
  UniqueFd fd = bound4("127.0.0.1", -1);
  EXPECT_EQ(ask(portOf(fd.get())).listeners, 0u);
}

TEST_F(ListenerTableTest, LoopbackAndAnyAddressListenersAccept) {
  for (const char* address : {"127.0.0.1", "0.0.0.0"}) {
    UniqueFd fd = bound4(address, 8);
    LoopbackListeners found = ask(portOf(fd.get()));
    EXPECT_EQ(found.listeners, 1u) << address;
    EXPECT_EQ(found.accepting, 1u) << address;
  }
}

TEST_F(ListenerTableTest, ListenerOnAnotherAddressIsNotReached) {
  UniqueFd fd = bound4("127.0.0.2", 8);
  EXPECT_EQ(ask(portOf(fd.get())).listeners, 0u) << "a connection to 127.0.0.1 would be refused";
}

TEST_F(ListenerTableTest, DualStackListenerCountsAndV6OnlyDoesNot) {
  UniqueFd dual = listening6(false);
  UniqueFd only = listening6(true);
  if (!dual.valid() || !only.valid()) GTEST_SKIP() << "no IPv6 in this network namespace";
  EXPECT_EQ(ask(portOf(dual.get())).accepting, 1u);
  EXPECT_EQ(ask(portOf(only.get())).listeners, 0u) << "IPV6_V6ONLY takes no IPv4 connection";
}

// backlog 0: the kernel takes one connection into the queue, then drops
// SYNs while nobody accepts.
TEST_F(ListenerTableTest, FullAcceptQueueIsNotAccepting) {
  UniqueFd server = bound4("127.0.0.1", 0);
  uint16_t port = portOf(server.get());
  UniqueFd client(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connect(client.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
  pollfd p{client.get(), POLLOUT, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1);
  LoopbackListeners found = ask(port);
  EXPECT_EQ(found.listeners, 1u);
  EXPECT_EQ(found.accepting, 0u);
  sockaddr_in peer{};
  socklen_t len = sizeof(peer);
  UniqueFd accepted(accept(server.get(), reinterpret_cast<sockaddr*>(&peer), &len));
  EXPECT_EQ(ask(port).accepting, 1u) << "room again once accepted";
}

TEST_F(ListenerTableTest, AnswersComeFromOneDumpForItsMaxAge) {
  UniqueFd fd = bound4("127.0.0.1", -1);
  uint16_t port = portOf(fd.get());
  TimePoint t0 = SteadyClock::now();
  ASSERT_TRUE(table_.loopback(port, t0));
  ASSERT_EQ(listen(fd.get(), 8), 0);
  auto cached = table_.loopback(port, t0 + kListenerDumpMaxAge);
  ASSERT_TRUE(cached);
  EXPECT_EQ(cached->listeners, 0u) << "asked again within the age: the same dump";
  auto fresh = table_.loopback(port, t0 + kListenerDumpMaxAge + 1ms);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->listeners, 1u);
}

}  // namespace
}  // namespace allot
