// The contender and detector state machines against FakeZooKeeper: session
// expiry, connection loss, deleted znodes, lost replies and answers that
// arrive out of order.
#include <gtest/gtest.h>

#include "ha/contender.h"
#include "ha/group.h"
#include "ha/leader_lookup.h"
#include "ha/zk_detector.h"
#include "tests/common/test_util.h"
#include "tests/ha/fake_zookeeper.h"

namespace allot {
namespace {

using testing::FakeZooKeeper;
using testing::runFor;
using testing::runUntil;
using namespace std::chrono_literals;

constexpr const char* kGroup = "/allot/masters";

struct Candidate {
  std::unique_ptr<LeaderContender> contender;
  uint64_t electedEpoch = 0;
  std::string lostWhy;
};

// A master on `port` serving its HTTP endpoints on port + 1000.
MemberData member(uint16_t port) {
  return MemberData{Endpoint{Endpoint::Kind::kTcp, "127.0.0.1", port, ""}, "m" + std::to_string(port),
                    Endpoint{Endpoint::Kind::kTcp, "127.0.0.1", static_cast<uint16_t>(port + 1000), ""}};
}

class ElectionTest : public ::testing::Test {
 protected:
  std::unique_ptr<Candidate> contend(uint16_t port) {
    auto c = std::make_unique<Candidate>();
    Candidate* raw = c.get();
    LeaderContender::Callbacks callbacks;
    callbacks.elected = [raw](uint64_t epoch) { raw->electedEpoch = epoch; };
    callbacks.lost = [raw](const std::string& why) { raw->lostWhy = why; };
    c->contender = std::make_unique<LeaderContender>(io_, zk_.factory(), kGroup, member(port),
                                                     callbacks);
    c->contender->start();
    EXPECT_TRUE(runUntil(io_, [raw] { return !raw->contender->memberPath().empty(); }, 2000ms));
    runFor(io_, 20ms);
    return c;
  }

