// PeerTable: links, owners of ids, the takeover rule and per-principal
// counts (master/peer_table.h).
#include "master/peer_table.h"

#include <gtest/gtest.h>

#include <optional>

#include "master/ids.h"
#include "tests/master/fake_identity_store.h"

namespace allot {
namespace {

PeerIdentity tls(const std::string& principal) {
  PeerIdentity id;
  id.tls = true;
  id.principal = principal;
  return id;
}

TimePoint at(int seconds) { return TimePoint{} + std::chrono::seconds(seconds); }

TEST(PeerTable, LinkSpeaksForOneIdAtATime) {
  PeerTable t;
  t.connect(1, wire::ROLE_SCHEDULER, tls("a"), at(0));
  t.bind(1, "F-1");
  t.bind(1, "F-2");
  ASSERT_NE(t.link(1), nullptr);
  EXPECT_EQ(t.link(1)->id, "F-2");
  EXPECT_EQ(t.link(1)->auth.principal, "a");
  auto closed = t.close(1);
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->id, "F-2");
  EXPECT_EQ(t.link(1), nullptr);
  EXPECT_FALSE(t.close(1));
  t.bind(1, "F-3");  // unknown peer: nothing
  EXPECT_EQ(t.linkCount(), 0u);
}

TEST(PeerTable, UnregisteredPeersComeOutOldestFirstOnce) {
  PeerTable t;
  t.connect(1, wire::ROLE_SCHEDULER, {}, at(0));
  t.connect(2, wire::ROLE_AGENT, {}, at(1));
  t.connect(3, wire::ROLE_AGENT, {}, at(2));
  t.connect(4, wire::ROLE_AGENT, {}, at(5));
  t.bind(2, "A-1");  // registered: never overdue
  t.close(3);        // gone: never overdue
  EXPECT_EQ(t.takeUnregistered(at(2)), std::vector<PeerId>{1});
  EXPECT_TRUE(t.takeUnregistered(at(4)).empty());
  EXPECT_EQ(t.takeUnregistered(at(9)), std::vector<PeerId>{4});
  EXPECT_TRUE(t.takeUnregistered(at(9)).empty());
}

TEST(PeerTable, AnIdWithoutOwnerMayBeClaimedByAnyone) {
  PeerTable t;
  EXPECT_TRUE(t.mayTakeOver(IdKind::kFramework, "F-1", tls("anyone"), ""));
  EXPECT_TRUE(t.mayTakeOver(IdKind::kAgent, "A-1", PeerIdentity{}, "whatever"));
}

TEST(PeerTable, OverTlsOnlyTheOwnersPrincipalTakesOver) {
  PeerTable t;
  RandomIds ids;
  const IdOwner& o = t.claim(IdKind::kFramework, "F-1", "alice", "", ids);
  EXPECT_EQ(o.secret.size(), 32u);
  EXPECT_TRUE(t.mayTakeOver(IdKind::kFramework, "F-1", tls("alice"), ""));
  Status other = t.mayTakeOver(IdKind::kFramework, "F-1", tls("mallory"), o.secret);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().message, "framework F-1 belongs to another principal");
  // The same id as an agent id is another owner's business.
  EXPECT_TRUE(t.mayTakeOver(IdKind::kAgent, "F-1", tls("mallory"), ""));
}

TEST(PeerTable, OnPlaintextOnlyTheSecretTakesOver) {
  PeerTable t;
  RandomIds ids;
  std::string secret = t.claim(IdKind::kAgent, "A-1", "", "", ids).secret;
  EXPECT_TRUE(t.mayTakeOver(IdKind::kAgent, "A-1", PeerIdentity{}, secret));
  Status wrong = t.mayTakeOver(IdKind::kAgent, "A-1", PeerIdentity{}, secret.substr(1) + "x");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().message, "agent A-1: agent_secret does not match");
  EXPECT_FALSE(t.mayTakeOver(IdKind::kAgent, "A-1", PeerIdentity{}, ""));
}

