// The master on a fake clock with an identity store (master/identity_store.h)
// that answers when the test says: a framework's binding is kept before
// FrameworkRegistered goes out, a failed write refuses the registration
// for now, and until the store is read no framework id is taken over.
#include <gtest/gtest.h>

#include "tests/master/fake_identity_store.h"
#include "tests/master/master_fixture.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::FakeIdentityStore;
using testing::kFrameworkPeer;
using testing::kOtherFrameworkPeer;

class MasterIdentityTest : public testing::MasterTest {
 protected:
  // The master keeps identities in a fake store that held `held` and
  // answers load() with `loadError` when set.
  void keepIn(StoredIdentities held = {}, std::optional<std::string> loadError = std::nullopt) {
    auto store = std::make_unique<FakeIdentityStore>();
    store->stored = std::move(held);
    store->loadError = std::move(loadError);
    store_ = store.get();
    master_->keepIdentities(std::move(store), [this] { ++firstReads_; });
  }
  // Sends RegisterFramework (id "": a new framework) and returns nothing:
  // the answer waits for the store.
  void sendRegister(PeerId peer, const std::string& id = "", const std::string& secret = "") {
    hello(peer, wire::ROLE_SCHEDULER);
    wire::Envelope e;
    e.mutable_register_framework()->mutable_info()->set_name("test");
    e.mutable_register_framework()->mutable_info()->set_id(id);
    e.mutable_register_framework()->set_framework_secret(secret);
    master_->peerMessage(peer, e);
  }
  std::vector<wire::Envelope> registered(PeerId peer) {
    return outbox_.take(peer, wire::Envelope::kFrameworkRegistered);
  }
  std::string errorTo(PeerId peer) {
    auto errors = outbox_.take(peer, wire::Envelope::kError);
    EXPECT_EQ(errors.size(), 1u);
    if (errors.empty()) return "";
    EXPECT_FALSE(errors[0].error().fatal()) << "a refusal for now is not fatal";
    EXPECT_EQ(outbox_.closed.count(peer), 1u) << "the link is closed so the scheduler reconnects";
    return errors[0].error().message();
  }

  FakeIdentityStore* store_ = nullptr;
  int firstReads_ = 0;
};

TEST_F(MasterIdentityTest, FrameworkRegisteredGoesOutOnlyOnceTheStoreKeepsTheBinding) {
  keepIn();
  EXPECT_EQ(firstReads_, 1);
  sendRegister(kFrameworkPeer);
  EXPECT_TRUE(registered(kFrameworkPeer).empty()) << "answered before the binding was kept";
  ASSERT_EQ(store_->unanswered.size(), 1u);
  std::string id = store_->unanswered.front().frameworkId;
  store_->answer();
  auto replies = registered(kFrameworkPeer);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].framework_registered().framework_id(), id);
  EXPECT_TRUE(secretMatches(replies[0].framework_registered().framework_secret(), store_->stored.at(id).secretHash));
  // Its re-registration binds nothing new: answered at once.
  sendRegister(kOtherFrameworkPeer, id, replies[0].framework_registered().framework_secret());
  EXPECT_EQ(registered(kOtherFrameworkPeer).size(), 1u);
  EXPECT_TRUE(store_->unanswered.empty());
}

TEST_F(MasterIdentityTest, AFailedWriteRefusesTheRegistrationForNow) {
  keepIn();
  sendRegister(kFrameworkPeer);
  store_->answer(Error{"disk full"});
  EXPECT_TRUE(registered(kFrameworkPeer).empty());
  std::string why = errorTo(kFrameworkPeer);
  EXPECT_NE(why.find("its identity could not be kept in fake: disk full"), std::string::npos) << why;
  EXPECT_EQ(master_->frameworkCount(), 0u);
  EXPECT_TRUE(store_->stored.empty());
}

TEST_F(MasterIdentityTest, ALinkClosedDuringTheWriteLeavesNoBindingBehind) {
  keepIn();
  sendRegister(kFrameworkPeer);
  master_->peerClosed(kFrameworkPeer);
  store_->answer();
  EXPECT_TRUE(registered(kFrameworkPeer).empty());
  EXPECT_EQ(master_->frameworkCount(), 0u);
  EXPECT_TRUE(store_->stored.empty()) << "an id nobody registered stays bound";
}

TEST_F(MasterIdentityTest, UntilTheStoreIsReadAnIdIsNotTakenOver) {
  StoredIdentities held = {{"F-1", StoredIdentity{"", hashSecret("s3cret"), 60s}}};
  keepIn(held, "cannot open /nowhere");
  EXPECT_EQ(firstReads_, 1) << "the first read's outcome is reported, failed or not";
  EXPECT_FALSE(master_->identitiesRead());
  sendRegister(kFrameworkPeer, "F-1", "guess");
  std::string why = errorTo(kFrameworkPeer);
  EXPECT_NE(why.find("has not read the frameworks' identities yet (fake)"), std::string::npos) << why;
  // A new framework registers meanwhile (its binding is written).
  sendRegister(kOtherFrameworkPeer);
  store_->answerAll();
  EXPECT_EQ(registered(kOtherFrameworkPeer).size(), 1u);

  // Read again after the retry delay, not before.
  store_->loadError.reset();
  clock_.advance(kIdentityLoadRetryFirst / 2);
  master_->tick();
  EXPECT_EQ(store_->loads, 1);
  clock_.advance(kIdentityLoadRetryFirst);
  master_->tick();
  EXPECT_EQ(store_->loads, 2);
  ASSERT_TRUE(master_->identitiesRead());
  EXPECT_EQ(firstReads_, 1);
  constexpr PeerId kImpostor = 7, kReal = 8;
  sendRegister(kImpostor, "F-1", "guess");
  EXPECT_TRUE(registered(kImpostor).empty());
  auto refused = outbox_.take(kImpostor, wire::Envelope::kError);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].error().message().find("framework_secret does not match"), std::string::npos);
  sendRegister(kReal, "F-1", "s3cret");
  store_->answerAll();
  auto back = registered(kReal);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].framework_registered().framework_secret(), "s3cret");
}

TEST_F(MasterIdentityTest, OneIdRegistersOnOneConnectionAtATime) {
  keepIn({{"F-1", StoredIdentity{"", hashSecret("s3cret"), 60s}}});
  sendRegister(kFrameworkPeer, "F-1", "s3cret");
  sendRegister(kOtherFrameworkPeer, "F-1", "s3cret");
  std::string why = errorTo(kOtherFrameworkPeer);
  EXPECT_NE(why.find("framework F-1 is registering on another connection"), std::string::npos) << why;
  store_->answerAll();
  EXPECT_EQ(registered(kFrameworkPeer).size(), 1u);
}

}  // namespace
}  // namespace allot
