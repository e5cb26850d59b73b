#include "tests/isolators/network_root_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "isolators/network_links.h"
#include "isolators/network_rules.h"
#include "tests/common/test_util.h"

namespace allot::nettest {

namespace {

// ip:port (IPv4 or IPv6) into `a`; its length.
socklen_t socketAddress(const std::string& ip, int port, sockaddr_storage* a) {
  *a = {};
  if (ip.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(a);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    inet_pton(AF_INET6, ip.c_str(), &a6->sin6_addr);
    return sizeof *a6;
  }
  auto* a4 = reinterpret_cast<sockaddr_in*>(a);
  a4->sin_family = AF_INET;
  a4->sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &a4->sin_addr);
  return sizeof *a4;
}

// A TCP socket to ip:port with `timeout` for sends and receives; -1 when it
// cannot connect.
int connectWithin(const std::string& ip, int port, std::chrono::milliseconds timeout) {
  sockaddr_storage a;
  socklen_t len = socketAddress(ip, port, &a);
  int s = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    close(s);
    return -1;
  }
  return s;
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

}  // namespace

bool haveTool(const char* path) { return access(path, X_OK) == 0; }

int connectTo(const std::string& ip, int port) { return connectWithin(ip, port, 2s); }

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

std::optional<std::string> fetch(const std::string& nsPath, const std::string& ip, int port,
                                 std::chrono::milliseconds timeout) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (!nsPath.empty()) {
      int ns = open(nsPath.c_str(), O_RDONLY);
      if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) _exit(2);
    }
    int s = connectWithin(ip, port, timeout);
    if (s < 0) _exit(1);
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

std::string offeredPorts(std::vector<int> ports) {
  std::sort(ports.begin(), ports.end());
  std::string text = "ports:[";
  for (int port : ports) text += (text.back() == '[' ? "" : ",") + std::to_string(port) + "-" + std::to_string(port);
  return text + "]";
}

void NetworkRoot::SetUp() {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, veth, nftables)";
  if (!haveTool("/usr/bin/python3") || !haveTool("/usr/sbin/ip")) {
    GTEST_SKIP() << "needs /usr/bin/python3 and iproute2's /usr/sbin/ip";
  }
  int tag = getpid() % 250 + 1;  // 1..250: "fdab:0::1" would not be the canonical form the kernel prints
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

void NetworkRoot::makeDualStackIsolator() {
  isolator_.reset();
  ASSERT_TRUE(removeNetwork(options_).ok());
  options_.cidr6 = prefix6_ + ":/64";
  makeIsolator();
  ASSERT_TRUE(isolator_);
  Status st = isolator_->recover({});
  ASSERT_TRUE(st.ok()) << st.error().describe();
}

void NetworkRoot::makeIsolator() {
  auto made = makeNetworkIsolator(options_, &io_);
  ASSERT_TRUE(made.ok()) << made.error().describe();
  isolator_ = std::move(*made);
}

void NetworkRoot::TearDown() {
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

std::string NetworkRoot::ifindexOf(const std::string& name) {
  int fd = open(("/sys/class/net/" + name + "/ifindex").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[32];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n > 0 ? std::string(buf, n) : "";
}

bool NetworkRoot::interfacesGone(const std::vector<std::string>& indexes) {
  auto anyLeft = [&] {
    for (const auto& d : std::filesystem::directory_iterator("/sys/class/net")) {
      if (std::find(indexes.begin(), indexes.end(), ifindexOf(d.path().filename())) != indexes.end()) return true;
    }
    return false;
  };
  for (int i = 0; i < 100 && anyLeft(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return !anyLeft();
}

std::string NetworkRoot::vethOf(const std::string& address) {
  char h[16];
  std::snprintf(h, sizeof h, "ve%08x", *parseIpv4(address));
  return h;
}

std::vector<std::string> NetworkRoot::bridgePorts() {
  auto nl = Netlink::open();
  if (!nl) return {};
  auto bridge = nl->ifindex(options_.bridge);
  if (!bridge) return {};
  auto ports = nl->bridgePorts(*bridge);
  return ports ? *ports : std::vector<std::string>{};
}

std::string NetworkRoot::hostVeths() {
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

NetworkRoot::Executor& NetworkRoot::start(const std::string& name, const std::string& resources,
                                          const std::vector<int>& listen, const char* server) {
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

void NetworkRoot::stop(Executor& e) {
  (void)launcher_->signal(e.pid, SIGKILL);
  EXPECT_TRUE(runUntil(io_, [&] { return !e.running; }, 10s));
}

void NetworkRoot::makeOutside(bool withIpv6) {
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

bool NetworkRoot::haveForceForwarding() { return access("/proc/sys/net/ipv6/conf/lo/force_forwarding", F_OK) == 0; }
bool NetworkRoot::ipv6Forwards() {
  return haveForceForwarding() || readFile("/proc/sys/net/ipv6/conf/all/forwarding").rfind("1", 0) == 0;
}

pid_t NetworkRoot::spawnOutside(std::vector<std::string> argv, const std::string& dir) {
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

}  // namespace allot::nettest