TEST(PeerTable, ClaimKeepsAnOwnedSecretAndAdoptsOnlyForANewOwner) {
  PeerTable t;
  RandomIds ids;
  EXPECT_EQ(t.claim(IdKind::kFramework, "F-1", "", "presented", ids).secret, "presented");
  EXPECT_EQ(t.claim(IdKind::kFramework, "F-1", "", "other", ids).secret, "presented");
  t.forget(IdKind::kFramework, "F-1");
  EXPECT_EQ(t.owner(IdKind::kFramework, "F-1"), nullptr);
  EXPECT_NE(t.claim(IdKind::kFramework, "F-1", "", "", ids).secret, "presented");
}

TEST(PeerTable, CountsIdsByPrincipalThroughClaimsAndForgets) {
  PeerTable t;
  RandomIds ids;
  t.claim(IdKind::kFramework, "F-1", "alice", "", ids);
  t.claim(IdKind::kFramework, "F-2", "alice", "", ids);
  t.claim(IdKind::kFramework, "F-2", "alice", "", ids);  // re-registration: still one
  t.claim(IdKind::kAgent, "A-1", "alice", "", ids);
  EXPECT_EQ(t.heldBy(IdKind::kFramework, "alice"), 2u);
  EXPECT_EQ(t.heldBy(IdKind::kAgent, "alice"), 1u);
  t.claim(IdKind::kFramework, "F-2", "bob", "", ids);  // taken over by another principal
  EXPECT_EQ(t.heldBy(IdKind::kFramework, "alice"), 1u);
  EXPECT_EQ(t.heldBy(IdKind::kFramework, "bob"), 1u);
  t.forget(IdKind::kFramework, "F-1");
  t.forget(IdKind::kFramework, "F-1");  // twice: no effect
  EXPECT_EQ(t.heldBy(IdKind::kFramework, "alice"), 0u);
  EXPECT_EQ(t.heldBy(IdKind::kFramework, "nobody"), 0u);
}

// ---- identities kept across a failover (master/identity_store.h)

// What a leader left in the store for F-1: registered by `principal` with
// `secret`, failover timeout 60 s.
StoredIdentities keptF1(const std::string& principal, const std::string& secret) {
  return {{"F-1", StoredIdentity{principal, hashSecret(secret), std::chrono::seconds(60)}}};
}

// The table writes to `store`, which held `loaded`, read at `now`.
void open(PeerTable& t, testing::FakeIdentityStore& store, StoredIdentities loaded, TimePoint now) {
  t.useIdentityStore(&store);
  t.identitiesLoaded(std::move(loaded), now);
}

// Writes framework `id`'s binding ahead, the store answers `answer`;
// returns what storeAhead's callback got.
Status storeAhead(PeerTable& t, testing::FakeIdentityStore& store, const std::string& id,
                  const std::string& principal, const std::string& secret, Status answer = okStatus()) {
  std::optional<Status> written;
  Status sent = t.storeAhead(id, principal, secret, std::chrono::seconds(7), [&](Status st) { written = st; });
  if (!sent) return sent;
  EXPECT_FALSE(written.has_value()) << "answered before the store did";
  store.answer(std::move(answer));
  EXPECT_TRUE(written.has_value());
  return written.value_or(Status(Error{"no answer"}));
}

TEST(PeerTable, AKeptIdentityNeedsItsPrincipalOverTlsBeforeAnyClaim) {
  testing::FakeIdentityStore store;
  PeerTable t;
  open(t, store, keptF1("alice", "s3cret"), at(0));
  Status impostor = t.mayTakeOver(IdKind::kFramework, "F-1", tls("mallory"), "s3cret");
  ASSERT_FALSE(impostor);
  EXPECT_EQ(impostor.error().message, "framework F-1 belongs to another principal");
  EXPECT_TRUE(t.mayTakeOver(IdKind::kFramework, "F-1", tls("alice"), ""));
  EXPECT_TRUE(t.mayTakeOver(IdKind::kFramework, "F-2", tls("mallory"), ""));  // nothing kept
}

