// Root tests of network/netns against the real kernel: real namespaces,
// veths, a bridge, nftables and tbf. Every test has its own bridge, CIDR,
// state dir and "outside host" namespace (names carry the test's pid), sends
// traffic only to loopback and to namespaces it made, and its TearDown
// checks that no interface, address, nftables table, namespace or process
// of the test remains.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <thread>
#include <map>
#include <optional>

#include "base/asio.h"
#include "base/uring_poller.h"
#include "isolators/network_isolator.h"
#include "isolators/network_links.h"
#include "isolators/network_rules.h"
#include "launcher/launcher.h"
#include "tests/common/test_ports.h"
#include "tests/common/test_util.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using allot::testing::readFile;
using allot::testing::runUntil;

// Listens on every port in argv, answers each connection with
// "<ALLOT_NETWORK_ADDRESS> <peer address>\n"; writes ./ready when listening.
constexpr const char* kServer = R"(
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
constexpr const char* kServer6 = R"(
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
constexpr const char* kEchoServer6 = R"(
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

bool haveTool(const char* path) { return access(path, X_OK) == 0; }

// A TCP connection from the test's own namespace to ip:port (IPv4 or IPv6),
// with 2 s send and receive timeouts; -1 when it cannot connect.
int connectTo(const std::string& ip, int port) {
  bool v6 = ip.find(':') != std::string::npos;
  int s = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  timeval tv{2, 0};
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_storage a{};
  socklen_t len;
  if (v6) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&a);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    inet_pton(AF_INET6, ip.c_str(), &a6->sin6_addr);
    len = sizeof *a6;
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&a);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    inet_pton(AF_INET, ip.c_str(), &a4->sin_addr);
    len = sizeof *a4;
  }
  if (connect(s, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    close(s);
    return -1;
  }
  return s;
}

// Sends a line on `fd` and reads it back: true when the echo came.
bool echoes(int fd) {
  const char line[] = "ping\n";
  if (send(fd, line, 5, MSG_NOSIGNAL) != 5) return false;
  char buf[16];
  ssize_t n = recv(fd, buf, sizeof buf, 0);
  return n == 5 && std::memcmp(buf, line, 5) == 0;
}

