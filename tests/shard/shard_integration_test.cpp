// Link shards with real processes on loopback: allot-master with
// --shard-listen, two allot-shard processes, two allot-agents reaching the
// master only through them (--shards), and allot-execute as the framework.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>

#include <gtest/gtest.h>

#include "http/client.h"
#include "proto/shard_placement.h"
#include "tests/agent/cluster.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

int readPort(const std::string& path) {
  int port = 0;
  std::ifstream in(path);
  in >> port;
  return port;
}

class ShardCluster : public ::testing::Test {
 protected:
  // Certificates from scripts/allot-certs for `role` (master, shard, agent,
  // framework), as --tls-* flags; empty when TLS is off.
  std::vector<std::string> tls(const std::string& role) const {
    if (certs_.empty()) return {};
    return {"--tls-cert", certs_ + "/" + role + ".crt", "--tls-key", certs_ + "/" + role + ".key",
            "--tls-ca", certs_ + "/ca.crt"};
  }
  virtual bool useTls() const { return false; }
  // The master's ACL file; empty: none.
  virtual std::string masterAcls() const { return ""; }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: the agents make cgroups for their executors";
    shard_ = envOr("ALLOT_SHARD");
    if (!shard_) GTEST_SKIP() << "ALLOT_SHARD not set (allot-shard not built)";
    cluster_ = std::make_unique<Cluster>();
    if (auto why = cluster_->missing(); !why.empty()) GTEST_SKIP() << why;
    if (useTls()) {
      const char* certs = envOr("ALLOT_CERTS");
      if (!certs) GTEST_SKIP() << "ALLOT_CERTS not set (scripts/allot-certs)";
      certs_ = cluster_->dir() + "/tls";
      std::string command = std::string(certs) + " " + certs_ + " >/dev/null 2>&1";
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
    }
    std::string shardPortFile = cluster_->dir() + "/shard-listen.port";
    std::vector<std::string> args = {"--shard-listen", "127.0.0.1:0", "--shard-port-file", shardPortFile,
                                     "--http-listen", "127.0.0.1:0", "--http-port-file",
                                     cluster_->dir() + "/master-http.port"};
    for (auto& a : tls("master")) args.push_back(a);
    if (!masterAcls().empty()) {
      std::ofstream(cluster_->dir() + "/master.acls") << masterAcls();
      args.insert(args.end(), {"--acls", cluster_->dir() + "/master.acls"});
    }
    ASSERT_TRUE(cluster_->startMaster(args));
    ASSERT_TRUE(waitFor([&] { return readPort(shardPortFile) > 0; }, 10s));
    masterShardPort_ = readPort(shardPortFile);
  }

  void TearDown() override {
    for (auto& agent : agents_) agent.kill(SIGKILL);
    for (auto& shard : shards_) shard.kill(SIGKILL);
    if (!cluster_) return;
    cluster_->killExecutors();
    for (const auto& dir : agentDirs_) cluster_->removeAgentCgroups("allot" + dir);
    cluster_.reset();
  }

  // Starts shard `i` and waits for its link to the master.
  int startShard(int i, std::vector<std::string> extra = {}) {
    std::string base = cluster_->dir() + "/shard" + std::to_string(i);
    std::vector<std::string> args = {shard_, "--listen", "127.0.0.1:0", "--port-file", base + ".port",
                                     "--master", "127.0.0.1:" + std::to_string(masterShardPort_),
                                     "--liveness-interval", "0.2"};
    args.insert(args.end(), extra.begin(), extra.end());
    shards_.emplace_back(args, base + ".out", base + ".err");
    bool linked = waitFor([&] { return readAll(base + ".err").find("linked to the leader") != std::string::npos; }, 10s);
    EXPECT_TRUE(linked) << readAll(base + ".err");
    return readPort(base + ".port");
  }

  // An agent through `shards` whose first choice is `preferred`: its
  // --hostname is picked so that it ranks first for the agent's key.
  void startAgent(const std::string& shards, const std::string& preferred, const std::string& name,
                  std::vector<std::string> extra = {}) {
    std::string dir = cluster_->workDir() + "/" + name;
    fs::create_directories(dir);
    agentDirs_.push_back(dir);
    auto list = parseShardList(shards);
    ASSERT_TRUE(list.ok());
    std::string host;
    for (int i = 0; host.empty(); ++i) {
      std::string candidate = name + "-" + std::to_string(i);
      if (rankShards(*list, candidate + ":" + dir).front().describe() == preferred) host = candidate;
    }
    std::string base = cluster_->dir() + "/" + name;
    std::vector<std::string> args = {cluster_->agentBinary(), "--shards", shards, "--work-dir", dir,
                                     "--hostname", host, "--resources", "cpus:1;mem:1024;disk:100",
                                     "--isolation", "", "--recovery-timeout", "20",
                                     "--status-update-retry", "1", "--executor-idle-timeout", "0.5"};
    args.insert(args.end(), extra.begin(), extra.end());
    agents_.emplace_back(args, base + ".out", base + ".err");
    bool registered = waitFor([&] { return readAll(base + ".err").find("registered with master") != std::string::npos; }, 15s);
    ASSERT_TRUE(registered) << readAll(base + ".err");
  }

  std::unique_ptr<Cluster> cluster_;
  std::string certs_;
  const char* shard_ = nullptr;
  int masterShardPort_ = 0;
  std::vector<Child> shards_;
  std::vector<Child> agents_;
  std::vector<std::string> agentDirs_;
};