  asio::io_context io_;
  FakeZooKeeper zk_{io_};
};

TEST_F(ElectionTest, FirstMemberLeadsOthersWatchOnlyTheirPredecessor) {
  auto a = contend(5001);
  auto b = contend(5002);
  auto c = contend(5003);
  EXPECT_TRUE(a->contender->leading());
  EXPECT_GT(a->electedEpoch, 0u);
  EXPECT_FALSE(b->contender->leading());
  EXPECT_FALSE(c->contender->leading());
  EXPECT_EQ(b->contender->watching(), a->contender->memberPath());
  EXPECT_EQ(c->contender->watching(), b->contender->memberPath());
  // No herd: the leader's znode has exactly one watcher (b's session).
  EXPECT_EQ(zk_.dataWatchers(a->contender->memberPath()).size(), 2u);  // a itself + b
  EXPECT_EQ(zk_.dataWatchers(b->contender->memberPath()).size(), 1u);  // c only
}

TEST_F(ElectionTest, LeaderSessionExpiryLosesLeadershipAndNextTakesOverWithHigherEpoch) {
  auto a = contend(5001);
  auto b = contend(5002);
  auto c = contend(5003);
  zk_.expire(1);
  ASSERT_TRUE(runUntil(io_, [&] { return b->contender->leading(); }, 2000ms));
  EXPECT_EQ(a->lostWhy, "ZooKeeper session expired");
  EXPECT_GT(b->electedEpoch, a->electedEpoch);
  EXPECT_FALSE(c->contender->leading());
  EXPECT_EQ(c->contender->watching(), b->contender->memberPath());
}

TEST_F(ElectionTest, MiddleStandbyLeavingMakesTheNextWatchTheLeaderWithoutAnElection) {
  auto a = contend(5001);
  auto b = contend(5002);
  auto c = contend(5003);
  std::string leaderPath = a->contender->memberPath();
  b.reset();  // closes b's session: its znode goes
  ASSERT_TRUE(runUntil(io_, [&] { return c->contender->watching() == leaderPath; }, 2000ms));
  EXPECT_TRUE(a->contender->leading());
  EXPECT_FALSE(c->contender->leading());
  EXPECT_TRUE(a->lostWhy.empty());
}

TEST_F(ElectionTest, LeaderDisconnectedPastAThirdOfTheTimeoutStepsDown) {
  auto a = contend(5001);
  zk_.disconnect(1);
  // The fake negotiates 900 ms: the fence is 300 ms.
  runFor(io_, 150ms);
  EXPECT_TRUE(a->lostWhy.empty());
  ASSERT_TRUE(runUntil(io_, [&] { return !a->lostWhy.empty(); }, 1000ms));
  EXPECT_FALSE(a->contender->leading());
  EXPECT_NE(a->lostWhy.find("no link to ZooKeeper"), std::string::npos);
}

TEST_F(ElectionTest, LeaderBrieflyDisconnectedKeepsLeading) {
  auto a = contend(5001);
  zk_.disconnect(1);
  runFor(io_, 50ms);
  zk_.reconnect(1);
  runFor(io_, 500ms);
  EXPECT_TRUE(a->contender->leading());
  EXPECT_TRUE(a->lostWhy.empty());
}

TEST_F(ElectionTest, StandbySessionExpiryRejoinsWithANewSessionAndStaysStandby) {
  auto a = contend(5001);
  auto b = contend(5002);
  std::string before = b->contender->memberPath();
  zk_.expire(2);
  ASSERT_TRUE(runUntil(io_, [&] {
    return !b->contender->memberPath().empty() && b->contender->memberPath() != before &&
           !b->contender->watching().empty();
  }, 2000ms));
  EXPECT_EQ(zk_.sessionsCreated(), 3);
  EXPECT_TRUE(a->contender->leading());
  EXPECT_FALSE(b->contender->leading());
  EXPECT_TRUE(b->lostWhy.empty());
  EXPECT_EQ(zk_.children(kGroup).size(), 2u);
}

TEST_F(ElectionTest, DeletedLeaderZnodeEndsLeadershipAndTheStandbyTakesOver) {
  auto a = contend(5001);
  auto b = contend(5002);
  zk_.removeNode(a->contender->memberPath());
  ASSERT_TRUE(runUntil(io_, [&] { return b->contender->leading(); }, 2000ms));
  EXPECT_NE(a->lostWhy.find("was deleted"), std::string::npos);
}

// The standby knows its epoch from its own create: once the predecessor is
// gone, one listing makes it leader (the watch on its own znode is set
// beside it, not waited for).
TEST_F(ElectionTest, StandbyLeadsOnTheListingAloneWithTheEpochOfItsCreate) {
  auto a = contend(5001);
  auto b = contend(5002);
  zk_.hold(2);
  a.reset();  // a's session closes: its znode goes, b's watch fires
  runFor(io_, 20ms);
  ASSERT_EQ(zk_.heldCount(2), 1u);  // the deletion event
  ASSERT_TRUE(zk_.releaseNext(2));
  runFor(io_, 20ms);
  ASSERT_EQ(zk_.heldCount(2), 1u);  // the listing it asked for
  EXPECT_FALSE(b->contender->leading());
  ASSERT_TRUE(zk_.releaseNext(2));
  runFor(io_, 20ms);
  EXPECT_TRUE(b->contender->leading());  // the exists on its own znode is still held
  EXPECT_EQ(zk_.heldCount(2), 1u);
  auto members = parseMembers(zk_.children(kGroup));
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(b->electedEpoch, b->contender->epoch());
  EXPECT_GT(b->electedEpoch, 0u);
  while (zk_.releaseNext(2)) runFor(io_, 10ms);
  runFor(io_, 20ms);
  EXPECT_TRUE(b->contender->leading());
  EXPECT_TRUE(b->lostWhy.empty());
  EXPECT_EQ(zk_.dataWatchers(b->contender->memberPath()).count(2), 1u);
}

// Elected on the listing, its znode deleted right after (before the exists
// on it is answered): it looks again and steps down.
TEST_F(ElectionTest, LeaderWhoseZnodeGoesRightAfterTheListingStepsDown) {
  auto a = contend(5001);
  auto b = contend(5002);
  zk_.hold(2);
  a.reset();
  runFor(io_, 20ms);
  ASSERT_TRUE(zk_.releaseNext(2));  // the deletion event: b lists the group
  runFor(io_, 20ms);
  ASSERT_TRUE(zk_.releaseNext(2));  // the listing: b leads, asks exists
  runFor(io_, 20ms);
  ASSERT_TRUE(b->contender->leading());
  zk_.removeNode(b->contender->memberPath());  // before the exists is answered
  zk_.releaseReversed(2);
  ASSERT_TRUE(runUntil(io_, [&] { return !b->lostWhy.empty(); }, 2000ms));
  EXPECT_NE(b->lostWhy.find("was deleted"), std::string::npos) << b->lostWhy;
}

TEST_F(ElectionTest, CreateWhoseReplyWasLostAdoptsTheZnodeInsteadOfMakingASecond) {
  auto a = contend(5001);
  zk_.loseNextCreateReply(2);  // b's member create (the group exists already)
  Candidate b;
  b.contender = std::make_unique<LeaderContender>(io_, zk_.factory(), kGroup, member(5002),
                                                 LeaderContender::Callbacks{});
  b.contender->start();
  runFor(io_, 50ms);
  EXPECT_EQ(zk_.children(kGroup).size(), 2u);
  EXPECT_TRUE(b.contender->memberPath().empty());
  zk_.reconnect(2);
  ASSERT_TRUE(runUntil(io_, [&] { return !b.contender->watching().empty(); }, 2000ms));
  EXPECT_EQ(b.contender->watching(), a->contender->memberPath());
  EXPECT_EQ(zk_.children(kGroup).size(), 2u);
}

TEST_F(ElectionTest, StaleDeleteEventOfAnEarlierPredecessorIsIgnored) {
  auto a = contend(5001);
  auto b = contend(5002);
  auto c = contend(5003);
  std::string bPath = b->contender->memberPath();
  // c's deliveries are held: b leaves, then the leader a leaves, and c sees
  // the answers in reverse order.
  zk_.hold(3);
  b.reset();
  runFor(io_, 20ms);
  zk_.releaseReversed(3);
  runFor(io_, 50ms);
  EXPECT_FALSE(c->contender->leading());
  EXPECT_EQ(c->contender->watching(), a->contender->memberPath());
  a.reset();
  ASSERT_TRUE(runUntil(io_, [&] { return c->contender->leading(); }, 2000ms));
}

// ------------------------------------------------------------------ detector

class DetectorTest : public ElectionTest {
 protected:
  void SetUp() override {
    detector_ = std::make_unique<ZooKeeperDetector>(io_, zk_.factory(), kGroup, "zk://fake/x");
    detector_->start([this](const std::optional<Leader>& leader) { reports_.push_back(leader); });
  }
  std::optional<Leader> last() const { return reports_.empty() ? std::nullopt : reports_.back(); }

