// A mutual-TLS cluster from certificates made by scripts/allot-certs: real
// allot-master, allot-agent and allot-execute on loopback. Peers without a
// certificate, with one from another CA, or with one of the wrong role are
// refused, and the refusal is named where an operator would look.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include "tests/agent/cluster.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using namespace allot::testing;

int exitStatus(int st) { return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1; }

class TlsCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>();
    if (std::string m = cluster_->missing(); !m.empty()) GTEST_SKIP() << m;
    const char* root = envOr("ALLOT_SOURCE_ROOT");
    if (!root) GTEST_SKIP() << "ALLOT_SOURCE_ROOT not set";
    certs_ = cluster_->dir() + "/tls";
    std::string script = std::string(root) + "/scripts/allot-certs ";
    std::string quiet = " >/dev/null";
    ASSERT_EQ(std::system((script + certs_ + quiet).c_str()), 0);
    ASSERT_EQ(std::system((script + certs_ + "/other" + quiet).c_str()), 0);
    ASSERT_TRUE(cluster_->startMaster(tls("master"))) << cluster_->masterLog();
  }

  // --tls-* flags for `name`'s pair (from `sub`, another CA, if given), always
  // trusting the cluster's CA.
  std::vector<std::string> tls(const std::string& name, const std::string& sub = "") {
    std::string dir = certs_ + (sub.empty() ? "" : "/" + sub);
    return {"--tls-cert", dir + "/" + name + ".crt", "--tls-key", dir + "/" + name + ".key",
            "--tls-ca", certs_ + "/ca.crt"};
  }

  std::vector<std::string> task(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--command", "echo over-tls", "--resources",
                                     "cpus:0.1;mem:16", "--timeout", "4"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  std::unique_ptr<Cluster> cluster_;
  std::string certs_;
};

TEST_F(TlsCluster, AgentAndFrameworkWithCertificatesRunATask) {
  ASSERT_TRUE(cluster_->startAgent(tls("agent"))) << cluster_->agentLog() << cluster_->masterLog();
  EXPECT_NE(cluster_->masterLog().find("mutual TLS"), std::string::npos);
  Child ok = cluster_->execute(task(tls("framework")));
  ASSERT_EQ(exitStatus(ok.wait(30s)), 0) << ok.out() << ok.err() << cluster_->masterLog();
  EXPECT_NE(ok.out().find("FINISHED"), std::string::npos) << ok.out();
}

TEST_F(TlsCluster, FrameworkWithoutCertificateIsRefused) {
  Child plain = cluster_->execute(task({}));
  EXPECT_EQ(exitStatus(plain.wait(30s)), 124) << plain.out() << plain.err();
  EXPECT_NE(cluster_->masterLog().find("TLS handshake"), std::string::npos)
      << cluster_->masterLog();
}

TEST_F(TlsCluster, AgentWithCertificateFromAnotherCaIsRefused) {
  EXPECT_FALSE(cluster_->startAgent(tls("agent", "other")));
  EXPECT_NE(cluster_->masterLog().find("TLS handshake: certificate verify failed"),
            std::string::npos)
      << cluster_->masterLog();
  EXPECT_NE(cluster_->agentLog().find("unknown ca"), std::string::npos) << cluster_->agentLog();
}

TEST_F(TlsCluster, FrameworkWithAnAgentCertificateIsRefused) {
  Child wrong = cluster_->execute(task(tls("agent")));
  EXPECT_EQ(exitStatus(wrong.wait(30s)), 124) << wrong.out() << wrong.err();
  const std::string refusal =
      "Hello role ROLE_SCHEDULER does not match certificate role 'agent' of principal agent";
  EXPECT_NE(wrong.err().find("peer rejected us: " + refusal), std::string::npos) << wrong.err();
  EXPECT_NE(cluster_->masterLog().find(refusal), std::string::npos) << cluster_->masterLog();
}

}  // namespace
}  // namespace allot
