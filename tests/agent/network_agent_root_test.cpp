// ROOT: allot-agent with network/netns, killed with SIGKILL and restarted
// while executors run: the running executor keeps its address, rules and
// connectivity; one that died meanwhile is cleaned up by the new agent.
// Own bridge, CIDR and state dir per test run; traffic only to loopback.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "isolators/network_isolator.h"
#include "isolators/network_links.h"
#include "isolators/network_rules.h"
#include "tests/agent/cluster.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kServer = R"(import os, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen(16)
while True:
    c, a = s.accept(); c.sendall((os.environ.get('ALLOT_NETWORK_ADDRESS', 'none') + '\n').encode()); c.close()
)";

// The first line 127.0.0.1:port answers, or "".
std::string fetchLocal(int port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{1, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    char buf[128];
    ssize_t n = read(s, buf, sizeof buf);
    if (n > 0) out.assign(buf, n);
  }
  close(s);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Networks the agent's warm pool keeps made ahead on the bridge (beside the
// executors' own).
constexpr size_t kWarm = 4;

class NetworkAgentRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/python3";
    cluster_ = std::make_unique<Cluster>();
    if (auto why = cluster_->missing(); !why.empty()) GTEST_SKIP() << why;
    int tag = getpid() % 250;
    net_.bridge = "antag" + std::to_string(getpid());
    net_.cidr = "10.236." + std::to_string(tag) + ".0/24";
    net_.stateDir = cluster_->dir() + "/netstate";
    script_ = "/tmp/allot-netsrv-" + std::to_string(getpid()) + ".py";
    std::ofstream(script_) << kServer;
    chmod(script_.c_str(), 0644);
    ASSERT_TRUE(cluster_->startMaster());
    ASSERT_TRUE(startAgent()) << cluster_->agentLog();
  }

  bool startAgent() {
    return cluster_->startAgent({"--isolation", "network/netns", "--network-bridge", net_.bridge,
                                 "--network-cidr", net_.cidr, "--network-state-dir", net_.stateDir,
                                 "--network-warm-pool", std::to_string(kWarm)});
  }

  void TearDown() override {
    if (!cluster_) return;
    cluster_.reset();  // SIGKILLs agent, executors and master
    std::remove(script_.c_str());
    // The agent was killed, so what is left is removed the uninstall way;
    // then nothing of the test may remain.
    EXPECT_TRUE(removeNetwork(net_).ok());
    auto nl = Netlink::open();
    ASSERT_TRUE(nl.ok());
    EXPECT_FALSE(nl->ifindex(net_.bridge).ok()) << "bridge left";
    auto nft = Nftables::create();
    ASSERT_TRUE(nft.ok());
    EXPECT_FALSE((*nft)->listTable(networkTableName(net_)).ok()) << "nftables table left";
  }

  size_t bridgePorts() {
    auto nl = Netlink::open();
    auto index = nl->ifindex(net_.bridge);
    if (!index) return 0;
    auto ports = nl->bridgePorts(*index);
    return ports ? ports->size() : 0;
  }

  size_t checkpoints() {
    size_t n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(net_.stateDir, ec)) n += e.is_regular_file();
    return n;
  }

  std::unique_ptr<Cluster> cluster_;
  NetworkOptions net_;
  std::string script_;
};

TEST_F(NetworkAgentRoot, SigkilledAgentKeepsRunningExecutorsNetworkAndCleansDeadOnes) {
  Child server = cluster_->execute({"--command", "/usr/bin/python3 " + script_ + " 31050", "--resources",
                                    "cpus:0.1;mem:64;ports:[31050-31050]"});
  Child sleeper = cluster_->execute({"--command", "sleep 300", "--resources", "cpus:0.1;mem:16"});
  std::string address;
  ASSERT_TRUE(waitFor([&] { return !(address = fetchLocal(31050)).empty(); }, 30s))
      << server.out() << server.err() << cluster_->agentLog();
  EXPECT_EQ(address.rfind("10.236.", 0), 0u) << address;
  ASSERT_TRUE(waitFor([&] { return bridgePorts() == kWarm + 2 && checkpoints() == 2; }, 15s)) << cluster_->agentLog();

  cluster_->agentProcess().killOnly(SIGKILL);
  // While the agent is down the sleeper's executor dies.
  for (pid_t p : processesUnder(cluster_->workDir())) {
    if (procComm(p) == "sleep") {
      pid_t executor = 0;
      std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
      std::string skip;
      stat >> skip >> skip >> skip >> executor;  // ppid: the shell or the executor
      ::kill(p, SIGKILL);
      if (executor > 1 && procComm(executor) != "allot-executor") {
        std::ifstream s2("/proc/" + std::to_string(executor) + "/stat");
        pid_t parent = 0;
        s2 >> skip >> skip >> skip >> parent;
        ::kill(executor, SIGKILL);
        executor = parent;
      }
      if (executor > 1) ::kill(executor, SIGKILL);
    }
  }
  EXPECT_EQ(fetchLocal(31050), address) << "offered port lost while the agent was down";

  ASSERT_TRUE(startAgent()) << cluster_->agentLog();
  EXPECT_EQ(fetchLocal(31050), address) << "offered port lost across the agent restart";
  EXPECT_TRUE(waitFor([&] { return bridgePorts() == kWarm + 1 && checkpoints() == 1; }, 20s))
      << "the dead executor's veth or checkpoint survived: " << bridgePorts() << " ports, " << checkpoints()
      << " checkpoints\n"
      << cluster_->agentLog();
  EXPECT_EQ(fetchLocal(31050), address);
  // The server's framework ends: the agent removes its network too.
  server.kill(SIGINT);
  EXPECT_TRUE(waitFor([&] { return bridgePorts() == kWarm && checkpoints() == 0; }, 20s)) << cluster_->agentLog();
  EXPECT_EQ(fetchLocal(31050), "");
}

}  // namespace
}  // namespace allot::testing