  std::unique_ptr<ZooKeeperDetector> detector_;
  std::vector<std::optional<Leader>> reports_;
};

TEST_F(DetectorTest, NoGroupReportsNoLeaderThenTheFirstMasterWithItsAddressAndEpoch) {
  runFor(io_, 20ms);
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_FALSE(reports_[0]);
  auto a = contend(5001);
  ASSERT_TRUE(runUntil(io_, [&] { return last().has_value(); }, 2000ms));
  EXPECT_EQ(last()->endpoint.describe(), "127.0.0.1:5001");
  EXPECT_EQ(last()->id, "m5001");
  EXPECT_EQ(last()->epoch, a->electedEpoch);
}

// The group is made between the detector's listing (no group yet) and its
// exists watch: the watch's answer says the group is there, so it lists
// again instead of waiting for a creation event that never comes.
TEST_F(DetectorTest, AGroupMadeBetweenTheListingAndItsWatchIsListed) {
  zk_.hold(1);  // the detector's session: its listing's answer waits
  runFor(io_, 20ms);
  ASSERT_EQ(zk_.heldCount(1), 1u);
  auto a = contend(5001);
  ASSERT_TRUE(zk_.releaseNext(1));  // "no group": the detector sets its exists watch
  ASSERT_TRUE(runUntil(io_, [&] { return zk_.heldCount(1) == 1; }, 2000ms));
  zk_.releaseReversed(1);
  ASSERT_TRUE(runUntil(io_, [&] { return last().has_value(); }, 2000ms));
  EXPECT_EQ(last()->endpoint.port, 5001);
}

TEST_F(DetectorTest, FollowsEachNewLeaderWithIncreasingEpochs) {
  auto a = contend(5001);
  auto b = contend(5002);
  ASSERT_TRUE(runUntil(io_, [&] { return last() && last()->endpoint.port == 5001; }, 2000ms));
  zk_.expire(2);  // a's session (the detector is session 1)
  ASSERT_TRUE(runUntil(io_, [&] { return last() && last()->endpoint.port == 5002; }, 2000ms));
  EXPECT_EQ(last()->epoch, b->electedEpoch);
  EXPECT_GT(b->electedEpoch, a->electedEpoch);
  b.reset();
  ASSERT_TRUE(runUntil(io_, [&] { return !last(); }, 2000ms));
}

TEST_F(DetectorTest, KeepsTheLeaderWhileDisconnectedAndCatchesUpOnReconnect) {
  auto a = contend(5001);
  auto b = contend(5002);
  ASSERT_TRUE(runUntil(io_, [&] { return last() && last()->endpoint.port == 5001; }, 2000ms));
  size_t before = reports_.size();
  zk_.disconnect(1);
  runFor(io_, 50ms);
  EXPECT_EQ(reports_.size(), before);
  a.reset();  // the leader leaves while the detector cannot hear it
  runFor(io_, 50ms);
  EXPECT_EQ(last()->endpoint.port, 5001);
  zk_.reconnect(1);
  ASSERT_TRUE(runUntil(io_, [&] { return last() && last()->endpoint.port == 5002; }, 2000ms));
}

TEST_F(DetectorTest, ExpiryReportsNoLeaderThenRecoversWithANewSession) {
  auto a = contend(5001);
  ASSERT_TRUE(runUntil(io_, [&] { return last().has_value(); }, 2000ms));
  zk_.expire(1);
  ASSERT_TRUE(runUntil(io_, [&] { return reports_.size() >= 3 && last().has_value(); }, 2000ms));
  EXPECT_FALSE(reports_[reports_.size() - 2]);
  EXPECT_EQ(last()->endpoint.port, 5001);
}

TEST_F(DetectorTest, OutOfOrderAnswersNeverReportAnOlderLeaderLast) {
  auto a = contend(5001);
  auto b = contend(5002);
  ASSERT_TRUE(runUntil(io_, [&] { return last() && last()->endpoint.port == 5001; }, 2000ms));
  zk_.hold(1);
  a.reset();  // child watch fires; the detector lists and reads b...
  runFor(io_, 20ms);
  zk_.releaseReversed(1);
  ASSERT_TRUE(runUntil(io_, [&] { return last() && last()->endpoint.port == 5002; }, 2000ms));
  runFor(io_, 100ms);
  EXPECT_EQ(last()->endpoint.port, 5002);
  for (size_t i = 1; i < reports_.size(); ++i) {
    if (reports_[i] && reports_[i - 1]) {
      EXPECT_GE(reports_[i]->epoch, reports_[i - 1]->epoch);
    }
  }
}

// The standby next in line is read while nothing happens: when the leader
// leaves, the watch event and one listing name the successor, no read.
TEST_F(DetectorTest, TheListingAloneNamesTheSuccessorReadAhead) {
  auto a = contend(5001);
  auto b = contend(5002);
  ASSERT_TRUE(runUntil(io_, [&] { return last() && last()->endpoint.port == 5001; }, 2000ms));
  runFor(io_, 50ms);  // the read ahead of b is answered
  zk_.hold(1);        // the detector's session: one round trip at a time from here
  a.reset();
  ASSERT_TRUE(runUntil(io_, [&] { return zk_.heldCount(1) > 0; }, 2000ms));
  ASSERT_TRUE(zk_.releaseNext(1));  // the children watch fires: the detector lists
  ASSERT_TRUE(runUntil(io_, [&] { return zk_.heldCount(1) > 0; }, 2000ms));
  ASSERT_TRUE(zk_.releaseNext(1));  // the listing
  ASSERT_TRUE(runUntil(io_, [&] { return last() && last()->endpoint.port == 5002; }, 2000ms));
  EXPECT_EQ(last()->epoch, b->electedEpoch);
  EXPECT_EQ(last()->id, "m5002");
}

// A member read ahead that leaves before it would lead is never reported.
TEST_F(DetectorTest, ASuccessorReadAheadThatLeavesIsNotReported) {
  auto a = contend(5001);
  auto b = contend(5002);
  auto c = contend(5003);
  ASSERT_TRUE(runUntil(io_, [&] { return last() && last()->endpoint.port == 5001; }, 2000ms));
  runFor(io_, 50ms);
  b.reset();  // read ahead as next in line, then gone
  runFor(io_, 50ms);
  a.reset();
  ASSERT_TRUE(runUntil(io_, [&] { return last() && last()->endpoint.port == 5003; }, 2000ms));
  for (const auto& r : reports_) EXPECT_TRUE(!r || r->endpoint.port != 5002);
}

TEST_F(DetectorTest, IgnoresForeignChildrenAndUnreadableMembers) {
  auto a = contend(5001);
  ASSERT_TRUE(runUntil(io_, [&] { return last().has_value(); }, 2000ms));
  EXPECT_EQ(parseMembers({"lock", "member_x_12", "member_g_0000000003", "member_h_0000000001"})
                .front().name, "member_h_0000000001");
  EXPECT_FALSE(decodeMemberData("id=x\n"));
  EXPECT_FALSE(decodeMemberData("address=nope\n"));
  EXPECT_FALSE(decodeMemberData(std::string(5000, 'a')));
}

TEST(MemberData, CarriesTheShardListenAddressWhenTheMasterTakesShards) {
  MemberData m = member(5001);
  m.shards = Endpoint{Endpoint::Kind::kTcp, "127.0.0.1", 7001, ""};
  EXPECT_EQ(encodeMemberData(m), "address=127.0.0.1:5001\nid=m5001\nhttp=127.0.0.1:6001\nshards=127.0.0.1:7001\n");
  auto back = decodeMemberData(encodeMemberData(m));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->shards, m.shards);
  EXPECT_FALSE(decodeMemberData("address=10.0.0.1:5050\nid=a\n")->shards);
  // A bad shards= does not hide the protocol address.
  auto odd = decodeMemberData("address=10.0.0.1:5050\nshards=nope\nid=a\n");
  ASSERT_TRUE(odd);
  EXPECT_FALSE(odd->shards);
}

TEST(MemberData, CarriesTheHttpAddressAndReadsEntriesWithoutIt) {
  MemberData m = member(5001);
  EXPECT_EQ(encodeMemberData(m), "address=127.0.0.1:5001\nid=m5001\nhttp=127.0.0.1:6001\n");
  auto back = decodeMemberData(encodeMemberData(m));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->address, m.address);
  EXPECT_EQ(back->masterId, "m5001");
  EXPECT_EQ(back->http, m.http);
  // An entry of a master without --http-listen (or an older one).
  auto old = decodeMemberData("address=10.0.0.1:5050\nid=a\n");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->address.describe(), "10.0.0.1:5050");
  EXPECT_FALSE(old->http);
  // Keys a reader does not know are skipped; a bad http= does not hide the
  // protocol address.
  auto odd = decodeMemberData("zone=b\naddress=10.0.0.1:5050\nhttp=nope\nid=a\n");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->masterId, "a");
  EXPECT_FALSE(odd->http);
  MemberData v6{Endpoint{Endpoint::Kind::kTcp, "::1", 5050, ""}, "b",
                Endpoint{Endpoint::Kind::kTcp, "::1", 8080, ""}};
  auto v6back = decodeMemberData(encodeMemberData(v6));
  ASSERT_TRUE(v6back);
  EXPECT_EQ(v6back->http, v6.http);
}