int shell(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

std::string capture(const std::string& cmd) {
  std::string out;
  if (FILE* f = popen((cmd + " 2>&1").c_str(), "r")) {
    char buf[512];
    while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
    pclose(f);
  }
  return out;
}

// How long fetch() waits for a server that is there: far beyond a loaded
// machine's delays (a fetch that succeeds returns at once). Where the test
// expects the packets to be dropped it waits kDroppedWait instead: a late
// answer there would only make the expected failure likelier.
constexpr std::chrono::milliseconds kReachMax{20'000};
constexpr std::chrono::milliseconds kDroppedWait{1'500};

// Connects to ip:port (IPv4 or IPv6) from the network namespace at `nsPath`
// ("" = the test's own) and returns the first line the server sends, or
// nothing after `timeout`.
std::optional<std::string> fetch(const std::string& nsPath, const std::string& ip, int port,
                                 std::chrono::milliseconds timeout = kReachMax) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (!nsPath.empty()) {
      int ns = open(nsPath.c_str(), O_RDONLY);
      if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) _exit(2);
    }
    bool v6 = ip.find(':') != std::string::npos;
    int s = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_storage a{};
    socklen_t len;
    if (v6) {
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&a);
      a6->sin6_family = AF_INET6;
      a6->sin6_port = htons(port);
      inet_pton(AF_INET6, ip.c_str(), &a6->sin6_addr);
      len = sizeof *a6;
    } else {
      auto* a4 = reinterpret_cast<sockaddr_in*>(&a);
      a4->sin_family = AF_INET;
      a4->sin_port = htons(port);
      inet_pton(AF_INET, ip.c_str(), &a4->sin_addr);
      len = sizeof *a4;
    }
    if (connect(s, reinterpret_cast<sockaddr*>(&a), len) != 0) _exit(1);
    char buf[256];
    ssize_t n = read(s, buf, sizeof buf);
    if (n <= 0) _exit(1);
    if (write(fds[1], buf, n) != n) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

ino_t netnsInode(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// The namespace's cookie (SO_NETNS_COOKIE, Linux 5.14+): unlike its inode
// number, which the kernel gives to a new namespace once this one is gone,
// never reused. 0 when unknown.
uint64_t netnsCookie(const std::string& nsPath) {
  int fds[2];
  if (pipe(fds) != 0) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int ns = open(nsPath.c_str(), O_RDONLY);
    if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) _exit(1);
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    uint64_t cookie = 0;
    socklen_t len = sizeof cookie;
    if (s < 0 || getsockopt(s, SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) != 0) _exit(1);
    if (write(fds[1], &cookie, sizeof cookie) != sizeof cookie) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  uint64_t cookie = 0;
  if (read(fds[0], &cookie, sizeof cookie) != sizeof cookie) cookie = 0;
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return cookie;
}

// Every process's and fd's reference to the namespace with inode `ino` and
// cookie `cookie` (an inode match alone may be a newer namespace).
int netnsReferences(ino_t ino, uint64_t cookie) {
  int refs = 0;
  std::string want = "net:[" + std::to_string(ino) + "]";
  auto same = [&](const std::string& path) { return cookie == 0 || netnsCookie(path) == cookie; };
  std::error_code ec;
  for (const auto& p : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = p.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (netnsInode(p.path().string() + "/ns/net") == ino && same(p.path().string() + "/ns/net")) ++refs;
    std::error_code e2;
    for (const auto& fd : std::filesystem::directory_iterator(p.path() / "fd", e2)) {
      std::error_code e3;
      if (std::filesystem::read_symlink(fd.path(), e3).string() == want && same(fd.path().string())) ++refs;
    }
  }
  return refs;
}

class NetworkRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, veth, nftables)";
    if (!haveTool("/usr/bin/python3") || !haveTool("/usr/sbin/ip")) {
      GTEST_SKIP() << "needs /usr/bin/python3 and iproute2's /usr/sbin/ip";
    }
    int tag = getpid() % 250;
    unique_ = std::to_string(getpid());
    options_.bridge = "antb" + unique_;
    subnet_ = "10.234." + std::to_string(tag);
    options_.cidr = subnet_ + ".0/24";
    options_.stateDir = "/tmp/allot-nettest-" + unique_ + "/state";
    workDir_ = "/tmp/allot-nettest-" + unique_;
    outsideNs_ = "antout" + unique_;
    outsideHost_ = "192.168." + std::to_string(tag) + ".1";
    outsidePeer_ = "192.168." + std::to_string(tag) + ".2";
    prefix6_ = "fdaa:" + std::to_string(tag) + ":";
    outsideHost6_ = "fdab:" + std::to_string(tag) + "::1";
    outsidePeer6_ = "fdab:" + std::to_string(tag) + "::2";
    std::filesystem::create_directories(workDir_);
    auto poller = UringPoller::create(io_);
    ASSERT_TRUE(poller.ok()) << poller.error().describe();
    poller_ = std::move(*poller);
    auto launcher = Launcher::create(io_, *poller_);
    ASSERT_TRUE(launcher.ok()) << launcher.error().describe();
    launcher_ = std::move(*launcher);
    makeIsolator();
    ASSERT_TRUE(isolator_);
    Status st = isolator_->recover({});
    ASSERT_TRUE(st.ok()) << st.error().describe();
  }

  // The isolator again, dual stack (its bridge and tables made anew).
  void makeDualStackIsolator() {
    isolator_.reset();
    ASSERT_TRUE(removeNetwork(options_).ok());
    options_.cidr6 = prefix6_ + ":/64";
    makeIsolator();
    ASSERT_TRUE(isolator_);
    Status st = isolator_->recover({});
    ASSERT_TRUE(st.ok()) << st.error().describe();
  }

  void makeIsolator() {
    auto made = makeNetworkIsolator(options_, &io_);
    ASSERT_TRUE(made.ok()) << made.error().describe();
    isolator_ = std::move(*made);
  }

  void TearDown() override {
    if (geteuid() != 0 || !launcher_) return;
    std::vector<std::pair<ino_t, uint64_t>> inodes;
    for (auto& [name, e] : executors_) {
      if (e.pid > 0 && e.running) (void)launcher_->signal(e.pid, SIGKILL);
      if (e.netns) inodes.push_back({e.netns, e.netnsCookie});
    }
    runUntil(io_, [&] {
      for (auto& [n, e] : executors_) if (e.running) return false;
      return true;
    }, 10s);
    for (auto& [name, e] : executors_) {
      Status st = isolator_->cleanup(e.id);
      EXPECT_TRUE(st.ok()) << st.error().describe();
    }
    for (pid_t pid : helpers_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (outsideMade_) shell("ip netns del " + outsideNs_);
    // What cleanup() must have removed on its own, before the network goes
    // (the warm pool's networks stay until the isolator stops). By index:
    // the warm pool may have made a new interface with a gone executor's
    // address, and so its name.
    std::vector<std::string> indexes;
    for (auto& [name, e] : executors_) {
      if (!e.ifindex.empty()) indexes.push_back(e.ifindex);
    }
    EXPECT_TRUE(interfacesGone(indexes)) << "executor veths left";
    for (auto [ino, cookie] : inodes) {
      EXPECT_EQ(netnsReferences(ino, cookie), 0) << "namespace " << ino << " still referenced";
    }
    isolator_.reset();
    EXPECT_EQ(hostVeths(), "") << "veths left after the isolator stopped";
    Status st = removeNetwork(options_);
    EXPECT_TRUE(st.ok()) << st.error().describe();
    auto nft = Nftables::create();
    ASSERT_TRUE(nft.ok());
    EXPECT_FALSE((*nft)->listTable(networkTableName(options_)).ok()) << "nftables table left";
    EXPECT_FALSE((*nft)->listTable(networkTableName(options_), "ip6").ok()) << "nftables ip6 table left";
    auto nl = Netlink::open();
    ASSERT_TRUE(nl.ok());
    EXPECT_FALSE(nl->ifindex(options_.bridge).ok()) << "bridge left";
    // The kernel removes a deleted namespace's devices from a workqueue, a
    // little after `ip netns del` returns: give it a moment under load.
    for (int i = 0; i < 100 && nl->ifindex("ao" + unique_).ok(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_FALSE(nl->ifindex("ao" + unique_).ok()) << "outside veth left";
    EXPECT_EQ(shell("ip -4 addr show | grep -q ' " + subnet_ + "\\.'"), 256) << "addresses of the pool left";
    EXPECT_EQ(shell("ip -6 addr show | grep -q ' " + prefix6_ + "'"), 256) << "IPv6 addresses of the prefix left";
    std::filesystem::remove_all(workDir_);
  }

  // /sys/class/net/<name>/ifindex, "" when there is none.
  static std::string ifindexOf(const std::string& name) {
    int fd = open(("/sys/class/net/" + name + "/ifindex").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    char buf[32];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    return n > 0 ? std::string(buf, n) : "";
  }

  // True once no interface has one of `indexes` (the kernel finishes a
  // namespace's teardown from a workqueue: up to 5 s under load).
  static bool interfacesGone(const std::vector<std::string>& indexes) {
    auto anyLeft = [&] {
      for (const auto& d : std::filesystem::directory_iterator("/sys/class/net")) {
        if (std::find(indexes.begin(), indexes.end(), ifindexOf(d.path().filename())) != indexes.end()) return true;
      }
      return false;
    };
    for (int i = 0; i < 100 && anyLeft(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return !anyLeft();
  }

  static std::string vethOf(const std::string& address) {
    char h[16];
    std::snprintf(h, sizeof h, "ve%08x", *parseIpv4(address));
    return h;
  }

  // Names of the interfaces on the test's bridge.
  std::vector<std::string> bridgePorts() {
    auto nl = Netlink::open();
    if (!nl) return {};
    auto bridge = nl->ifindex(options_.bridge);
    if (!bridge) return {};
    auto ports = nl->bridgePorts(*bridge);
    return ports ? *ports : std::vector<std::string>{};
  }

  // Host interfaces named like our executors' veths (ve + hex of the pool).
  std::string hostVeths() {
    char prefix[16];
    auto net = Ipv4Cidr::parse(options_.cidr);
    std::snprintf(prefix, sizeof prefix, "ve%06x", net->network >> 8);
    std::string out;
    for (const auto& d : std::filesystem::directory_iterator("/sys/class/net")) {
      std::string n = d.path().filename();
      if (n.rfind(prefix, 0) == 0) out += n + " ";
    }
    return out;
  }

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
                  const char* server = kServer) {
    Executor& e = executors_[name];
    e.id = {"fw-" + unique_, name};
    e.dir = workDir_ + "/" + name;
    std::filesystem::create_directories(e.dir);
    LaunchSpec spec;
    spec.argv = {"/usr/bin/python3", "-c", server};
    for (int p : listen) spec.argv.push_back(std::to_string(p));
    spec.workDir = e.dir;
    spec.stderrPath = e.dir + "/stderr";
    auto limits = Resources::parse(resources);
    EXPECT_TRUE(limits.ok());
    Status st = isolator_->prepare(e.id, *limits, &spec.setup);
    EXPECT_TRUE(st.ok()) << st.error().describe();
    if (!st) return e;
    spec.env = spec.setup.env;
    auto pid = launcher_->launch(spec, [this, name](const ExitInfo&) { executors_[name].running = false; });
    EXPECT_TRUE(pid.ok()) << pid.error().describe();
    if (!pid) return e;
    e.pid = *pid;
    e.running = true;
    st = isolator_->isolate(e.id, e.pid);
    EXPECT_TRUE(st.ok()) << st.error().describe();
    e.netns = netnsInode(e.nsPath());
    e.netnsCookie = netnsCookie(e.nsPath());
    EXPECT_TRUE(runUntil(io_, [&] { return !readFile(e.dir + "/ready").empty(); }, 10s))
        << "server " << name << " did not start: " << readFile(e.dir + "/stderr");
    e.address = readFile(e.dir + "/ready");
    e.address6 = readFile(e.dir + "/ready6");
    if (!e.address.empty()) e.ifindex = ifindexOf(vethOf(e.address));
    return e;
  }

  void stop(Executor& e) {
    (void)launcher_->signal(e.pid, SIGKILL);
    EXPECT_TRUE(runUntil(io_, [&] { return !e.running; }, 10s));
  }

  // A namespace playing another host: veth ao<pid> (outsideHost_ on the
  // host side, forwarding on) to outsidePeer_ inside.
  void makeOutside(bool withIpv6 = false) {
    std::string ao = "ao" + unique_;
    std::string cmds = "ip netns add " + outsideNs_ + " && ip link add " + ao + " type veth peer name eth0 netns " +
                       outsideNs_ + " && ip addr add " + outsideHost_ + "/30 dev " + ao + " && ip link set " + ao +
                       " up && ip -n " + outsideNs_ + " addr add " + outsidePeer_ + "/30 dev eth0 && ip -n " +
                       outsideNs_ + " link set eth0 up && ip -n " + outsideNs_ + " link set lo up && ip -n " +
                       outsideNs_ + " route add default via " + outsideHost_ +
                       " && sysctl -qw net.ipv4.conf." + ao + ".forwarding=1";
    if (withIpv6) {
      cmds += " && ip addr add " + outsideHost6_ + "/64 dev " + ao + " nodad && ip -n " + outsideNs_ +
              " addr add " + outsidePeer6_ + "/64 dev eth0 nodad && ip -n " + outsideNs_ +
              " -6 route add default via " + outsideHost6_;
      if (haveForceForwarding()) cmds += " && sysctl -qw net.ipv6.conf." + ao + ".force_forwarding=1";
    }
    outsideMade_ = true;
    ASSERT_EQ(shell(cmds), 0) << cmds;
  }

  std::string outsidePath() const { return "/run/netns/" + outsideNs_; }

  // IPv6 forwarding per interface (Linux >= 6.17); before, only the global
  // net.ipv6.conf.all.forwarding, which the tests never change.
  static bool haveForceForwarding() { return access("/proc/sys/net/ipv6/conf/lo/force_forwarding", F_OK) == 0; }
  static bool ipv6Forwards() {
    return haveForceForwarding() || readFile("/proc/sys/net/ipv6/conf/all/forwarding").rfind("1", 0) == 0;
  }

  // Runs argv inside the outside namespace, in the background.
  pid_t spawnOutside(std::vector<std::string> argv, const std::string& dir) {
    pid_t pid = fork();
    if (pid == 0) {
      int ns = open(outsidePath().c_str(), O_RDONLY);
      if (ns < 0 || setns(ns, CLONE_NEWNET) != 0 || chdir(dir.c_str()) != 0) _exit(127);
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      dup2(null, 2);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    helpers_.push_back(pid);
    return pid;
  }

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

TEST_F(NetworkRoot, TwoExecutorsGetOwnNamespacesAndReachOnlyOfferedPorts) {
  Executor& a = start("a", "cpus:0.1;ports:[31001-31001]", {31001, 31002});
  Executor& b = start("b", "cpus:0.1;ports:[31011-31011]", {31011});
  ASSERT_TRUE(a.running && b.running);
  EXPECT_NE(a.netns, netnsInode("/proc/self/ns/net"));
  EXPECT_NE(a.netns, b.netns);
  EXPECT_EQ(a.address.rfind(subnet_ + ".", 0), 0u) << a.address;
  EXPECT_EQ(b.address.rfind(subnet_ + ".", 0), 0u) << b.address;
  EXPECT_NE(a.address, b.address);
  // Offered port: reachable from the other executor (which is who it sees).
  auto offered = fetch(b.nsPath(), a.address, 31001);
  ASSERT_TRUE(offered.has_value()) << "b cannot reach a's offered port";
  EXPECT_EQ(*offered, a.address + " " + b.address);
  // Unoffered port: dropped between executors, but a's own loopback works.
  EXPECT_FALSE(fetch(b.nsPath(), a.address, 31002, kDroppedWait).has_value()) << "b reached a's unoffered port";
  EXPECT_TRUE(fetch(a.nsPath(), "127.0.0.1", 31002).has_value());
  EXPECT_TRUE(fetch(a.nsPath(), b.address, 31011).has_value());
}

TEST_F(NetworkRoot, AllowExecutorTrafficOpensUnofferedPorts) {
  isolator_.reset();
  options_.allowExecutorTraffic = true;
  ASSERT_TRUE(removeNetwork(options_).ok());
  makeIsolator();
  ASSERT_TRUE(isolator_->recover({}).ok());
  Executor& a = start("a", "cpus:0.1", {31002});
  Executor& b = start("b", "cpus:0.1", {31003});
  ASSERT_TRUE(a.running && b.running);
  EXPECT_TRUE(fetch(b.nsPath(), a.address, 31002, kDroppedWait).has_value());
}

TEST_F(NetworkRoot, OfferedPortReachableFromHostLoopbackAndFromAnOutsideHost) {
  testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  Executor& a = start("a", "cpus:0.1;ports:[" + std::to_string(port) + "-" + std::to_string(port) + "]", {port});
  ASSERT_TRUE(a.running);
  makeOutside();
  auto local = fetch("", "127.0.0.1", port);
  ASSERT_TRUE(local.has_value()) << "127.0.0.1:" << port << " not forwarded";
  EXPECT_EQ(local->substr(0, a.address.size()), a.address);
  auto remote = fetch(outsidePath(), outsideHost_, port);
  ASSERT_TRUE(remote.has_value()) << "outside host cannot reach " << outsideHost_ << ":" << port;
  // The executor sees the real client (DNAT only, no source NAT).
  EXPECT_EQ(*remote, a.address + " " + outsidePeer_);
  // After cleanup the port is the host's again.
  stop(a);
  ASSERT_TRUE(isolator_->cleanup(a.id).ok());
  EXPECT_FALSE(fetch(outsidePath(), outsideHost_, port, kDroppedWait).has_value());
}

TEST_F(NetworkRoot, EgressLeavesThroughTheHostMasqueraded) {
  Executor& a = start("a", "cpus:0.1", {31005});
  makeOutside();
  std::string dir = workDir_ + "/outside";
  std::filesystem::create_directories(dir);
  spawnOutside({"/usr/bin/python3", "-c", kServer, "8080"}, dir);
  ASSERT_TRUE(runUntil(io_, [&] { return !readFile(dir + "/ready").empty(); }, 10s));
  auto seen = fetch(a.nsPath(), outsidePeer_, 8080);
  ASSERT_TRUE(seen.has_value()) << "executor cannot reach the outside host";
  EXPECT_EQ(*seen, "none " + outsideHost_) << "outside host saw the executor's own address";
}

// iperf3 -J: end.sum_received.bits_per_second.
double receivedBitsPerSecond(const std::string& json) {
  size_t at = json.find("\"sum_received\"");
  if (at == std::string::npos) return 0;
  at = json.find("\"bits_per_second\"", at);
  if (at == std::string::npos) return 0;
  return std::atof(json.c_str() + json.find(':', at) + 1);
}

TEST_F(NetworkRoot, EgressRateLimitHoldsAndUnlimitedIsFaster) {
  if (!haveTool("/usr/bin/iperf3")) GTEST_SKIP() << "needs iperf3 (Debian package iperf3)";
  constexpr double kMbit = 40;
  Executor& limited = start("limited", "cpus:0.1;net_mbps:" + std::to_string(kMbit), {31006});
  Executor& open = start("open", "cpus:0.1", {31007});
  makeOutside();
  std::string dir = workDir_ + "/outside";
  std::filesystem::create_directories(dir);
  spawnOutside({"/usr/bin/iperf3", "-s", "-p", "5201"}, dir);
  auto client = [&](const Executor& e) {
    std::string out = workDir_ + "/iperf-" + e.id.executorId + ".json";
    // Up to 10 tries while the server starts.
    for (int i = 0; i < 10; ++i) {
      std::string cmd = "nsenter --net=" + e.nsPath() + " /usr/bin/iperf3 -J -t 3 -O 1 -c " + outsidePeer_ +
                        " -p 5201 > " + out + " 2>&1";
      if (std::system(cmd.c_str()) == 0) {
        if (double bps = receivedBitsPerSecond(readFile(out)); bps > 0) return bps / 1e6;
      }
      usleep(300000);
    }
    ADD_FAILURE() << "iperf3 from " << e.id.executorId << ": " << readFile(out);
    return 0.0;
  };
  double limitedMbit = client(limited);
  double openMbit = client(open);
  std::printf("egress: limited %.1f Mbit/s (configured %.0f), unlimited %.1f Mbit/s, load %s", limitedMbit, kMbit,
              openMbit, readFile("/proc/loadavg").c_str());
  EXPECT_NEAR(limitedMbit, kMbit, kMbit * 0.10);
  EXPECT_GE(openMbit, 5 * kMbit);
}

TEST_F(NetworkRoot, RecoveryKeepsRunningExecutorsAndRemovesGoneOnes) {
  testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  Executor& a = start("a", "cpus:0.1;ports:[" + std::to_string(port) + "-" + std::to_string(port) + "]", {port});
  Executor& b = start("b", "cpus:0.1", {31008});
  Executor& c = start("c", "cpus:0.1", {31009});
  ASSERT_TRUE(a.running && b.running && c.running);
  ASSERT_FALSE(c.ifindex.empty());
  // The agent dies (no cleanup), b and c die while it is down.
  isolator_.reset();
  stop(b);
  stop(c);
  makeIsolator();
  // The restarted agent still knows a and b (b's death is found later), not c.
  ASSERT_TRUE(isolator_->recover({a.id, b.id}).ok());
  EXPECT_TRUE(fetch("", "127.0.0.1", port).has_value()) << "a's offered port lost across the restart";
  auto nl = Netlink::open();
  ASSERT_TRUE(nl.ok());
  // (The restarted warm pool may make a new interface with c's address's
  // name: c's own is known by its index.)
  EXPECT_NE(ifindexOf(vethOf(c.address)), c.ifindex) << "c's veth survived recovery";
  EXPECT_FALSE(std::filesystem::exists(options_.stateDir + "/" + c.id.name()));
  ASSERT_TRUE(isolator_->cleanup(b.id).ok());
  EXPECT_FALSE(std::filesystem::exists(options_.stateDir + "/" + b.id.name()));
  // A new executor gets a fresh address, never a's.
  Executor& d = start("d", "cpus:0.1", {31010});
  EXPECT_NE(d.address, a.address);
  EXPECT_TRUE(fetch(d.nsPath(), "127.0.0.1", 31010).has_value());
}

TEST_F(NetworkRoot, WarmPoolMakesNetworksAheadAndRefillsAfterATake) {
  ASSERT_EQ(options_.warmPool, 4);
  ASSERT_TRUE(runUntil(io_, [&] { return bridgePorts().size() == 4; }, 20s)) << bridgePorts().size() << " made";
  auto warm = bridgePorts();
  testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  Executor& a = start("a", "cpus:0.1;ports:[" + std::to_string(port) + "-" + std::to_string(port) + "]", {port});
  ASSERT_TRUE(a.running);
  EXPECT_NE(std::find(warm.begin(), warm.end(), vethOf(a.address)), warm.end())
      << "a's network " << vethOf(a.address) << " was not one made ahead";
  EXPECT_TRUE(runUntil(io_, [&] { return bridgePorts().size() == 5; }, 20s)) << "the pool did not refill";
  auto answer = fetch("", "127.0.0.1", port);
  ASSERT_TRUE(answer.has_value()) << "a's offered port unreachable";
  EXPECT_EQ(answer->substr(0, a.address.size()), a.address);
}

TEST_F(NetworkRoot, WithoutAWarmPoolEachLaunchMakesItsOwnNetwork) {
  isolator_.reset();
  options_.warmPool = 0;
  makeIsolator();
  ASSERT_TRUE(isolator_->recover({}).ok());
  for (int i = 0; i < 5; ++i) io_.poll();
  EXPECT_TRUE(bridgePorts().empty());
  testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  Executor& a = start("a", "cpus:0.1;ports:[" + std::to_string(port) + "-" + std::to_string(port) + "]", {port});
  ASSERT_TRUE(a.running);
  EXPECT_EQ(bridgePorts(), std::vector<std::string>{vethOf(a.address)});
  EXPECT_TRUE(fetch("", "127.0.0.1", port).has_value());
}

TEST_F(NetworkRoot, PerExecutorRateOnAWarmNetworkReplacesTheDefault) {
  ASSERT_TRUE(runUntil(io_, [&] { return bridgePorts().size() == 4; }, 20s));
  Executor& a = start("a", "cpus:0.1;net_mbps:40", {31020});
  ASSERT_TRUE(a.running);
  std::string qdisc = capture("nsenter --net=" + a.nsPath() + " tc qdisc show dev eth0");
  EXPECT_NE(qdisc.find("tbf"), std::string::npos) << qdisc;
  EXPECT_NE(qdisc.find("rate 40Mbit"), std::string::npos) << qdisc;
  std::string state = readFile(options_.stateDir + "/" + a.id.name());
  EXPECT_NE(state.find("egress 40"), std::string::npos) << state;
}

// The agent is SIGKILLed with its warm pool full: the namespaces had no
// holder but the agent's fds, so the kernel removes them and their veths;
// the restarted agent's recover() finds nothing of them.
TEST_F(NetworkRoot, AgentCrashLeavesNoWarmNetworkBehind) {
  isolator_.reset();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    asio::io_context io;
    auto made = makeNetworkIsolator(options_, &io);
    if (!made || !(*made)->recover({}).ok()) _exit(1);
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (bridgePorts().size() < 4 && std::chrono::steady_clock::now() < deadline) {
      io.run_one_for(std::chrono::milliseconds(50));
    }
    if (write(fds[1], "r", 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  helpers_.push_back(child);
  close(fds[1]);
  char ready = 0;
  ASSERT_EQ(read(fds[0], &ready, 1), 1);
  close(fds[0]);
  std::vector<std::string> indexes;
  for (const auto& veth : bridgePorts()) indexes.push_back(ifindexOf(veth));
  ASSERT_EQ(indexes.size(), 4u) << "the crashing agent's pool did not fill";
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  helpers_.clear();
  EXPECT_TRUE(interfacesGone(indexes)) << "the crashed agent's warm veths outlived it";
  makeIsolator();
  ASSERT_TRUE(isolator_->recover({}).ok());
  Executor& a = start("a", "cpus:0.1", {31021});
  EXPECT_TRUE(a.running);
  EXPECT_TRUE(fetch(a.nsPath(), "127.0.0.1", 31021).has_value());
}

// `address` as /proc/net/nf_conntrack prints it (IPv4 as is, IPv6 as eight
// groups of four hex digits).
std::string conntrackText(const std::string& address) {
  std::string text = address;
  if (address.find(':') != std::string::npos) {
    auto a = Ipv6Address::parse(address);
    if (!a) return "";
    uint8_t b[16];
    a->toBytes(b);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    text = buf;
  }
  return text;
}

// The conntrack lines (/proc/net/nf_conntrack) naming `address`.
std::string conntrackOf(const std::string& address) {
  std::string text = conntrackText(address);
  std::string out;
  std::ifstream in("/proc/net/nf_conntrack");
  for (std::string line; std::getline(in, line);) {
    if (line.find("=" + text + " ") != std::string::npos) out += line + "\n";
  }
  return out;
}

// The conntrack lines of flows answered from address:port (reply direction
// "src=<address> dst=... sport=<port> "): flows made to that port.
std::string flowsToPort(const std::string& address, int port) {
  std::string from = "src=" + conntrackText(address) + " ";
  std::string sport = "sport=" + std::to_string(port) + " ";
  std::string out;
  std::ifstream in("/proc/net/nf_conntrack");
  for (std::string line; std::getline(in, line);) {
    for (size_t at = line.find(from); at != std::string::npos; at = line.find(from, at + 1)) {
      size_t next = line.find("sport=", at);
      if (next != std::string::npos && line.compare(next, sport.size(), sport) == 0) {
        out += line + "\n";
        break;
      }
    }
  }
  return out;
}

TEST_F(NetworkRoot, DualStackExecutorHasAnIpv6AddressReachableFromTheHost) {
  makeDualStackIsolator();
  testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  std::string offered = "ports:[" + std::to_string(port) + "-" + std::to_string(port) + "]";
  Executor& a = start("a", "cpus:0.1;" + offered, {port}, kServer6);
  ASSERT_TRUE(a.running);
  // The IPv6 address sits at the IPv4 address's offset in the prefix.
  auto v4 = *parseIpv4(a.address);
  auto cidr6 = *Ipv6Cidr::parse(options_.cidr6);
  auto expected = cidr6.executorAddress(*Ipv4Cidr::parse(options_.cidr), v4);
  ASSERT_TRUE(expected.has_value());
  EXPECT_EQ(a.address6, expected->toString());
  std::string inside = capture("nsenter --net=" + a.nsPath() + " ip -6 addr show dev eth0");
  EXPECT_NE(inside.find(a.address6 + "/128"), std::string::npos) << inside;
  std::string route = capture("nsenter --net=" + a.nsPath() + " ip -6 route show default");
  EXPECT_NE(route.find("via " + cidr6.gateway().toString()), std::string::npos) << route;
  std::string state = readFile(options_.stateDir + "/" + a.id.name());
  EXPECT_NE(state.find("address6 " + a.address6), std::string::npos) << state;
  // Its offered port on the host's own IPv6 address (the bridge's), and
  // still on IPv4.
  auto six = fetch("", cidr6.gateway().toString(), port);
  ASSERT_TRUE(six.has_value()) << "[" << cidr6.gateway().toString() << "]:" << port << " not forwarded";
  EXPECT_EQ(*six, a.address6 + " " + cidr6.gateway().toString());
  EXPECT_TRUE(fetch("", "127.0.0.1", port).has_value());
  // After cleanup the port is the host's again.
  stop(a);
  ASSERT_TRUE(isolator_->cleanup(a.id).ok());
  EXPECT_FALSE(fetch("", cidr6.gateway().toString(), port, kDroppedWait).has_value());
}

TEST_F(NetworkRoot, Ipv6OfferedPortFromAnOutsideHostAndEgressMasqueraded) {
  if (!ipv6Forwards()) {
    GTEST_SKIP() << "IPv6 forwarding is global on this kernel (no per-interface force_forwarding before Linux "
                    "6.17) and net.ipv6.conf.all.forwarding is 0; the test does not change it for the host";
  }
  makeDualStackIsolator();
  testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  std::string offered = "ports:[" + std::to_string(port) + "-" + std::to_string(port) + "]";
  Executor& a = start("a", "cpus:0.1;" + offered, {port}, kServer6);
  ASSERT_TRUE(a.running);
  makeOutside(/*withIpv6=*/true);
  // An outside host to the agent's IPv6 address: DNAT only, the executor
  // sees the client.
  auto remote = fetch(outsidePath(), outsideHost6_, port);
  ASSERT_TRUE(remote.has_value()) << "outside host cannot reach [" << outsideHost6_ << "]:" << port;
  EXPECT_EQ(*remote, a.address6 + " " + outsidePeer6_);
  // The executor to an outside host: masqueraded to the host's address.
  std::string dir = workDir_ + "/outside";
  std::filesystem::create_directories(dir);
  spawnOutside({"/usr/bin/python3", "-c", kServer6, "8080"}, dir);
  ASSERT_TRUE(runUntil(io_, [&] { return !readFile(dir + "/ready6").empty(); }, 10s));
  auto seen = fetch(a.nsPath(), outsidePeer6_, 8080);
  ASSERT_TRUE(seen.has_value()) << "executor cannot reach the outside host over IPv6";
  EXPECT_EQ(*seen, "none " + outsideHost6_) << "outside host saw the executor's own address";
}

TEST_F(NetworkRoot, ConntrackEntriesGoWithTheirExecutor) {
  if (access("/proc/net/nf_conntrack", R_OK) != 0) {
    GTEST_SKIP() << "needs /proc/net/nf_conntrack (CONFIG_NF_CONNTRACK_PROCFS) to read the table";
  }
  makeDualStackIsolator();
  testing::ReservedPort reserved, reserved2;
  int port = reserved.port(), port2 = reserved2.port();
  Executor& a = start("a", "cpus:0.1;ports:[" + std::to_string(port) + "-" + std::to_string(port) + "]", {port},
                      kServer6);
  Executor& b = start("b", "cpus:0.1;ports:[" + std::to_string(port2) + "-" + std::to_string(port2) + "]",
                      {port2}, kServer6);
  ASSERT_TRUE(a.running && b.running);
  std::string gateway6 = Ipv6Cidr::parse(options_.cidr6)->gateway().toString();
  // Flows through DNAT (v4 and v6) to a, one to b; closed, so the entries
  // wait out TIME_WAIT (two minutes) in the host's table.
  ASSERT_TRUE(fetch("", "127.0.0.1", port).has_value());
  ASSERT_TRUE(fetch("", gateway6, port).has_value());
  ASSERT_TRUE(fetch("", "127.0.0.1", port2).has_value());
  EXPECT_NE(conntrackOf(a.address), "") << "no IPv4 entry of a to delete";
  EXPECT_NE(conntrackOf(a.address6), "") << "no IPv6 entry of a to delete";
  ASSERT_NE(conntrackOf(b.address), "");
  stop(a);
  ASSERT_TRUE(isolator_->cleanup(a.id).ok());
  EXPECT_TRUE(runUntil(io_, [&] { return conntrackOf(a.address).empty() && conntrackOf(a.address6).empty(); }, 10s))
      << "left:\n" << conntrackOf(a.address) << conntrackOf(a.address6);
  EXPECT_NE(conntrackOf(b.address), "") << "b's flows went with a's";
}

// A task ends, its executor keeps running: connections already made to the
// port the task had (through DNAT, IPv4 and IPv6) stop working, those to the
// port the executor keeps go on.
TEST_F(NetworkRoot, RemovedPortsLoseTheirEstablishedFlows) {
  if (access("/proc/net/nf_conntrack", R_OK) != 0) {
    GTEST_SKIP() << "needs /proc/net/nf_conntrack (CONFIG_NF_CONNTRACK_PROCFS) to read the table";
  }
  makeDualStackIsolator();
  int lost = 39000 + getpid() % 1000, kept = lost + 1;
  std::string p = std::to_string(lost), k = std::to_string(kept);
  Executor& a = start("a", "cpus:0.1;ports:[" + p + "-" + k + "]", {lost, kept}, kEchoServer6);
  ASSERT_TRUE(a.running);
  std::string gateway6 = Ipv6Cidr::parse(options_.cidr6)->gateway().toString();
  int lost4 = connectTo("127.0.0.1", lost), lost6 = connectTo(gateway6, lost);
  int kept4 = connectTo("127.0.0.1", kept), kept6 = connectTo(gateway6, kept);
  for (int fd : {lost4, lost6, kept4, kept6}) {
    ASSERT_GE(fd, 0) << "cannot connect to an offered port";
    EXPECT_TRUE(echoes(fd));
  }
  ASSERT_NE(flowsToPort(a.address, lost), "");
  ASSERT_NE(flowsToPort(a.address6, lost), "");
  // The task that held `lost` ended; the executor keeps `kept`.
  Status st = isolator_->update(a.id, *Resources::parse("cpus:0.1;ports:[" + k + "-" + k + "]"));
  ASSERT_TRUE(st.ok()) << st.error().describe();
  EXPECT_TRUE(runUntil(io_, [&] { return flowsToPort(a.address, lost).empty() && flowsToPort(a.address6, lost).empty(); },
                       10s))
      << "left:\n" << flowsToPort(a.address, lost) << flowsToPort(a.address6, lost);
  EXPECT_FALSE(echoes(lost4)) << "an IPv4 connection to a removed port still reaches the executor";
  EXPECT_FALSE(echoes(lost6)) << "an IPv6 connection to a removed port still reaches the executor";
  EXPECT_TRUE(echoes(kept4)) << "the IPv4 connection to the kept port broke";
  EXPECT_TRUE(echoes(kept6)) << "the IPv6 connection to the kept port broke";
  for (int fd : {lost4, lost6, kept4, kept6}) close(fd);
}

TEST_F(NetworkRoot, RecoveryDeletesTheConntrackEntriesOfGoneExecutors) {
  if (access("/proc/net/nf_conntrack", R_OK) != 0) {
    GTEST_SKIP() << "needs /proc/net/nf_conntrack (CONFIG_NF_CONNTRACK_PROCFS) to read the table";
  }
  testing::ReservedPort reserved;  // a host port no other test offers meanwhile
  int port = reserved.port();
  Executor& c = start("c", "cpus:0.1;ports:[" + std::to_string(port) + "-" + std::to_string(port) + "]", {port});
  ASSERT_TRUE(c.running);
  ASSERT_TRUE(fetch("", "127.0.0.1", port).has_value());
  ASSERT_NE(conntrackOf(c.address), "");
  // The agent dies, c dies while it is down; the restarted agent does not know c.
  isolator_.reset();
  stop(c);
  makeIsolator();
  ASSERT_TRUE(isolator_->recover({}).ok());
  EXPECT_TRUE(runUntil(io_, [&] { return conntrackOf(c.address).empty(); }, 10s)) << conntrackOf(c.address);
}

}  // namespace
}  // namespace allot
