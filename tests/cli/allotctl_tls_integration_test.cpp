// The HTTP endpoints over mutual TLS: a real allot-master and allot-agent
// with --tls-* and --http-listen, certificates from scripts/allot-certs,
// allotctl and http::fetch as clients. No certificate (or one from another
// CA) gets nothing; any certificate of the cluster reads; operating needs
// the ACL's `operate` rule (or, without --acls, an operator certificate).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include "http/client.h"
#include "tests/agent/cluster.h"
#include "tests/common/test_util.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

class HttpsCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>();
    if (std::string m = cluster_->missing(); !m.empty()) GTEST_SKIP() << m;
    const char* root = envOr("ALLOT_SOURCE_ROOT");
    if (!root) GTEST_SKIP() << "ALLOT_SOURCE_ROOT not set";
    allotctl_ = envOr("ALLOTCTL") ? envOr("ALLOTCTL") : "";
    if (allotctl_.empty()) GTEST_SKIP() << "ALLOTCTL not set (allotctl not built)";
    certs_ = cluster_->dir() + "/tls";
    std::string script = std::string(root) + "/scripts/allot-certs ";
    ASSERT_EQ(std::system((script + certs_ + " >/dev/null").c_str()), 0);
    ASSERT_EQ(std::system((script + certs_ + "/other >/dev/null").c_str()), 0);
  }

  // Master (with --acls when `acls` is not empty) and agent, both serving
  // HTTPS with their own certificates.
  void start(const std::string& acls) {
    std::vector<std::string> extra = tls("master");
    extra.insert(extra.end(), {"--http-listen", "127.0.0.1:0", "--http-port-file",
                               cluster_->dir() + "/m.http"});
    if (!acls.empty()) {
      std::string file = cluster_->dir() + "/acls";
      std::ofstream(file) << acls;
      extra.insert(extra.end(), {"--acls", file});
    }
    ASSERT_TRUE(cluster_->startMaster(extra)) << cluster_->masterLog();
    ASSERT_TRUE(waitFor([&] { return readPort(cluster_->dir() + "/m.http") > 0; }, 10s))
        << cluster_->masterLog();
    masterHttp_ = {"127.0.0.1", readPort(cluster_->dir() + "/m.http")};
    std::vector<std::string> agentExtra = tls("agent");
    agentExtra.insert(agentExtra.end(), {"--http-listen", "127.0.0.1:0", "--http-port-file",
                                         cluster_->dir() + "/a.http"});
    ASSERT_TRUE(cluster_->startAgent(agentExtra)) << cluster_->agentLog() << cluster_->masterLog();
    ASSERT_TRUE(waitFor([&] { return readPort(cluster_->dir() + "/a.http") > 0; }, 10s));
    agentHttp_ = {"127.0.0.1", readPort(cluster_->dir() + "/a.http")};
  }

  std::vector<std::string> tls(const std::string& name, const std::string& sub = "") {
    std::string dir = certs_ + (sub.empty() ? "" : "/" + sub);
    return {"--tls-cert", dir + "/" + name + ".crt", "--tls-key", dir + "/" + name + ".key",
            "--tls-ca", certs_ + "/ca.crt"};
  }

  http::ClientTls client(const std::string& name, const std::string& serverRole) {
    auto ctx = makeTlsContext({certs_ + "/" + name + ".crt", certs_ + "/" + name + ".key",
                               certs_ + "/ca.crt"},
                              TlsSide::kClient);
    EXPECT_TRUE(ctx.ok()) << (ctx ? "" : ctx.error().describe());
    return {ctx ? *ctx : nullptr, serverRole};
  }

  struct CtlResult {
    int code = -1;
    std::string out, err;
  };
  // allotctl against the master's HTTPS port with `name`'s certificate
  // (none when empty).
  CtlResult ctl(const std::string& name, std::vector<std::string> args) {
    std::vector<std::string> full = {allotctl_, "--master",
                                     "https://127.0.0.1:" + std::to_string(masterHttp_.port)};
    if (!name.empty()) {
      auto flags = tls(name);
      full.insert(full.end(), flags.begin(), flags.end());
    }
    full.insert(full.end(), args.begin(), args.end());
    std::string base = cluster_->dir() + "/ctl" + std::to_string(++runs_);
    Child c(full, base + ".out", base + ".err");
    int st = c.wait(20s);
    return {st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, c.out(), c.err()};
  }

  // The one registered agent's id, read with the framework's certificate.
  std::string agentId() {
    auto r = http::fetch(masterHttp_, "GET", "/state", "", 10s, client("framework", "master"));
    if (!r || r->status != 200) return "";
    const std::string key = "\"agents\":[{\"id\":\"";
    size_t at = r->body.find(key);
    if (at == std::string::npos) return "";
    at += key.size();
    return r->body.substr(at, r->body.find('"', at) - at);
  }

  std::unique_ptr<Cluster> cluster_;
  std::string certs_, allotctl_;
  HostPort masterHttp_, agentHttp_;
  int runs_ = 0;
};

constexpr const char* kAcls =
    "register_agent agent\n"
    "register_framework framework\n"
    "operate operator\n";

