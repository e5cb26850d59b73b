// Link shards across a leader failover, with real daemons: a ZooKeeper
// server, two allot-masters electing a leader in it (each with
// --shard-listen), an allot-shard following the leader through zk://, a
// real agent behind the shard and allot-execute as the framework.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <list>
#include <thread>
#include <string>

#include <gtest/gtest.h>

#include "http/client.h"
#include "tests/common/agent_cgroups.h"
#include "tests/ha/zk_cluster.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool waitFor(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

class ShardFailover : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = ZooKeeperCluster::missing(); !why.empty()) GTEST_SKIP() << why;
    if (geteuid() != 0) GTEST_SKIP() << "needs root: the agent makes cgroups for its executors";
    for (const char* v : {"ALLOT_MASTER", "ALLOT_AGENT", "ALLOT_EXECUTE", "ALLOT_SHARD"}) {
      if (!std::getenv(v)) GTEST_SKIP() << v << " not set (binary not built)";
    }
    dir_ = ::testing::TempDir() + "/allot-shard-zk-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/work");
    if (useTls()) {
      const char* certs = std::getenv("ALLOT_CERTS");
      if (!certs) GTEST_SKIP() << "ALLOT_CERTS not set (scripts/allot-certs)";
      certs_ = dir_ + "/tls";
      std::string command = std::string(certs) + " " + certs_ + " >/dev/null 2>&1";
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
    }
    zk_ = std::make_unique<ZooKeeperCluster>(1);
    ASSERT_TRUE(zk_->start()) << zk_->log(0);
    url_ = zk_->url("/allot-shard-test");
  }

  void TearDown() override {
    children_.clear();
    if (dir_.empty()) return;
    EXPECT_EQ(removeAgentCgroupTree(defaultAgentCgroupsRoot(dir_ + "/work")), "");
    std::filesystem::remove_all(dir_);
  }

  virtual bool useTls() const { return false; }
  // --tls-* for `role` (scripts/allot-certs); empty without TLS.
  std::vector<std::string> tls(const std::string& role) const {
    if (certs_.empty()) return {};
    return {"--tls-cert", certs_ + "/" + role + ".crt", "--tls-key", certs_ + "/" + role + ".key",
            "--tls-ca", certs_ + "/ca.crt"};
  }

  // Starts a process; `role` names its certificate when TLS is on.
  Child& start(const std::string& name, std::vector<std::string> args, const std::string& role = "") {
    if (!role.empty()) for (auto& a : tls(role)) args.push_back(a);
    children_.emplace_back(args, dir_ + "/" + name + ".log");
    return children_.back();
  }

  // A master in the group; returns once it has joined (masters join, and
  // so lead, in the order started). Without TLS it serves HTTP, its port
  // in <name>-http.port.
  Child& startMaster(const std::string& name) {
    std::vector<std::string> args{std::getenv("ALLOT_MASTER"), "--listen", "127.0.0.1:0", "--zk", url_,
                                  "--zk-session-timeout", "1", "--shard-listen", "127.0.0.1:0"};
    if (!useTls()) {
      for (std::string a : {"--http-listen", "127.0.0.1:0", "--http-port-file"}) args.push_back(a);
      args.push_back(dir_ + "/" + name + "-http.port");
    }
    Child& m = start(name, args, "master");
    EXPECT_TRUE(waitFor([&] { return m.log().find("joined the contender group") != std::string::npos; }, 15s))
        << m.log();
    return m;
  }

  void leaderFailover();

  std::string dir_;
  std::string certs_;
  std::string url_;
  std::unique_ptr<ZooKeeperCluster> zk_;
  std::list<Child> children_;
};

class TlsShardFailover : public ShardFailover {
 protected:
  bool useTls() const override { return true; }
};

// The leader is SIGKILLed while a task runs. The agent keeps its link to
// the shard (no reconnect, no new handshake), the shard hands it to the
// new leader, the task's FINISHED reaches the framework, and a task
// launched after the failover runs.
TEST_F(ShardFailover, AgentsStayOnTheirShardWhenTheLeaderDiesAndNothingIsLost) { leaderFailover(); }

// The same with mutual TLS on every link (masters, shard, agent, framework).
TEST_F(TlsShardFailover, AgentsStayOnTheirShardWhenTheLeaderDiesAndNothingIsLost) { leaderFailover(); }

