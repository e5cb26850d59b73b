// Link shards across a leader failover, with real daemons: a ZooKeeper
// server, allot-masters electing a leader in it (each with --shard-listen,
// and in the last tests each a link shard too, --agent-shard-listen),
// allot-shard processes following the leader through zk://, real agents
// behind the shards and allot-execute as the framework.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <list>
#include <thread>
#include <string>

#include <gtest/gtest.h>

#include "http/client.h"
#include "proto/shard_placement.h"
#include "proto/tls.h"
#include "tests/common/agent_cgroups.h"
#include "tests/common/wait.h"
#include "tests/ha/zk_cluster.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

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
    url_ = zk_->url(zkPath_);
  }

  void TearDown() override {
    children_.clear();
    if (dir_.empty()) return;
    EXPECT_EQ(removeAgentCgroupTree(defaultAgentCgroupsRoot(dir_ + "/work")), "");
    for (const auto& work : agentWorkDirs_) EXPECT_EQ(removeAgentCgroupTree(defaultAgentCgroupsRoot(work)), "");
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
  // so lead, in the order started). It serves HTTP (mutual TLS under TLS),
  // its port in <name>-http.port.
  Child& startMaster(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{std::getenv("ALLOT_MASTER"), "--listen", "127.0.0.1:0", "--zk", url_,
                                  "--zk-session-timeout", "1", "--shard-listen", "127.0.0.1:0",
                                  "--http-listen", "127.0.0.1:0", "--http-port-file", dir_ + "/" + name + "-http.port"};
    args.insert(args.end(), extra.begin(), extra.end());
    Child& m = start(name, args, "master");
    EXPECT_TRUE(waitFor([&] { return m.log().find("joined the contender group as " + zkPath_ + "/") != std::string::npos; },
                        15s))
        << m.log();
    return m;
  }

  // GET `path` from a daemon's HTTP port, as the operator under TLS.
  std::string fetch(uint16_t port, const std::string& path, const std::string& serverRole) const {
    http::ClientTls tls;
    if (!certs_.empty()) {
      auto context = makeTlsContext({certs_ + "/operator.crt", certs_ + "/operator.key", certs_ + "/ca.crt"},
                                    TlsSide::kClient);
      if (!context) return context.error().describe();
      tls = http::ClientTls{*context, serverRole};
    }
    auto r = http::fetch(HostPort{"127.0.0.1", port}, "GET", path, "", 5000ms, tls);
    return r ? r->body : r.error().describe();
  }

  void standbyShards();

  void leaderFailover();

  std::string dir_;
  std::string certs_;
  std::string url_;
  std::unique_ptr<ZooKeeperCluster> zk_;
  std::string zkPath_ = "/allot-shard-test";
  std::vector<std::string> agentWorkDirs_;
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
  std::this_thread::sleep_for(2s);  // the RUNNING update's acknowledgement reaches the agent

  // The agent is stopped across the handover, so the new leader knows of
  // it only what the shard kept: that must hold the task launched after
  // the agent registered.
  agent.signal(SIGSTOP);
  first.signal(SIGKILL);
  ASSERT_TRUE(waitFor([&] { return count(shard.log(), "linked to the leader") >= 2; }, 15s))
      << shard.log() << second.log();
  {
    uint16_t http = readPort(dir_ + "/master2-http.port");
    std::string state;
    EXPECT_TRUE(waitFor([&] {
      state = fetch(http, "/state", "master");
      return state.find("\"state\":\"TASK_RUNNING\"") != std::string::npos;
    }, 5s)) << state << shard.log();
  }
  ASSERT_TRUE(waitFor([&] {
    return shard.log().find("the leader registered every agent handed over (1)") != std::string::npos;
  }, 15s)) << shard.log() << second.log();
  agent.signal(SIGCONT);
  EXPECT_NE(shard.log().find("handed 1 agents to the leader"), std::string::npos) << shard.log();

  EXPECT_EQ(longTask.waitExit(40000ms), 0) << longTask.log() << agent.log() << second.log();
  EXPECT_NE(longTask.log().find("FINISHED"), std::string::npos) << longTask.log();
  EXPECT_EQ(longTask.log().find("LOST"), std::string::npos) << longTask.log();

  Child& after = start("after", {std::getenv("ALLOT_EXECUTE"), "--master", url_, "--timeout", "30",
                                 "--command", "true", "--resources", "cpus:0.1;mem:16"}, "framework");
  EXPECT_EQ(after.waitExit(30000ms), 0) << after.log() << second.log() << shard.log();
  EXPECT_NE(after.log().find("FINISHED"), std::string::npos) << after.log();

  // One link from the agent to the shard all along, and one registration:
  // the new leader's for the report handed over changed nothing the agent
  // knew (no update of its was unacknowledged), so the shard kept it.
  EXPECT_EQ(agent.log().find("link to master closed"), std::string::npos) << agent.log();
  EXPECT_EQ(agent.log().find("new agent id"), std::string::npos) << agent.log();
  EXPECT_EQ(count(agent.log(), "registered with master"), 1u) << agent.log();
  EXPECT_EQ(shard.log().find("refusing agent"), std::string::npos) << shard.log();
  EXPECT_TRUE(agent.running());
}

