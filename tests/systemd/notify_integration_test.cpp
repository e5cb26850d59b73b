// sd_notify for real: allot-master started with $NOTIFY_SOCKET pointing at a
// datagram socket this test owns (what systemd does for Type=notify) sends
// READY=1 once listening and WATCHDOG=1 at half of $WATCHDOG_USEC.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "tests/agent/cluster.h"

namespace allot::testing {
namespace {

TEST(SystemdNotify, MasterSendsReadyAndFeedsTheWatchdogFromItsLoop) {
  const char* master = envOr("ALLOT_MASTER");
  if (!master) GTEST_SKIP() << "ALLOT_MASTER not set (allot-master not built)";
  char tmpl[] = "/tmp/allot-notify-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string path = dir + "/notify";
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  setenv("WATCHDOG_USEC", "400000", 1);  // pings every 200 ms
  Child m({master, "--listen", "127.0.0.1:0"}, dir + "/out", dir + "/err");
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");

  int ready = 0, pings = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < deadline && (ready == 0 || pings < 4)) {
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) continue;
    std::string msg(buf, static_cast<size_t>(n));
    if (msg.find("READY=1") != std::string::npos) ++ready;
    if (msg.find("WATCHDOG=1") != std::string::npos) ++pings;
  }
  m.kill(SIGTERM);
  close(fd);
  std::string err = m.err();
  fs::remove_all(dir);
  EXPECT_EQ(ready, 1) << err;
  EXPECT_GE(pings, 4) << err;
}

}  // namespace
}  // namespace allot::testing
