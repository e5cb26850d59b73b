// ReconnectingLink against real loopback master stubs and a fake detector.
#include "proto/reconnecting_link.h"

#include <gtest/gtest.h>

#include <numeric>

#include "proto/frame.h"
#include "tests/common/test_util.h"

namespace allot {
namespace {

using asio::ip::tcp;
using namespace std::chrono_literals;

// A detector the test drives: report() is what ZooKeeper would tell.
class FakeDetector final : public LeaderDetector {
 public:
  explicit FakeDetector(FakeDetector** self) { *self = this; }
  void start(Callback onLeader) override { onLeader_ = std::move(onLeader); }
  std::string describe() const override { return "fake"; }
  void report(const std::optional<Leader>& leader) { onLeader_(leader); }

 private:
  Callback onLeader_;
};

// A master stub on loopback: accepts links, says its epoch in the Hello,
// counts accepts and the messages it receives.
class StubMaster {
 public:
  StubMaster(asio::io_context& io, uint64_t epoch) : io_(io), epoch_(epoch), acceptor_(io) {
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    acceptor_.listen();
    accept();
  }
  Leader leader(uint64_t epoch) const {
    return Leader{Endpoint{Endpoint::Kind::kTcp, "127.0.0.1", acceptor_.local_endpoint().port(), ""},
                  epoch, ""};
  }
  int accepts = 0;
  int closes = 0;
  int messages = 0;
  std::shared_ptr<Connection> last;

 private:
  void accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec) return;
      ++accepts;
      Connection::Options o{wire::ROLE_MASTER, "stub", {wire::ROLE_AGENT}};
      o.leaderEpoch = epoch_;
      last = Connection::create(std::move(socket), o);
      last->start({nullptr, [this](wire::Envelope&) { ++messages; },
                   [this](const std::string&) { ++closes; }});
      accept();
    });
  }
  asio::io_context& io_;
  uint64_t epoch_;
  tcp::acceptor acceptor_;
};

class ReconnectingLinkTest : public ::testing::Test {
 protected:
  void make(ReconnectingLink::Options o = {}) {
    o.localRole = wire::ROLE_AGENT;
    o.localName = "agent";
    o.seed = 42;
    if (o.leaderChangeSpread == 1s) o.leaderChangeSpread = 20ms;
    link_ = std::make_unique<ReconnectingLink>(
        io_, std::make_unique<FakeDetector>(&detector_), o,
        ReconnectingLink::Callbacks{[this](const wire::Hello&) { ++connects_; }, nullptr,
                                    [this](const std::string& r) { lost_.push_back(r); }});
    link_->start();
  }
  bool run(const std::function<bool()>& done) { return testing::runUntil(io_, done, 3s); }

  asio::io_context io_;
  FakeDetector* detector_ = nullptr;
  std::unique_ptr<ReconnectingLink> link_;
  int connects_ = 0;
  std::vector<std::string> lost_;
};

TEST(Backoff, BoundDoublesToTheMaximumAndResets) {
  Backoff b(100ms, 1s, 7);
  std::vector<Duration> bounds;
  for (int i = 0; i < 6; ++i) {
    Duration bound = b.bound();
    Duration wait = b.next();
    EXPECT_GE(wait, Duration::zero());
    EXPECT_LE(wait, bound);
    bounds.push_back(bound);
  }
  EXPECT_EQ(bounds, (std::vector<Duration>{100ms, 200ms, 400ms, 800ms, 1s, 1s}));
  b.reset();
  EXPECT_EQ(b.bound(), Duration(100ms));
}

TEST(Backoff, FullJitterSpreadsWaitsOverTheWholeRange) {
  Backoff b(1s, 1s, 11);
  std::vector<double> waits;
  for (int i = 0; i < 2000; ++i) waits.push_back(std::chrono::duration<double>(b.next()).count());
  double mean = std::accumulate(waits.begin(), waits.end(), 0.0) / waits.size();
  EXPECT_NEAR(mean, 0.5, 0.05);
  EXPECT_LT(*std::min_element(waits.begin(), waits.end()), 0.02);
  EXPECT_GT(*std::max_element(waits.begin(), waits.end()), 0.98);
  // Every tenth of the range gets its share (uniform, not clustered).
  std::vector<int> deciles(10);
  for (double w : waits) ++deciles[std::min(9, static_cast<int>(w * 10))];
  for (int count : deciles) EXPECT_GT(count, 140);
}

TEST_F(ReconnectingLinkTest, ConnectsToTheLeaderAndSends) {
  StubMaster master(io_, 0);
  make();
  detector_->report(master.leader(0));
  ASSERT_TRUE(run([&] { return connects_ == 1; }));
  EXPECT_TRUE(link_->connected());
  wire::Envelope hb;
  hb.mutable_heartbeat()->set_sequence(1);
  ASSERT_TRUE(link_->send(hb).ok());
  ASSERT_TRUE(run([&] { return master.messages == 1; }));
}