// findLeader (ha/leader_lookup.h): the one-shot look allotctl takes.
class LookupTest : public ElectionTest {
 protected:
  Result<LeaderEntry> lookup(Duration timeout = 1000ms) {
    return findLeader(io_, zk_.factory(), kGroup, timeout);
  }
};

TEST_F(LookupTest, NamesTheLowestMemberWithItsAddressesAndEpoch) {
  auto a = contend(5001);
  auto b = contend(5002);
  auto found = lookup();
  ASSERT_TRUE(found) << found.error().describe();
  EXPECT_EQ(found->data.masterId, "m5001");
  EXPECT_EQ(found->data.address.port, 5001);
  ASSERT_TRUE(found->data.http);
  EXPECT_EQ(found->data.http->port, 6001);
  EXPECT_EQ(found->epoch, a->electedEpoch);
  a.reset();
  ASSERT_TRUE(runUntil(io_, [&] { return b->contender->leading(); }, 2000ms));
  found = lookup();
  ASSERT_TRUE(found) << found.error().describe();
  EXPECT_EQ(found->data.masterId, "m5002");
  EXPECT_EQ(found->epoch, b->electedEpoch);
}

TEST_F(LookupTest, SaysNoMasterLeadsWhenTheGroupIsMissingOrEmpty) {
  auto missing = lookup();
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no master leads"), std::string::npos);
  EXPECT_NE(missing.error().message.find("does not exist"), std::string::npos);
  auto a = contend(5001);
  a.reset();
  ASSERT_TRUE(zk_.exists(kGroup));
  auto empty = lookup();
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("no master leads"), std::string::npos);
  EXPECT_NE(empty.error().message.find("has no members"), std::string::npos);
}