void ShardFailover::leaderFailover() {
  Child& first = startMaster("master1");
  Child& second = startMaster("master2");
  std::string portFile = dir_ + "/shard.port";
  Child& shard = start("shard", {std::getenv("ALLOT_SHARD"), "--listen", "127.0.0.1:0", "--port-file", portFile,
                                 "--master", url_, "--liveness-interval", "0.2"}, "shard");
  ASSERT_TRUE(waitFor([&] { return shard.log().find("linked to the leader") != std::string::npos; }, 15s))
      << shard.log() << first.log();
  std::string shards = "127.0.0.1:" + std::to_string(readPort(portFile));
  Child& agent = start("agent", {std::getenv("ALLOT_AGENT"), "--shards", shards, "--work-dir", dir_ + "/work",
                                 "--resources", "cpus:4;mem:4096;disk:1024", "--recovery-timeout", "30",
                                 "--status-update-retry", "1", "--executor-idle-timeout", "0.5"}, "agent");
  ASSERT_TRUE(waitFor([&] { return count(agent.log(), "registered with master") >= 1; }, 20s)) << agent.log();

  Child& longTask = start("long", {std::getenv("ALLOT_EXECUTE"), "--master", url_, "--timeout", "60",
                                   "--command", "sleep 6", "--resources", "cpus:0.1;mem:16"}, "framework");
  ASSERT_TRUE(waitFor([&] { return longTask.log().find("RUNNING") != std::string::npos; }, 20s))
      << longTask.log() << agent.log();

  // The agent is stopped across the handover, so the new leader knows of
  // it only what the shard kept: that must hold the task launched after
  // the agent registered.
  agent.signal(SIGSTOP);
  first.signal(SIGKILL);
  ASSERT_TRUE(waitFor([&] { return count(shard.log(), "linked to the leader") >= 2; }, 15s))
      << shard.log() << second.log();
  if (!useTls()) {
    uint16_t http = readPort(dir_ + "/master2-http.port");
    std::string state;
    EXPECT_TRUE(waitFor([&] {
      auto r = http::fetch(HostPort{"127.0.0.1", http}, "GET", "/state");
      state = r ? r->body : r.error().describe();
      return state.find("\"state\":\"TASK_RUNNING\"") != std::string::npos;
    }, 5s)) << state << shard.log();
  }
  agent.signal(SIGCONT);
  ASSERT_TRUE(waitFor([&] { return agent.log().find("handed to master") != std::string::npos; }, 15s))
      << agent.log() << shard.log();
  EXPECT_NE(shard.log().find("handed 1 agents to the leader"), std::string::npos) << shard.log();

  EXPECT_EQ(longTask.waitExit(40000ms), 0) << longTask.log() << agent.log() << second.log();
  EXPECT_NE(longTask.log().find("FINISHED"), std::string::npos) << longTask.log();
  EXPECT_EQ(longTask.log().find("LOST"), std::string::npos) << longTask.log();

  Child& after = start("after", {std::getenv("ALLOT_EXECUTE"), "--master", url_, "--timeout", "30",
                                 "--command", "true", "--resources", "cpus:0.1;mem:16"}, "framework");
  EXPECT_EQ(after.waitExit(30000ms), 0) << after.log() << second.log() << shard.log();
  EXPECT_NE(after.log().find("FINISHED"), std::string::npos) << after.log();

  // One link from the agent to the shard all along.
  EXPECT_EQ(agent.log().find("link to master closed"), std::string::npos) << agent.log();
  EXPECT_EQ(agent.log().find("new agent id"), std::string::npos) << agent.log();
  EXPECT_EQ(shard.log().find("refusing agent"), std::string::npos) << shard.log();
  EXPECT_TRUE(agent.running());
}

// Shards announce themselves in ZooKeeper and the agent finds them there
// (--shards zk://...). When its shard is SIGKILLed the agent moves to the
// other one, keeping its id, and its running task's FINISHED arrives.
TEST_F(ShardFailover, AgentsFindShardsInZooKeeperAndMoveWhenTheirsDies) {
  Child& master = startMaster("master1");
  std::string announce = zk_->url("/allot-shard-test-shards");
  std::vector<Child*> shards;
  std::vector<std::string> ports;
  for (int i = 1; i <= 2; ++i) {
    std::string name = "shard" + std::to_string(i);
    std::string portFile = dir_ + "/" + name + ".port";
    shards.push_back(&start(name, {std::getenv("ALLOT_SHARD"), "--listen", "127.0.0.1:0", "--port-file", portFile,
                                   "--master", url_, "--zk-announce", announce, "--liveness-interval", "0.2"}));
    ASSERT_TRUE(waitFor([&] { return shards.back()->log().find("joined the contender group") != std::string::npos; },
                        15s)) << shards.back()->log() << master.log();
    ports.push_back("127.0.0.1:" + std::to_string(readPort(portFile)));
  }
  Child& agent = start("agent", {std::getenv("ALLOT_AGENT"), "--shards", announce, "--work-dir", dir_ + "/work",
                                 "--resources", "cpus:4;mem:4096;disk:1024", "--recovery-timeout", "30",
                                 "--status-update-retry", "1", "--executor-idle-timeout", "0.5"});
  ASSERT_TRUE(waitFor([&] { return count(agent.log(), "registered with master") >= 1; }, 20s)) << agent.log();
  size_t mine = agent.log().find("choosing shard " + ports[0] + " ") != std::string::npos ? 0 : 1;
  ASSERT_NE(agent.log().find("choosing shard " + ports[mine] + " "), std::string::npos) << agent.log();

  Child& task = start("task", {std::getenv("ALLOT_EXECUTE"), "--master", url_, "--timeout", "60",
                               "--command", "sleep 4", "--resources", "cpus:0.1;mem:16"});
  ASSERT_TRUE(waitFor([&] { return task.log().find("RUNNING") != std::string::npos; }, 20s))
      << task.log() << agent.log();
  shards[mine]->signal(SIGKILL);
  ASSERT_TRUE(waitFor([&] { return count(agent.log(), "registered with master") >= 2; }, 20s))
      << agent.log() << shards[1 - mine]->log();
  EXPECT_NE(agent.log().find("shard " + ports[1 - mine]), std::string::npos) << agent.log();
  EXPECT_EQ(agent.log().find("new agent id"), std::string::npos) << agent.log();
  EXPECT_EQ(task.waitExit(40000ms), 0) << task.log() << agent.log() << master.log();
  EXPECT_NE(task.log().find("FINISHED"), std::string::npos) << task.log();
}

}  // namespace
}  // namespace allot::testing