TEST(PeerTable, AKeptIdentityNeedsItsSecretOnPlaintextBeforeAnyClaim) {
  testing::FakeIdentityStore store;
  PeerTable t;
  open(t, store, keptF1("", "s3cret"), at(0));
  Status wrong = t.mayTakeOver(IdKind::kFramework, "F-1", PeerIdentity{}, "guess");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().message, "framework F-1: framework_secret does not match");
  EXPECT_FALSE(t.mayTakeOver(IdKind::kFramework, "F-1", PeerIdentity{}, ""));
  EXPECT_TRUE(t.mayTakeOver(IdKind::kFramework, "F-1", PeerIdentity{}, "s3cret"));
  // Kept identities are frameworks': an agent id of the same name is not bound.
  EXPECT_TRUE(t.mayTakeOver(IdKind::kAgent, "F-1", PeerIdentity{}, ""));
}

TEST(PeerTable, UntilTheStoreIsReadNoUnownedFrameworkIdIsTakenOver) {
  testing::FakeIdentityStore store;
  PeerTable t;
  RandomIds ids;
  t.useIdentityStore(&store);
  EXPECT_TRUE(t.identitiesPending());
  EXPECT_TRUE(t.awaitsIdentities("F-1"));
  Status early = t.mayTakeOver(IdKind::kFramework, "F-1", PeerIdentity{}, "s3cret");
  ASSERT_FALSE(early);
  EXPECT_EQ(early.error().message, "framework F-1: the identities kept in fake are not read yet");
  EXPECT_FALSE(t.awaitsIdentities(""));  // a new framework does not wait
  std::string secret = t.secretFor("F-2", "", ids);
  ASSERT_TRUE(storeAhead(t, store, "F-2", "", secret));
  t.claim(IdKind::kFramework, "F-2", "", secret, ids);
  EXPECT_FALSE(t.awaitsIdentities("F-2"));  // owned here
  t.identitiesLoaded(keptF1("", "s3cret"), at(0));
  EXPECT_FALSE(t.identitiesPending());
  EXPECT_FALSE(t.awaitsIdentities("F-1"));
  EXPECT_FALSE(t.mayTakeOver(IdKind::kFramework, "F-1", PeerIdentity{}, "guess"));
  EXPECT_TRUE(t.mayTakeOver(IdKind::kFramework, "F-1", PeerIdentity{}, "s3cret"));
}

TEST(PeerTable, AClaimBindsOnlyWhatTheStoreHoldsAsAHash) {
  testing::FakeIdentityStore store;
  PeerTable t;
  RandomIds ids;
  open(t, store, {}, at(0));
  std::string secret = t.secretFor("F-1", "", ids);
  EXPECT_TRUE(t.claimNeedsStore("F-1", "alice", secret));
  ASSERT_TRUE(storeAhead(t, store, "F-1", "alice", secret));
  EXPECT_FALSE(t.claimNeedsStore("F-1", "alice", secret));
  EXPECT_TRUE(t.claimNeedsStore("F-1", "bob", secret));  // not what was written
  const IdOwner& o = t.claim(IdKind::kFramework, "F-1", "alice", secret, ids);
  EXPECT_EQ(o.secret, secret);
  ASSERT_EQ(store.stored.count("F-1"), 1u);
  const StoredIdentity& s = store.stored.at("F-1");
  EXPECT_EQ(s.principal, "alice");
  EXPECT_EQ(s.failoverTimeout, std::chrono::seconds(7));
  EXPECT_EQ(s.secretHash.find(o.secret), std::string::npos) << "the secret itself was stored";
  EXPECT_TRUE(secretMatches(o.secret, s.secretHash));
  // Re-registration: nothing new to keep.
  EXPECT_FALSE(t.claimNeedsStore("F-1", "alice", t.secretFor("F-1", "other", ids)));
  t.claim(IdKind::kFramework, "F-1", "alice", "", ids);
  t.claim(IdKind::kAgent, "A-1", "alice", "", ids);  // agents are not kept
  t.forget(IdKind::kFramework, "F-1");
  t.forget(IdKind::kFramework, "F-1");
  EXPECT_EQ(store.log, (std::vector<std::string>{"put F-1", "remove F-1"}));
}