// The only master is SIGKILLed while a task runs, and the task ends while
// the shard has no leader: its FINISHED cannot go on. A master started
// afterwards leads, the shard hands it the agent (the task still running
// in the kept report, for its FINISHED is unacknowledged) and passes the
// new leader's registration on, since the agent has an update to send
// again; the agent sends the FINISHED at once (its own retry is set far
// beyond the test), and not its report.
TEST_F(ShardFailover, AnUpdateSentWhileTheShardHasNoLeaderReachesTheNextLeader) {
  Child& first = startMaster("master1");
  std::string portFile = dir_ + "/shard.port";
  Child& shard = start("shard", {std::getenv("ALLOT_SHARD"), "--listen", "127.0.0.1:0", "--port-file", portFile,
                                 "--master", url_, "--liveness-interval", "0.2", "--leader-grace", "60"});
  ASSERT_TRUE(waitFor([&] { return shard.log().find("linked to the leader") != std::string::npos; }, 15s))
      << shard.log() << first.log();
  std::string shards = "127.0.0.1:" + std::to_string(readPort(portFile));
  Child& agent = start("agent", {std::getenv("ALLOT_AGENT"), "--shards", shards, "--work-dir", dir_ + "/work",
                                 "--resources", "cpus:4;mem:4096;disk:1024", "--recovery-timeout", "30",
                                 "--status-update-retry", "600", "--executor-idle-timeout", "0.5"});
  ASSERT_TRUE(waitFor([&] { return count(agent.log(), "registered with master") >= 1; }, 20s)) << agent.log();
  Child& task = start("task", {std::getenv("ALLOT_EXECUTE"), "--master", url_, "--timeout", "60",
                               "--command", "sleep 2", "--resources", "cpus:0.1;mem:16"});
  ASSERT_TRUE(waitFor([&] { return task.log().find("RUNNING") != std::string::npos; }, 20s))
      << task.log() << agent.log();

  first.signal(SIGKILL);
  ASSERT_TRUE(waitFor([&] { return shard.log().find("lost the leader link") != std::string::npos; }, 10s))
      << shard.log();
  std::this_thread::sleep_for(4s);  // the task ends meanwhile
  EXPECT_EQ(task.log().find("FINISHED"), std::string::npos) << task.log();

  Child& second = startMaster("master2");
  ASSERT_TRUE(waitFor([&] { return count(shard.log(), "linked to the leader") >= 2; }, 15s))
      << shard.log() << second.log();
  EXPECT_EQ(task.waitExit(40000ms), 0) << task.log() << agent.log() << second.log();
  EXPECT_NE(task.log().find("FINISHED"), std::string::npos) << task.log();
  EXPECT_EQ(task.log().find("LOST"), std::string::npos) << task.log();
  EXPECT_NE(agent.log().find("handed to master"), std::string::npos) << agent.log();
  EXPECT_EQ(agent.log().find("link to master closed"), std::string::npos) << agent.log();
  EXPECT_EQ(count(agent.log(), "registered with master"), 2u) << agent.log();
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

// A work dir under `dir` whose agent (host `host`) ranks the shards with
// `first` first and `second` next (proto/shard_placement.h): the agent's
// place and where it moves are then known before it starts.
std::string workDirRanking(const std::string& dir, const std::string& host, const std::vector<Endpoint>& shards,
                           const Endpoint& first, const Endpoint& second) {
  for (int i = 0; i < 100000; ++i) {
    std::string work = dir + "/work-" + std::to_string(i);
    std::vector<Endpoint> ranked = rankShards(shards, host + ":" + work);
    if (ranked[0] == first && ranked[1] == second) return work;
  }
  return "";
}

// The value of an unlabelled Prometheus sample, -1 when absent.
double sample(const std::string& metrics, const std::string& name) {
  size_t at = metrics.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::atof(metrics.c_str() + at + name.size() + 2);
}

// Three masters, each a link shard too (--agent-shard-listen), and a
// shard-only allot-shard, all announced in ZooKeeper; one real agent placed
// on each (--shards zk://), a task running on every agent. The shard-only
// process is SIGKILLed: its agent moves, its task goes on, its FINISHED
// arrives. The leader is SIGKILLed: its own shard's agent moves, the other
// agents keep their links (no new handshake, the new leader's shard included,
// which now links to its own master over loopback), and the new leader has
// every task at once.
TEST_F(TlsShardFailover, StandbyMastersCarryAgentsAndOnlyTheDeadShardsAgentsMove) { standbyShards(); }

void ShardFailover::standbyShards() {
  std::string announce = zk_->url("/allot-shard-test-shards");
  std::vector<Child*> shards;
  std::vector<Endpoint> places;
  auto place = [&](const std::string& name) {
    uint16_t port = readPort(dir_ + "/" + name + "-shard.port");
    places.push_back(Endpoint{Endpoint::Kind::kTcp, "127.0.0.1", port, ""});
    EXPECT_TRUE(waitFor([&] { return shards.back()->log().find("linked to the leader") != std::string::npos; }, 15s))
        << shards.back()->log();
  };
  for (std::string name : {"master1", "master2", "master3"}) {
    std::vector<std::string> extra{"--agent-shard-listen", "127.0.0.1:0", "--agent-shard-port-file",
                                   dir_ + "/" + name + "-shard.port", "--agent-shard-announce", announce,
                                   "--agent-shard-http-listen", "127.0.0.1:0", "--agent-shard-http-port-file",
                                   dir_ + "/" + name + "-shard-http.port"};
    if (useTls()) {
      std::vector<std::string> tls{"--agent-shard-tls-cert", certs_ + "/shard.crt", "--agent-shard-tls-key",
                                   certs_ + "/shard.key"};
      extra.insert(extra.end(), tls.begin(), tls.end());
    }
    shards.push_back(&startMaster(name, extra));
    place(name);
  }
  shards.push_back(&start("shard4", {std::getenv("ALLOT_SHARD"), "--listen", "127.0.0.1:0", "--port-file",
                                     dir_ + "/shard4-shard.port", "--master", url_, "--zk-announce", announce,
                                     "--liveness-interval", "0.2"}, "shard"));
  ASSERT_TRUE(waitFor([&] { return std::filesystem::exists(dir_ + "/shard4-shard.port"); }, 10s));
  place("shard4");
  ASSERT_FALSE(HasFailure());
  enum { kM1, kM2, kM3, kS4 };

  // One agent on each shard. Those of the shard-only process and of the
  // leader move to master3's shard when theirs dies.
  // The agent's key holds its work dir made canonical.
  const std::string host = "standby-shard-agent";
  const std::string base = std::filesystem::canonical(dir_).string();
  std::vector<std::string> work{workDirRanking(base, host, places, places[kM1], places[kM3]),
                                workDirRanking(base, host, places, places[kM2], places[kM3]),
                                workDirRanking(base, host, places, places[kM3], places[kM1]),
                                workDirRanking(base, host, places, places[kS4], places[kM3])};
  std::vector<Child*> agents;
  for (size_t i = 0; i < work.size(); ++i) {
    ASSERT_FALSE(work[i].empty());
    agentWorkDirs_.push_back(work[i]);
    agents.push_back(&start("agent" + std::to_string(i + 1),
                            {std::getenv("ALLOT_AGENT"), "--shards", announce, "--hostname", host, "--work-dir",
                             work[i], "--resources", "cpus:1;mem:1024;disk:1024", "--recovery-timeout", "30",
                             "--status-update-retry", "1", "--executor-idle-timeout", "0.5"}, "agent"));
  }
  for (size_t i = 0; i < agents.size(); ++i) {
    ASSERT_TRUE(waitFor([&] { return count(agents[i]->log(), "registered with master") >= 1; }, 30s))
        << agents[i]->log();
    EXPECT_NE(agents[i]->log().find("choosing shard " + places[i].describe() + " "), std::string::npos)
        << agents[i]->log();
  }

  // One task per agent: each takes 0.6 of an agent's 1 cpu.
  Child& tasks = start("tasks", {std::getenv("ALLOT_EXECUTE"), "--master", url_, "--timeout", "60", "--instances",
                                 "4", "--command", "sleep 15", "--resources", "cpus:0.6;mem:16"}, "framework");
  ASSERT_TRUE(waitFor([&] { return count(tasks.log(), " RUNNING") >= 4; }, 30s)) << tasks.log();

  // The shard-only process dies: its agent moves to master3's shard.
  shards[kS4]->signal(SIGKILL);
  ASSERT_TRUE(waitFor([&] { return count(agents[kS4]->log(), "registered with master") >= 2; }, 20s))
      << agents[kS4]->log();
  EXPECT_NE(agents[kS4]->log().find("choosing shard " + places[kM3].describe() + " "), std::string::npos)
      << agents[kS4]->log();
  EXPECT_EQ(agents[kS4]->log().find("new agent id"), std::string::npos) << agents[kS4]->log();

  // The leader dies. master2's shard handshakes counted before and after:
  // master2 leads next and its own agent must not notice.
  uint16_t m2ShardHttp = readPort(dir_ + "/master2-shard-http.port");
  double handshakesBefore = sample(fetch(m2ShardHttp, "/metrics", "shard"), "allot_shard_handshakes_total");
  EXPECT_EQ(handshakesBefore, 1) << fetch(m2ShardHttp, "/metrics", "shard");
  shards[kM1]->signal(SIGKILL);
  ASSERT_TRUE(waitFor([&] { return count(shards[kM2]->log(), "linked to the leader") >= 2; }, 15s))
      << shards[kM2]->log();
  std::string state;
  uint16_t m2Http = readPort(dir_ + "/master2-http.port");
  EXPECT_TRUE(waitFor([&] {
    state = fetch(m2Http, "/state", "master");
    return count(state, "\"state\":\"TASK_RUNNING\"") == 4;
  }, 10s)) << state;
  ASSERT_TRUE(waitFor([&] { return agents[kM1]->log().find("choosing shard " + places[kM3].describe() + " ") !=
                                   std::string::npos &&
                                   count(agents[kM1]->log(), "registered with master") >= 2; }, 20s))
      << agents[kM1]->log();

  EXPECT_EQ(tasks.waitExit(60000ms), 0) << tasks.log() << shards[kM2]->log();
  EXPECT_EQ(count(tasks.log(), " FINISHED"), 4u) << tasks.log();
  EXPECT_EQ(tasks.log().find("LOST"), std::string::npos) << tasks.log();

  // master2's and master3's own agents kept their one link throughout, and
  // their shards handed them to the new leader.
  for (size_t i : {kM2, kM3}) {
    EXPECT_EQ(agents[i]->log().find("link to master closed"), std::string::npos) << agents[i]->log();
    EXPECT_NE(shards[i]->log().find("the leader registered every agent handed over ("), std::string::npos)
        << shards[i]->log();
  }
  EXPECT_EQ(sample(fetch(m2ShardHttp, "/metrics", "shard"), "allot_shard_handshakes_total"), handshakesBefore);
  for (Child* agent : agents) EXPECT_TRUE(agent->running()) << agent->log();
}

}  // namespace
}  // namespace allot::testing
