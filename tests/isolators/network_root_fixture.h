// The fixture of the network/netns root tests (network_root_*_test.cpp):
// real namespaces, veths, a bridge, nftables and tbf. Every test has its own
// bridge, CIDR, state dir and "outside host" namespace (names carry the
// test's pid), sends traffic only to loopback and to namespaces it made, and
// its TearDown checks that no interface, address, nftables table, namespace
// or process of the test remains.
#pragma once

#include <sys/types.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/asio.h"
#include "base/uring_poller.h"
#include "isolators/network_isolator.h"
#include "launcher/launcher.h"
#include "tests/common/test_util.h"

namespace allot::nettest {

// For the tests of this fixture (their own namespace).
using namespace std::chrono_literals;
using allot::testing::readFile;
using allot::testing::runUntil;


// Listens on every port in argv, answers each connection with
// "<ALLOT_NETWORK_ADDRESS> <peer address>\n"; writes ./ready when listening.
inline constexpr const char* kServer = R"(
import os, select, socket, sys
ss = []
for p in sys.argv[1:]:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('0.0.0.0', int(p))); s.listen(16); ss.append(s)
open('ready', 'w').write(os.environ.get('ALLOT_NETWORK_ADDRESS', 'none'))
while True:
    for s in select.select(ss, [], [])[0]:
        c, a = s.accept()
        c.sendall((os.environ.get('ALLOT_NETWORK_ADDRESS', 'none') + ' ' + a[0] + '\n').encode())
        c.close()
)";

// kServer on IPv6 and IPv4 (one dual-stack socket per port): answers
// "<ALLOT_NETWORK_ADDRESS6> <peer address>\n"; ./ready holds the IPv4
// address, ./ready6 the IPv6 one.
inline constexpr const char* kServer6 = R"(
import os, select, socket, sys
ss = []
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(('::', int(p))); s.listen(16); ss.append(s)
mine = os.environ.get('ALLOT_NETWORK_ADDRESS6', 'none')
open('ready6', 'w').write(mine)
open('ready', 'w').write(os.environ.get('ALLOT_NETWORK_ADDRESS', 'none'))
while True:
    for s in select.select(ss, [], [])[0]:
        c, a = s.accept()
        c.sendall((mine + ' ' + a[0] + '\n').encode())
        c.close()
)";

// Echoes what each connection sends, keeping it open until the client
// closes it, on IPv6 and IPv4 (one dual-stack socket per port); ./ready
// holds the IPv4 address, ./ready6 the IPv6 one.
inline constexpr const char* kEchoServer6 = R"(
import os, socket, sys, threading
def serve(c):
    while True:
        d = c.recv(4096)
        if not d: break
        c.sendall(d)
def accept(s):
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(('::', int(p))); s.listen(16)
    threading.Thread(target=accept, args=(s,), daemon=True).start()
open('ready6', 'w').write(os.environ.get('ALLOT_NETWORK_ADDRESS6', 'none'))
open('ready', 'w').write(os.environ.get('ALLOT_NETWORK_ADDRESS', 'none'))
threading.Event().wait()
)";

bool haveTool(const char* path);

// A TCP connection from the test's own namespace to ip:port (IPv4 or IPv6),
// with 2 s send and receive timeouts; -1 when it cannot connect.
int connectTo(const std::string& ip, int port);

// Sends a line on `fd` and reads it back: true when the echo came.
bool echoes(int fd);

// Runs `cmd` with its output discarded; std::system's status.
int shell(const std::string& cmd);
// Runs `cmd` and returns what it printed (stdout and stderr).
std::string capture(const std::string& cmd);

// How long fetch() waits for a server that is there: far beyond a loaded
// machine's delays (a fetch that succeeds returns at once). Where the test
// expects the packets to be dropped it waits kDroppedWait instead: a late
// answer there would only make the expected failure likelier.
inline constexpr std::chrono::milliseconds kReachMax{20'000};
inline constexpr std::chrono::milliseconds kDroppedWait{1'500};

// Connects to ip:port (IPv4 or IPv6) from the network namespace at `nsPath`
// ("" = the test's own) and returns the first line the server sends, or
// nothing after `timeout`.
std::optional<std::string> fetch(const std::string& nsPath, const std::string& ip, int port,
                                 std::chrono::milliseconds timeout = kReachMax);

ino_t netnsInode(const std::string& path);

// "ports:[P-P,Q-Q]": the resources text offering the ports given.
std::string offeredPorts(std::vector<int> ports);
inline std::string offeredPort(int port) { return offeredPorts({port}); }

class NetworkRoot : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // The isolator again, dual stack (its bridge and tables made anew).
  void makeDualStackIsolator();
  void makeIsolator();

  // /sys/class/net/<name>/ifindex, "" when there is none.
  static std::string ifindexOf(const std::string& name);
  // True once no interface has one of `indexes` (the kernel finishes a
  // namespace's teardown from a workqueue: up to 5 s under load).
  static bool interfacesGone(const std::vector<std::string>& indexes);
  static std::string vethOf(const std::string& address);
  // Names of the interfaces on the test's bridge.
  std::vector<std::string> bridgePorts();
  // Host interfaces named like our executors' veths (ve + hex of the pool).
  std::string hostVeths();

  struct Executor {
    ContainerId id;
    pid_t pid = 0;
    bool running = false;
    std::string address;
    std::string address6;  // with kServer6
    std::string dir;
    std::string ifindex;  // of its host-side veth
    ino_t netns = 0;
    uint64_t netnsCookie = 0;
    std::string nsPath() const { return "/proc/" + std::to_string(pid) + "/ns/net"; }
  };

  // Starts the test server (listening on `listen`) as executor `name` with
  // `resources`, through prepare, the launcher and isolate.
  Executor& start(const std::string& name, const std::string& resources, const std::vector<int>& listen,
                  const char* server = kServer);
  void stop(Executor& e);

  // A namespace playing another host: veth ao<pid> (outsideHost_ on the
  // host side, forwarding on) to outsidePeer_ inside.
  void makeOutside(bool withIpv6 = false);
  std::string outsidePath() const { return "/run/netns/" + outsideNs_; }

  // IPv6 forwarding per interface (Linux >= 6.17); before, only the global
  // net.ipv6.conf.all.forwarding, which the tests never change.
  static bool haveForceForwarding();
  static bool ipv6Forwards();

  // Runs argv inside the outside namespace, in the background.
  pid_t spawnOutside(std::vector<std::string> argv, const std::string& dir);

  asio::io_context io_;
  std::unique_ptr<UringPoller> poller_;
  std::unique_ptr<Launcher> launcher_;
  std::unique_ptr<Isolator> isolator_;
  NetworkOptions options_;
  std::string unique_, subnet_, workDir_, outsideNs_, outsideHost_, outsidePeer_;
  std::string prefix6_, outsideHost6_, outsidePeer6_;
  bool outsideMade_ = false;
  std::map<std::string, Executor> executors_;
  std::vector<pid_t> helpers_;
};

}  // namespace allot::nettest