TEST(PeerTable, AFailedWriteAheadBindsNothing) {
  testing::FakeIdentityStore store;
  PeerTable t;
  RandomIds ids;
  open(t, store, {}, at(0));
  Status failed = storeAhead(t, store, "F-1", "alice", "s3cret", Error{"disk full"});
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().message, "disk full");
  EXPECT_TRUE(t.claimNeedsStore("F-1", "alice", "s3cret"));
  EXPECT_EQ(t.owner(IdKind::kFramework, "F-1"), nullptr);
  EXPECT_TRUE(storeAhead(t, store, "F-1", "alice", "s3cret"));  // a second try
  EXPECT_FALSE(t.claimNeedsStore("F-1", "alice", "s3cret"));
}

TEST(PeerTable, AnIdForgottenDuringItsWriteAheadIsNotBound) {
  testing::FakeIdentityStore store;
  store.stored = keptF1("", "s3cret");
  PeerTable t;
  open(t, store, store.stored, at(0));
  std::optional<Status> written;
  ASSERT_TRUE(t.storeAhead("F-1", "", "s3cret", std::chrono::seconds(7), [&](Status st) { written = st; }));
  t.forget(IdKind::kFramework, "F-1");  // the framework is removed meanwhile
  store.answer();
  ASSERT_TRUE(written.has_value());
  ASSERT_FALSE(*written);
  EXPECT_EQ(written->error().message, "framework F-1 was removed while its identity was being kept");
  EXPECT_TRUE(t.claimNeedsStore("F-1", "", "s3cret"));
  EXPECT_EQ(store.log, (std::vector<std::string>{"put F-1", "remove F-1"}));
}

TEST(PeerTable, AWriteAheadNoClaimFollowedLeavesTheStore) {
  testing::FakeIdentityStore store;
  PeerTable t;
  open(t, store, {}, at(0));
  ASSERT_TRUE(storeAhead(t, store, "F-9", "", "s3cret"));
  t.dropAhead("F-9");
  EXPECT_TRUE(store.stored.empty());
  EXPECT_EQ(store.log, (std::vector<std::string>{"put F-9", "remove F-9"}));
}

TEST(PeerTable, AClaimedKeptIdentityBecomesTheOwnerAndIsRewritten) {
  testing::FakeIdentityStore store;
  PeerTable t;
  RandomIds ids;
  open(t, store, keptF1("", "s3cret"), at(0));
  EXPECT_EQ(t.keptCount(), 1u);
  EXPECT_EQ(t.secretFor("F-1", "s3cret", ids), "s3cret");
  ASSERT_TRUE(t.claimNeedsStore("F-1", "", "s3cret"));
  ASSERT_TRUE(storeAhead(t, store, "F-1", "", "s3cret"));
  EXPECT_EQ(t.claim(IdKind::kFramework, "F-1", "", "s3cret", ids).secret, "s3cret");
  EXPECT_EQ(t.kept("F-1"), nullptr);
  EXPECT_TRUE(secretMatches("s3cret", store.stored.at("F-1").secretHash));
  // Dropping at the failover deadline leaves a claimed identity alone.
  EXPECT_EQ(t.dropKeptBefore(at(61), [](const std::string&) { return false; }), 0u);
  EXPECT_EQ(store.stored.count("F-1"), 1u);
}

TEST(PeerTable, UnclaimedKeptIdentitiesGoAtTheirFailoverTimeoutUnlessHeld) {
  testing::FakeIdentityStore store;
  StoredIdentities loaded = keptF1("alice", "x");
  loaded["F-2"] = StoredIdentity{"bob", hashSecret("y"), std::chrono::seconds(10)};
  store.stored = loaded;
  PeerTable t;
  open(t, store, loaded, at(100));
  auto heldF1 = [](const std::string& id) { return id == "F-1"; };
  EXPECT_EQ(t.dropKeptBefore(at(109), heldF1), 0u);
  EXPECT_EQ(t.dropKeptBefore(at(110), heldF1), 1u);  // F-2
  EXPECT_EQ(t.kept("F-2"), nullptr);
  EXPECT_EQ(t.dropKeptBefore(at(1000), heldF1), 0u);  // F-1: the master still holds it
  ASSERT_NE(t.kept("F-1"), nullptr);
  t.forget(IdKind::kFramework, "F-1");  // the framework is removed
  EXPECT_TRUE(store.stored.empty());
  EXPECT_EQ(t.keptCount(), 0u);
}

}  // namespace
}  // namespace allot