// GET `target` from 127.0.0.1:`port`: "STATUS BODY", or the error.
std::string get(int port, const std::string& target) {
  auto r = http::fetch(HostPort{"127.0.0.1", static_cast<uint16_t>(port)}, "GET", target);
  if (!r) return "error: " + r.error().describe();
  return std::to_string(r->status) + " " + r->body;
}

// Four tasks of half a CPU on two one-CPU agents: both agents run two. The
// master's /state names the shard of each agent; the shard's /health and
// /metrics count them.
TEST_F(ShardCluster, TasksOnAgentsBehindAShardRunAndReport) {
  std::string httpPortFile = cluster_->dir() + "/shard1-http.port";
  int s1 = startShard(1, {"--http-listen", "127.0.0.1:0", "--http-port-file", httpPortFile});
  std::string list = "127.0.0.1:" + std::to_string(s1);
  startAgent(list, list, "a");
  startAgent(list, list, "b");
  std::string state = get(readPort(cluster_->dir() + "/master-http.port"), "/state");
  EXPECT_EQ(count(state, "\"shard\":\"" + list + "\""), 2u) << state;
  int shardHttp = readPort(httpPortFile);
  std::string health = get(shardHttp, "/health");
  EXPECT_EQ(health.rfind("200 ", 0), 0u) << health;
  EXPECT_NE(health.find("\"agents\":2"), std::string::npos) << health;
  std::string metrics = get(shardHttp, "/metrics");
  EXPECT_NE(metrics.find("allot_shard_agents 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("allot_shard_handshakes_total 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("allot_shard_leader_linked 1"), std::string::npos) << metrics;
  std::string masterMetrics = get(readPort(cluster_->dir() + "/master-http.port"), "/metrics");
  EXPECT_NE(masterMetrics.find("allot_master_shard_agents{shard=\"" + list + "\"} 2"), std::string::npos)
      << masterMetrics;
  EXPECT_NE(masterMetrics.find("allot_master_shards 1"), std::string::npos) << masterMetrics;
  Child run = cluster_->execute({"--command", "sleep 0.5", "--instances", "4", "--resources", "cpus:0.5;mem:32"});
  int status = run.wait(40s);
  std::string out = run.out() + run.err();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out << cluster_->masterLog();
  EXPECT_EQ(count(out, "FINISHED"), 4u) << out;
  EXPECT_NE(out.find("on a-"), std::string::npos) << out;
  EXPECT_NE(out.find("on b-"), std::string::npos) << out;
}

// Both agents prefer shard 1; it is killed while their tasks run. They
// move to shard 2 and re-register with their tasks, and every task's end
// reaches the framework.
TEST_F(ShardCluster, AShardsAgentsMoveToAnotherWhenItDiesAndNothingIsLost) {
  std::string s1 = "127.0.0.1:" + std::to_string(startShard(1));
  std::string s2 = "127.0.0.1:" + std::to_string(startShard(2));
  std::string list = s1 + "," + s2;
  startAgent(list, s1, "a");
  startAgent(list, s1, "b");
  Child run = cluster_->execute({"--command", "sleep 4", "--instances", "4", "--resources", "cpus:0.5;mem:32"});
  ASSERT_TRUE(waitFor([&] { return count(run.out() + run.err(), "RUNNING") == 4; }, 20s))
      << run.out() << run.err();
  shards_[0].kill(SIGKILL);
  ASSERT_TRUE(waitFor([&] { return count(cluster_->masterLog(), ") re-registered with") >= 2; }, 15s))
      << cluster_->masterLog();
  int status = run.wait(40s);
  std::string out = run.out() + run.err();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out << cluster_->masterLog();
  EXPECT_EQ(count(out, "FINISHED"), 4u) << out;
  EXPECT_NE(out.find("on a-"), std::string::npos) << out;
  EXPECT_NE(out.find("on b-"), std::string::npos) << out;
}

// Without a leader the shard holds its agents for --leader-grace (a new
// leader may come), then lets them go so that they can move on.
TEST_F(ShardCluster, AShardLetsItsAgentsGoOnlyAfterTheLeaderGrace) {
  int s1 = startShard(1, {"--leader-grace", "5"});
  std::string list = "127.0.0.1:" + std::to_string(s1);
  startAgent(list, list, "a");
  std::string agentLog = cluster_->dir() + "/a.err";
  std::string shardLog = cluster_->dir() + "/shard1.err";
  cluster_->masterProcess().kill(SIGKILL);
  ASSERT_TRUE(waitFor([&] { return readAll(shardLog).find("lost the leader link") != std::string::npos; }, 10s))
      << readAll(shardLog);
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(readAll(agentLog).find("link to master closed"), std::string::npos) << readAll(agentLog);
  EXPECT_TRUE(waitFor([&] { return readAll(shardLog).find("letting 1 agents go") != std::string::npos; }, 10s))
      << readAll(shardLog);
  EXPECT_TRUE(waitFor([&] { return readAll(agentLog).find("link to master closed") != std::string::npos; }, 10s))
      << readAll(agentLog);
}

class TlsShardCluster : public ShardCluster {
 protected:
  bool useTls() const override { return true; }
  // Agents only with the `agent` certificate: an agent whose principal did
  // not reach the master through its shard would be refused.
  std::string masterAcls() const override {
    return "register_agent agent\nregister_framework framework users=*\n";
  }
};

// Mutual TLS on both hops: the shard (a `shard` certificate) to the master,
// the agent (an `agent` certificate) to the shard, whose principal the
// shard checks and carries to the master; the framework to the master.
TEST_F(TlsShardCluster, AgentsLinkToAShardWithMutualTlsAndTheirPrincipalIsCarried) {
  int s1 = startShard(1, tls("shard"));
  std::string list = "127.0.0.1:" + std::to_string(s1);
  startAgent(list, list, "a", tls("agent"));
  std::vector<std::string> args = {"--command", "true", "--instances", "2", "--resources", "cpus:0.5;mem:32"};
  for (auto& a : tls("framework")) args.push_back(a);
  Child run = cluster_->execute(args);
  int status = run.wait(40s);
  std::string out = run.out() + run.err();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out << cluster_->masterLog();
  EXPECT_EQ(count(out, "FINISHED"), 2u) << out;
  EXPECT_NE(cluster_->masterLog().find("principal shard (shard)"), std::string::npos) << cluster_->masterLog();
}

// The shard applies the ACL's agent rules itself: an agent whose principal
// may not register is turned away there and never reaches the master.
TEST_F(TlsShardCluster, AShardRefusesAnAgentTheAclDoesNotAllow) {
  std::string acls = cluster_->dir() + "/shard.acls";
  std::ofstream(acls) << "register_agent someone-else\n";
  std::vector<std::string> extra = tls("shard");
  extra.insert(extra.end(), {"--acls", acls});
  int s1 = startShard(1, extra);
  std::string list = "127.0.0.1:" + std::to_string(s1);
  std::string dir = cluster_->workDir() + "/refused";
  fs::create_directories(dir);
  agentDirs_.push_back(dir);
  std::vector<std::string> args = {cluster_->agentBinary(), "--shards", list, "--work-dir", dir,
                                   "--resources", "cpus:1;mem:1024;disk:100", "--isolation", ""};
  for (auto& a : tls("agent")) args.push_back(a);
  agents_.emplace_back(args, cluster_->dir() + "/refused.out", cluster_->dir() + "/refused.err");
  std::string shardLog = cluster_->dir() + "/shard1.err";
  EXPECT_TRUE(waitFor([&] { return readAll(shardLog).find("principal 'agent' may not register agents") !=
                                   std::string::npos; }, 15s)) << readAll(shardLog);
  EXPECT_TRUE(waitFor([&] { return readAll(cluster_->dir() + "/refused.err").find("may not register agents") !=
                                   std::string::npos; }, 15s)) << readAll(cluster_->dir() + "/refused.err");
  EXPECT_EQ(cluster_->masterLog().find("registered with"), std::string::npos) << cluster_->masterLog();
}

// An agent without a certificate cannot reach a TLS shard.
TEST_F(TlsShardCluster, AShardRefusesAnAgentWithoutACertificate) {
  int s1 = startShard(1, tls("shard"));
  std::string list = "127.0.0.1:" + std::to_string(s1);
  std::string dir = cluster_->workDir() + "/plain";
  fs::create_directories(dir);
  agentDirs_.push_back(dir);
  agents_.emplace_back(std::vector<std::string>{cluster_->agentBinary(), "--shards", list, "--work-dir", dir,
                                                "--resources", "cpus:1;mem:1024;disk:100", "--isolation", ""},
                       cluster_->dir() + "/plain.out", cluster_->dir() + "/plain.err");
  std::string shardLog = cluster_->dir() + "/shard1.err";
  EXPECT_TRUE(waitFor([&] { return readAll(shardLog).find("TLS handshake") != std::string::npos; }, 15s)) << readAll(shardLog);
  EXPECT_EQ(cluster_->masterLog().find("registered with"), std::string::npos) << cluster_->masterLog();
}

}  // namespace
}  // namespace allot::testing
