// MasterLink's liveness rule against a master stub on loopback: heartbeats
// only after an interval without traffic both ways, any frame heard as an
// answer, and a silent master given up on within the same bound while
// the agent keeps sending.
#include "agent/master_link.h"

#include <gtest/gtest.h>

#include "tests/common/test_util.h"

namespace allot {
namespace {

using asio::ip::tcp;
using namespace std::chrono_literals;

constexpr double kIntervalS = 0.1;

// Registers every agent that asks with a heartbeat interval of kIntervalS;
// answers heartbeats while `answerHeartbeats`; counts what it hears.
class StubMaster {
 public:
  explicit StubMaster(asio::io_context& io) : acceptor_(io) {
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    acceptor_.listen();
    accept();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()); }
  // Any frame the agent would act on; here, an acknowledgement of nothing.
  void sendSomething() {
    if (!link_) return;
    wire::Envelope e;
    e.mutable_status_acknowledgement()->set_framework_id("F-1");
    (void)link_->send(e);
  }

  bool answerHeartbeats = true;
  bool answerRegistrations = true;
  int heartbeats = 0;
  int messages = 0;

 private:
  void accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec) return;
      link_ = Connection::create(std::move(socket), Connection::Options{wire::ROLE_MASTER, "stub", {wire::ROLE_AGENT}});
      link_->start({nullptr, [this](wire::Envelope& e) { onMessage(e); }, nullptr});
      accept();
    });
  }
  void onMessage(const wire::Envelope& e) {
    ++messages;
    wire::Envelope answer;
    if (e.has_register_agent() && answerRegistrations) {
      auto* r = answer.mutable_agent_registered();
      r->set_agent_id("A-1");
      r->set_master_id("M-1");
      r->set_heartbeat_interval_s(kIntervalS);
    } else if (e.has_heartbeat()) {
      ++heartbeats;
      if (!answerHeartbeats) return;
      answer.mutable_heartbeat_ack()->set_sequence(e.heartbeat().sequence());
    } else {
      return;
    }
    (void)link_->send(answer);
  }

  tcp::acceptor acceptor_;
  std::shared_ptr<Connection> link_;
};

class MasterLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MasterLink::Options o;
    o.master = stub_.address();
    o.name = "agent";
    MasterLink::Callbacks c;
    c.buildRegistration = [](wire::RegisterAgent* r) { r->mutable_info()->set_hostname("h1"); };
    c.onRegistered = [](const wire::AgentRegistered&) {};
    c.onMessage = [](wire::Envelope&) {};
    c.onDisconnected = [this](const std::string& reason) { lost_.push_back(reason); };
    link_ = std::make_unique<MasterLink>(io_, o, c);
    ASSERT_TRUE(link_->start().ok());
    ASSERT_TRUE(testing::runUntil(io_, [&] { return link_->registered(); }, 5s));
    stub_.answerRegistrations = false;
  }
  void TearDown() override { link_->stop(); }

  // Runs the loop for `span`, every 20 ms (a fifth of the interval) sending
  // a usage report when `agentSends` and a frame from the master when
  // `masterSends`.
  void exchange(std::chrono::milliseconds span, bool agentSends, bool masterSends,
                const std::function<bool()>& until = [] { return false; }) {
    auto deadline = std::chrono::steady_clock::now() + span;
    while (std::chrono::steady_clock::now() < deadline && !until()) {
      if (agentSends && link_->registered()) {
        wire::Envelope e;
        e.mutable_usage_report();
        ASSERT_TRUE(link_->send(e).ok());
      }
      if (masterSends) stub_.sendSomething();
      testing::runFor(io_, 20ms);
    }
  }

  asio::io_context io_;
  StubMaster stub_{io_};
  std::unique_ptr<MasterLink> link_;
  std::vector<std::string> lost_;
};

TEST_F(MasterLinkTest, AnIdleLinkHeartbeatsEveryInterval) {
  exchange(1s, false, false);
  EXPECT_GE(stub_.heartbeats, 5);  // ten intervals; a loaded machine beats late, never early
  EXPECT_LE(stub_.heartbeats, 11);
  EXPECT_TRUE(link_->registered());
  EXPECT_TRUE(lost_.empty());
}

TEST_F(MasterLinkTest, ALinkBusyBothWaysCarriesNoHeartbeat) {
  exchange(2s, true, true);
  EXPECT_EQ(stub_.heartbeats, 0);
  EXPECT_GT(stub_.messages, 50);
  EXPECT_TRUE(link_->registered());
  EXPECT_EQ(link_->registrations(), 1u);
  EXPECT_TRUE(lost_.empty());
}

// The master must still hear it: it is told things but has nothing to say.
TEST_F(MasterLinkTest, AnAgentThatOnlyReceivesStillHeartbeats) {
  exchange(1s, false, true);
  EXPECT_GE(stub_.heartbeats, 5);
  EXPECT_TRUE(link_->registered());
}

// Its updates wait for a slow framework's acknowledgements: the master is
// asked to speak, and its heartbeat answers keep the link.
TEST_F(MasterLinkTest, AnAgentWhoseUpdatesGoUnacknowledgedKeepsALiveLink) {
  exchange(2s, true, false);
  EXPECT_GE(stub_.heartbeats, 5);  // every other interval: the answer is heard in the next
  EXPECT_TRUE(link_->registered());
  EXPECT_EQ(link_->registrations(), 1u);
  EXPECT_TRUE(lost_.empty());
}

// The agent's own traffic does not hide a master that stopped answering:
// kMissedHeartbeatsMax heartbeats go unanswered, and the link is dropped
// when the next is due.
TEST_F(MasterLinkTest, ASilentMasterIsGivenUpOnWhileTheAgentSends) {
  stub_.answerHeartbeats = false;
  auto start = std::chrono::steady_clock::now();
  exchange(10s, true, false, [&] { return !lost_.empty(); });
  ASSERT_EQ(lost_.size(), 1u);
  double tookS = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(tookS, kMissedHeartbeatsMax * kIntervalS);
  EXPECT_LT(tookS, 3.0) << "a bound of " << (kMissedHeartbeatsMax + 1) * kIntervalS << " s";
  EXPECT_EQ(stub_.heartbeats, kMissedHeartbeatsMax);
  EXPECT_NE(lost_[0].find("did not answer"), std::string::npos) << lost_[0];
}

}  // namespace
}  // namespace allot
