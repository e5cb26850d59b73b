// The leader's side of a shard link against a real allot-master: this test
// plays the shard over a ShardLink (proto/shard_link.h).
#include <chrono>
#include <memory>

#include <gtest/gtest.h>

#include "proto/connection.h"
#include "proto/shard_link.h"
#include "tests/agent/cluster.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

wire::Envelope registration(const std::string& host) {
  wire::Envelope e;
  auto* info = e.mutable_register_agent()->mutable_info();
  info->set_hostname(host);
  auto* cpus = info->add_resources();
  cpus->set_name("cpus");
  cpus->set_scalar(1);
  return e;
}

shard::ShardEnvelope forAgent(uint64_t slot, const wire::Envelope& e) {
  shard::ShardEnvelope out;
  out.mutable_agent_message()->set_slot(slot);
  *out.mutable_agent_message()->mutable_envelope() = e;
  return out;
}

class ShardHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>();
    if (!envOr("ALLOT_MASTER")) GTEST_SKIP() << "ALLOT_MASTER not set (allot-master not built)";
    std::string portFile = cluster_->dir() + "/shard-listen.port";
    std::vector<std::string> flags = {"--shard-listen", "127.0.0.1:0", "--shard-port-file", portFile};
    for (const auto& f : moreMasterFlags()) flags.push_back(f);
    ASSERT_TRUE(cluster_->startMaster(flags));
    ASSERT_TRUE(waitFor([&] { return std::ifstream(portFile) >> shardPort_ && shardPort_ > 0; }, 10s));
  }

  virtual std::vector<std::string> moreMasterFlags() const { return {}; }

  // Links to the master as a shard; returns once its ShardHello came.
  void link() {
    asyncConnect(io_, "127.0.0.1", static_cast<uint16_t>(shardPort_), [this](Result<asio::ip::tcp::socket> s) {
      ASSERT_TRUE(s.ok()) << s.error().describe();
      link_ = ShardLink::create(std::move(*s), ShardLink::Options{.localName = "test shard"});
      ShardLink::Handlers h;
      h.onHello = [this](const shard::ShardHello&) { linked_ = true; };
      h.onMessage = [this](shard::ShardEnvelope& e) { received_.push_back(e); };
      h.onClose = [this](const std::string& reason) { closed_ = reason; };
      link_->start(std::move(h));
    });
    runUntil([&] { return linked_; });
  }

  void runUntil(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(20ms);
      io_.restart();
    }
  }

  bool detached(uint64_t slot) const {
    for (const auto& e : received_) {
      if (e.has_detached() && e.detached().slot() == slot) return true;
    }
    return false;
  }

  bool registeredIn(uint64_t slot) const {
    for (const auto& e : received_) {
      if (e.has_agent_message() && e.agent_message().slot() == slot &&
          e.agent_message().envelope().has_agent_registered()) {
        return true;
      }
    }
    return false;
  }

  std::unique_ptr<Cluster> cluster_;
  asio::io_context io_;
  std::shared_ptr<ShardLink> link_;
  int shardPort_ = 0;
  bool linked_ = false;
  std::string closed_;
  std::vector<shard::ShardEnvelope> received_;
};

TEST_F(ShardHubTest, AnAttachedAgentRegistersAndASlotNotHeldIsRefused) {
  link();
  ASSERT_TRUE(linked_);
  // Slot 7 was never attached: its registration must reach no agent state.
  ASSERT_TRUE(link_->send(forAgent(7, registration("impostor"))).ok());
  shard::ShardEnvelope attached;
  attached.mutable_attached()->set_slot(1);
  attached.mutable_attached()->set_name("allot-agent h1");
  ASSERT_TRUE(link_->send(attached).ok());
  ASSERT_TRUE(link_->send(forAgent(1, registration("h1"))).ok());
  runUntil([&] { return registeredIn(1); });
  EXPECT_TRUE(registeredIn(1));
  EXPECT_FALSE(registeredIn(7));
  EXPECT_TRUE(closed_.empty()) << closed_;
  std::string log = cluster_->masterLog();
  EXPECT_NE(log.find("for slot 7, which it does not hold: refused"), std::string::npos) << log;
  EXPECT_EQ(log.find("impostor"), std::string::npos) << log;
  EXPECT_NE(log.find("(h1) registered"), std::string::npos) << log;
}

