// ROOT: HTTP and TCP health checks reach a task inside network/netns. The
// task serves on 127.0.0.1 of its own network namespace, where nothing on
// the host can reach it; the check passes only when the executor probes
// from inside that namespace (a TCP check asks that namespace's socket
// table), and a listener on the host's loopback does not count. Driven
// through allot-execute's --health-http and --health-tcp.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include "isolators/network_isolator.h"
#include "isolators/network_links.h"
#include "isolators/network_rules.h"
#include "tests/agent/cluster.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

// Answers every GET with "200 inside-netns", on 127.0.0.1:<argv[1]>.
constexpr const char* kServer = R"(import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200, "inside-netns"); self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
)";

class HealthNetnsRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/python3";
    cluster_ = std::make_unique<Cluster>();
    if (auto why = cluster_->missing(); !why.empty()) GTEST_SKIP() << why;
    int tag = getpid() % 250;
    net_.bridge = "hcbr" + std::to_string(getpid());
    net_.cidr = "10.237." + std::to_string(tag) + ".0/24";
    net_.stateDir = cluster_->dir() + "/netstate";
    script_ = cluster_->dir() + "/server.py";
    std::ofstream(script_) << kServer;
    chmod(script_.c_str(), 0644);
    ASSERT_TRUE(cluster_->startMaster());
    ASSERT_TRUE(cluster_->startAgent({"--isolation", "network/netns", "--network-bridge", net_.bridge,
                                      "--network-cidr", net_.cidr, "--network-state-dir", net_.stateDir}))
        << cluster_->agentLog();
  }

  void TearDown() override {
    if (!cluster_) return;
    cluster_.reset();
    EXPECT_TRUE(removeNetwork(net_).ok());
  }

  std::unique_ptr<Cluster> cluster_;
  NetworkOptions net_;
  std::string script_;
};

TEST_F(HealthNetnsRoot, HttpCheckReachesATaskInsideItsNetworkNamespace) {
  Child run = cluster_->execute({"--command", "exec /usr/bin/python3 " + script_ + " 8931", "--resources",
                                 "cpus:0.1;mem:64", "--health-http", "8931/ready", "--health-delay", "0",
                                 "--health-interval", "0.3", "--health-grace", "30"});
  ASSERT_TRUE(waitFor([&] { return run.out().find(" healthy: ") != std::string::npos; }, 30s))
      << run.out() << run.err() << cluster_->agentLog();
  EXPECT_NE(run.out().find("HTTP 127.0.0.1:8931/ready: HTTP/1.0 200 inside-netns"), std::string::npos)
      << run.out();
  run.kill(SIGINT);
  EXPECT_EQ(run.wait(20s), 130 << 8) << run.out() << run.err();
}

TEST_F(HealthNetnsRoot, TcpCheckSeesTheListenerOfItsOwnNamespaceOnly) {
  Child run = cluster_->execute({"--command", "exec /usr/bin/python3 " + script_ + " 8932", "--resources",
                                 "cpus:0.1;mem:64", "--health-tcp", "8932", "--health-delay", "0",
                                 "--health-interval", "0.3", "--health-grace", "30"});
  ASSERT_TRUE(waitFor([&] { return run.out().find(" healthy: ") != std::string::npos; }, 30s))
      << run.out() << run.err() << cluster_->agentLog();
  EXPECT_NE(run.out().find("TCP 127.0.0.1:8932: listening"), std::string::npos) << run.out();
  run.kill(SIGINT);
  EXPECT_EQ(run.wait(20s), 130 << 8) << run.out() << run.err();

  // The host listens on 8933; the task's namespace has nothing there.
  int host = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(8933);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(host, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(host, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(host, 8) != 0) {
    close(host);
    GTEST_SKIP() << "127.0.0.1:8933 is taken on the host";
  }
  Child lonely = cluster_->execute({"--command", "sleep 30", "--resources", "cpus:0.1;mem:64", "--health-tcp",
                                    "8933", "--health-delay", "0", "--health-interval", "0.2", "--health-grace", "0",
                                    "--health-failures", "2"});
  ASSERT_TRUE(waitFor([&] { return lonely.out().find("HEALTH_CHECK_FAILED") != std::string::npos; }, 30s))
      << lonely.out() << lonely.err();
  EXPECT_NE(lonely.out().find("TCP 127.0.0.1:8933: nothing listens"), std::string::npos) << lonely.out();
  close(host);
}

}  // namespace
}  // namespace allot::testing