TEST_F(HttpsCluster, PeerWithoutCertificateGetsNothing) {
  start(kAcls);
  // Plain HTTP on the TLS port.
  auto plain = http::fetch(masterHttp_, "GET", "/health", "", 5s);
  EXPECT_TRUE(!plain || plain->status == 0) << plain->body;
  // TLS that trusts the CA but presents no certificate.
  auto anonymous = std::make_shared<ssl::context>(ssl::context::tlsv13_client);
  anonymous->load_verify_file(certs_ + "/ca.crt");
  anonymous->set_verify_mode(ssl::verify_peer);
  auto bare = http::fetch(masterHttp_, "GET", "/state", "", 5s, {anonymous, "master"});
  ASSERT_FALSE(bare.ok()) << bare->status << " " << bare->body;
  EXPECT_NE(bare.error().message.find("TLS"), std::string::npos) << bare.error().message;
  // allotctl without --tls-* on an https:// address is a usage error; with
  // a certificate from another CA it cannot reach the master.
  EXPECT_EQ(ctl("", {"agents"}).code, 2);
  std::vector<std::string> foreign = {allotctl_, "--master",
                                      "https://127.0.0.1:" + std::to_string(masterHttp_.port)};
  for (auto& f : tls("operator", "other")) foreign.push_back(f);
  foreign.push_back("agents");
  Child other(foreign, cluster_->dir() + "/foreign.out", cluster_->dir() + "/foreign.err");
  int st = other.wait(20s);
  EXPECT_EQ(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 3) << other.err();
  EXPECT_NE(cluster_->masterLog().find("http"), std::string::npos);
  // The agent's HTTPS port refuses the anonymous client too.
  EXPECT_FALSE(http::fetch(agentHttp_, "GET", "/health", "", 5s, {anonymous, ""}).ok());
}

TEST_F(HttpsCluster, FrameworkReadsStateButMayNotDrainWithoutAnOperateRule) {
  start(kAcls);
  CtlResult list = ctl("framework", {"agents"});
  ASSERT_EQ(list.code, 0) << list.err;
  std::string id = agentId();
  ASSERT_FALSE(id.empty());
  EXPECT_NE(list.out.find(id), std::string::npos) << list.out;
  CtlResult drain = ctl("framework", {"drain", id, "--deadline", "5"});
  EXPECT_EQ(drain.code, 5) << drain.out << drain.err;
  EXPECT_NE(drain.err.find("403"), std::string::npos) << drain.err;
  EXPECT_NE(drain.err.find("principal framework may not operate"), std::string::npos) << drain.err;
  // The agent's endpoints read with any certificate of the cluster, and the
  // client checks it talks to an agent.
  auto health = http::fetch(agentHttp_, "GET", "/health", "", 5s, client("framework", "agent"));
  ASSERT_TRUE(health.ok()) << health.error().message;
  EXPECT_EQ(health->status, 200u);
  // A client that wants a master refuses the agent's certificate.
  auto wrong = http::fetch(agentHttp_, "GET", "/health", "", 5s, client("framework", "master"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("expected 'master'"), std::string::npos)
      << wrong.error().message;
}

TEST_F(HttpsCluster, OperatorWithAnOperateRuleDrainsAndUndrains) {
  start(kAcls);
  std::string id = agentId();
  ASSERT_FALSE(id.empty());
  CtlResult drain = ctl("operator", {"drain", id, "--deadline", "5"});
  ASSERT_EQ(drain.code, 0) << drain.out << drain.err;
  auto state = http::fetch(masterHttp_, "GET", "/state", "", 10s, client("operator", "master"));
  ASSERT_TRUE(state.ok());
  EXPECT_NE(state->body.find("\"draining\":true"), std::string::npos) << state->body;
  CtlResult undrain = ctl("operator", {"undrain", id});
  EXPECT_EQ(undrain.code, 0) << undrain.out << undrain.err;
}

TEST_F(HttpsCluster, WithoutAclsOnlyAnOperatorCertificateOperates) {
  start("");
  std::string id = agentId();
  ASSERT_FALSE(id.empty());
  CtlResult refused = ctl("framework", {"drain", id});
  EXPECT_EQ(refused.code, 5) << refused.err;
  EXPECT_NE(refused.err.find("role operator"), std::string::npos) << refused.err;
  CtlResult drained = ctl("operator", {"drain", id});
  EXPECT_EQ(drained.code, 0) << drained.err;
}

TEST_F(HttpsCluster, PlaintextHttpOnTheNetworkNeedsInsecure) {
  std::string portFile = cluster_->dir() + "/refused.port";
  std::string master = envOr("ALLOT_MASTER");
  Child refused({master, "--listen", "127.0.0.1:0", "--http-listen", "0.0.0.0:0"},
                cluster_->dir() + "/refused.out", cluster_->dir() + "/refused.err");
  int st = refused.wait(10s);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) != 0);
  EXPECT_NE(refused.err().find("is not a loopback address"), std::string::npos) << refused.err();
  // With TLS the same address is served.
  std::vector<std::string> args = {master, "--listen", "127.0.0.1:0", "--http-listen", "0.0.0.0:0",
                                   "--http-port-file", portFile};
  for (auto& f : tls("master")) args.push_back(f);
  Child served(args, cluster_->dir() + "/served.out", cluster_->dir() + "/served.err");
  EXPECT_TRUE(waitFor([&] { return readPort(portFile) > 0; }, 10s)) << served.err();
  served.kill(SIGKILL);
}

}  // namespace
}  // namespace allot::testing