TEST_F(ShardHubTest, TheLeadersMessagesForAGoneShardsAgentsStopAndTheAgentIsDisconnected) {
  link();
  ASSERT_TRUE(linked_);
  shard::ShardEnvelope attached;
  attached.mutable_attached()->set_slot(3);
  attached.mutable_attached()->set_name("allot-agent h3");
  ASSERT_TRUE(link_->send(attached).ok());
  ASSERT_TRUE(link_->send(forAgent(3, registration("h3"))).ok());
  runUntil([&] { return registeredIn(3); });
  ASSERT_TRUE(registeredIn(3));
  link_->close("test shard going");
  ASSERT_TRUE(waitFor([&] { return cluster_->masterLog().find("its 1 agents are disconnected") != std::string::npos; }, 10s))
      << cluster_->masterLog();
}

class ShardHubLateTest : public ShardHubTest {
 protected:
  std::vector<std::string> moreMasterFlags() const override { return {"--agent-timeout", "3"}; }
};

// A shard whose summaries stop reaching the leader (the leader is late
// reading its link) keeps its agents for one more agent timeout, not less.
TEST_F(ShardHubLateTest, AnAgentWhoseShardsSummariesWaitUnreadIsKeptForOneMoreTimeout) {
  link();
  ASSERT_TRUE(linked_);
  shard::ShardEnvelope attached;
  attached.mutable_attached()->set_slot(5);
  attached.mutable_attached()->set_name("allot-agent h5");
  ASSERT_TRUE(link_->send(attached).ok());
  ASSERT_TRUE(link_->send(forAgent(5, registration("h5"))).ok());
  runUntil([&] { return registeredIn(5); });
  ASSERT_TRUE(registeredIn(5));
  shard::ShardEnvelope summary;
  summary.mutable_liveness()->add_slots(5);
  ASSERT_TRUE(link_->send(summary).ok());
  auto heard = std::chrono::steady_clock::now();
  // Past the agent timeout (3 s), before it plus the forgiven lateness.
  runUntil([&] { return std::chrono::steady_clock::now() - heard > 4500ms; });
  EXPECT_FALSE(detached(5)) << cluster_->masterLog();
  runUntil([&] { return detached(5); });
  EXPECT_TRUE(detached(5)) << cluster_->masterLog();
  EXPECT_NE(cluster_->masterLog().find("nothing heard from it for 3"), std::string::npos) << cluster_->masterLog();
}

// A busy agent sends no heartbeat, so its shard's summaries do not name it:
// the messages forwarded for it keep it.
TEST_F(ShardHubLateTest, ABusyAgentNamedInNoSummaryIsKeptPastSeveralTimeouts) {
  link();
  ASSERT_TRUE(linked_);
  shard::ShardEnvelope attached;
  attached.mutable_attached()->set_slot(6);
  attached.mutable_attached()->set_name("allot-agent h6");
  ASSERT_TRUE(link_->send(attached).ok());
  ASSERT_TRUE(link_->send(forAgent(6, registration("h6"))).ok());
  runUntil([&] { return registeredIn(6); });
  ASSERT_TRUE(registeredIn(6));
  wire::Envelope usage;
  usage.mutable_usage_report();
  shard::ShardEnvelope summary;
  summary.mutable_liveness();
  auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < 10s && !detached(6)) {  // over three agent timeouts
    ASSERT_TRUE(link_->send(forAgent(6, usage)).ok());
    ASSERT_TRUE(link_->send(summary).ok());
    auto next = std::chrono::steady_clock::now() + 1s;
    runUntil([&] { return std::chrono::steady_clock::now() >= next; });
  }
  EXPECT_FALSE(detached(6)) << cluster_->masterLog();
  EXPECT_EQ(cluster_->masterLog().find("removing agent"), std::string::npos) << cluster_->masterLog();
}

}  // namespace
}  // namespace allot::testing