TEST_F(LookupTest, ListsAgainWhenTheLeaderGoesBetweenTheListingAndTheRead) {
  // The lookup's session, except that its first read finds the znode it
  // reads already deleted (the leader left right after the listing).
  class LeaderLeavesBeforeTheRead final : public ZkSession {
   public:
    LeaderLeavesBeforeTheRead(std::unique_ptr<ZkSession> inner, FakeZooKeeper& zk)
        : inner_(std::move(inner)), zk_(zk) {}
    void start(EventFn fn) override { inner_->start(std::move(fn)); }
    void create(const std::string& p, const std::string& d, bool e, CreateFn fn) override {
      inner_->create(p, d, e, std::move(fn));
    }
    void children(const std::string& p, bool w, ChildrenFn fn) override {
      inner_->children(p, w, std::move(fn));
    }
    void exists(const std::string& p, bool w, StatFn fn) override { inner_->exists(p, w, std::move(fn)); }
    void get(const std::string& p, DataFn fn) override {
      if (reads_++ == 0) zk_.removeNode(p);
      inner_->get(p, std::move(fn));
    }
    void set(const std::string& p, const std::string& d, int32_t v, StatFn fn) override {
      inner_->set(p, d, v, std::move(fn));
    }
    void remove(const std::string& p, DoneFn fn) override { inner_->remove(p, std::move(fn)); }
    void restrict(const std::string& p, DoneFn fn) override { inner_->restrict(p, std::move(fn)); }
    std::string describe() const override { return inner_->describe(); }

   private:
    std::unique_ptr<ZkSession> inner_;
    FakeZooKeeper& zk_;
    int reads_ = 0;
  };
  auto a = contend(5001);
  auto b = contend(5002);
  auto factory = zk_.factory();
  auto found = findLeader(io_, [&] {
    return std::unique_ptr<ZkSession>(new LeaderLeavesBeforeTheRead(factory(), zk_));
  }, kGroup, 1000ms);
  ASSERT_TRUE(found) << found.error().describe();
  EXPECT_EQ(found->data.masterId, "m5002");
  EXPECT_FALSE(a->lostWhy.empty()) << "a's znode was deleted under it";
}