// The first message leaves with our Hello, before the peer says anything:
// a peer that reads and never answers still receives both frames.
TEST_F(ReconnectingLinkTest, TheFirstMessageLeavesWithTheHelloBeforeThePeerAnswers) {
  tcp::acceptor acceptor(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket peer(io_);
  std::array<char, 512> buffer{};
  FrameDecoder decoder;
  std::vector<wire::Envelope> received;
  std::function<void()> readMore = [&] {
    peer.async_read_some(asio::buffer(buffer), [&](const boost::system::error_code& ec, size_t n) {
      if (ec) return;
      decoder.append(buffer.data(), n);
      std::string_view payload;
      for (Result<bool> got = decoder.nextPayload(&payload); got && *got; got = decoder.nextPayload(&payload)) {
        received.emplace_back().ParseFromArray(payload.data(), static_cast<int>(payload.size()));
      }
      readMore();
    });
  };
  acceptor.async_accept(peer, [&](const boost::system::error_code& ec) {
    if (!ec) readMore();
  });
  wire::Envelope first;
  first.mutable_heartbeat()->set_sequence(7);
  ReconnectingLink::Callbacks callbacks;
  callbacks.firstMessage = [&] { return first; };
  ReconnectingLink::Options o;
  o.localRole = wire::ROLE_AGENT;
  o.localName = "agent";
  ReconnectingLink link(io_, std::make_unique<FakeDetector>(&detector_), o, callbacks);
  link.start();
  detector_->report(Leader{Endpoint{Endpoint::Kind::kTcp, "127.0.0.1", acceptor.local_endpoint().port(), ""}, 0, ""});
  ASSERT_TRUE(run([&] { return received.size() == 2; }));
  EXPECT_TRUE(received[0].has_hello());
  EXPECT_EQ(received[1].heartbeat().sequence(), 7u);
  EXPECT_FALSE(link.connected());  // no Hello from the peer yet
}

TEST_F(ReconnectingLinkTest, BackoffGrowsToItsBoundWhileTheMasterIsDown) {
  ReconnectingLink::Options o;
  o.backoffMin = 2ms;
  o.backoffMax = 16ms;
  make(o);
  Leader dead;
  {
    StubMaster gone(io_, 0);
    dead = gone.leader(0);
  }  // its port is closed now: every connect is refused
  detector_->report(dead);
  ASSERT_TRUE(run([&] { return link_->backoffBound() == Duration(16ms); }));
  EXPECT_LE(link_->lastWait(), Duration(16ms));
  EXPECT_FALSE(link_->connected());
  EXPECT_FALSE(link_->send(wire::Envelope()).ok());
}

TEST_F(ReconnectingLinkTest, DropReconnectsAndRegisteredResetsTheBackoff) {
  StubMaster master(io_, 0);
  ReconnectingLink::Options o;
  o.backoffMin = 5ms;
  o.backoffMax = 40ms;
  make(o);
  detector_->report(master.leader(0));
  ASSERT_TRUE(run([&] { return connects_ == 1; }));
  link_->drop("missed heartbeats");
  EXPECT_EQ(lost_, (std::vector<std::string>{"missed heartbeats"}));
  EXPECT_EQ(link_->backoffBound(), Duration(10ms));  // one attempt without registered()
  ASSERT_TRUE(run([&] { return connects_ == 2; }));
  EXPECT_EQ(master.accepts, 2);
  link_->registered();
  EXPECT_EQ(link_->backoffBound(), Duration(5ms));
}

TEST_F(ReconnectingLinkTest, LeaderChangeDropsTheLinkAndFollowsTheNewLeader) {
  StubMaster a(io_, 1), b(io_, 2);
  make();
  detector_->report(a.leader(1));
  ASSERT_TRUE(run([&] { return connects_ == 1; }));
  detector_->report(b.leader(2));
  EXPECT_EQ(lost_.size(), 1u);
  EXPECT_NE(lost_[0].find("leader changed"), std::string::npos);
  ASSERT_TRUE(run([&] { return connects_ == 2 && a.closes == 1; }));
  EXPECT_EQ(b.accepts, 1);
  EXPECT_EQ(link_->highestEpoch(), 2u);
  detector_->report(std::nullopt);
  EXPECT_FALSE(link_->connected());
  EXPECT_EQ(lost_.size(), 2u);
}

// A lost link retries the master it lost after the backoff alone.
TEST_F(ReconnectingLinkTest, ALostLinkIsRetriedAfterTheBackoffAlone) {
  StubMaster a(io_, 0);
  make();
  detector_->report(a.leader(0));
  ASSERT_TRUE(run([&] { return connects_ == 1; }));
  a.last->close("restarting");
  ASSERT_TRUE(run([&] { return connects_ == 2; }));
  EXPECT_LE(link_->lastWait(), Duration(100ms));
}

TEST_F(ReconnectingLinkTest, RefusesAMasterWhoseEpochIsBelowTheHighestSeen) {
  StubMaster stale(io_, 3), fresh(io_, 6);
  make();
  // The detector says epoch 5 leads, but the master there says 3 (it lost
  // its leadership and does not know yet).
  detector_->report(stale.leader(5));
  ASSERT_TRUE(run([&] { return stale.closes == 1; }));
  testing::runFor(io_, 200ms);
  EXPECT_EQ(connects_, 0);
  EXPECT_EQ(stale.accepts, 1);  // it waits for the detector, no retry
  detector_->report(fresh.leader(6));
  ASSERT_TRUE(run([&] { return connects_ == 1; }));
  EXPECT_EQ(link_->highestEpoch(), 6u);
  // A detector lagging behind (epoch 4) is not followed.
  detector_->report(stale.leader(4));
  testing::runFor(io_, 100ms);
  EXPECT_TRUE(link_->connected());
  EXPECT_EQ(stale.accepts, 1);
}

TEST_F(ReconnectingLinkTest, StopClosesWithoutCallbacksOrReconnects) {
  StubMaster master(io_, 0);
  make();
  detector_->report(master.leader(0));
  ASSERT_TRUE(run([&] { return connects_ == 1; }));
  link_->stop();
  ASSERT_TRUE(run([&] { return master.closes == 1; }));
  testing::runFor(io_, 100ms);
  EXPECT_TRUE(lost_.empty());
  EXPECT_EQ(master.accepts, 1);
}

}  // namespace
}  // namespace allot