TEST_F(LookupTest, UnreachableServersEndInATimeoutThatSaysSo) {
  // A session that never connects (servers down).
  class Silent final : public ZkSession {
   public:
    void start(EventFn) override {}
    void create(const std::string&, const std::string&, bool, CreateFn) override {}
    void children(const std::string&, bool, ChildrenFn) override {}
    void exists(const std::string&, bool, StatFn) override {}
    void get(const std::string&, DataFn) override {}
    void set(const std::string&, const std::string&, int32_t, StatFn) override {}
    void remove(const std::string&, DoneFn) override {}
    void restrict(const std::string&, DoneFn) override {}
    std::string describe() const override { return "10.9.9.9:2181"; }
  };
  auto started = std::chrono::steady_clock::now();
  auto found = findLeader(io_, [] { return std::unique_ptr<ZkSession>(new Silent); }, kGroup, 150ms);
  ASSERT_FALSE(found);
  EXPECT_NE(found.error().message.find("cannot reach ZooKeeper 10.9.9.9:2181 within 150 ms"),
            std::string::npos) << found.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
}

TEST(ZkUrl, ParsesServersAndPathAndRefusesMalformedOnes) {
  auto url = parseZkUrl("zk://127.0.0.1:2181,10.0.0.2:2182/allot/");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->servers, "127.0.0.1:2181,10.0.0.2:2182");
  EXPECT_EQ(url->path, "/allot");
  EXPECT_FALSE(parseZkUrl("zk://127.0.0.1:2181"));
  EXPECT_FALSE(parseZkUrl("zk://127.0.0.1:2181/"));
  EXPECT_FALSE(parseZkUrl("zk:///allot"));
  EXPECT_FALSE(parseZkUrl("zk://host/allot"));
  EXPECT_FALSE(parseZkUrl("zk://a:1,/allot"));
  EXPECT_FALSE(parseZkUrl("http://a:1/allot"));
}

}  // namespace
}  // namespace allot
