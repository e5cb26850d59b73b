// PeerTable: links, owners of ids, the takeover rule and per-principal
// counts (master/peer_table.h).
#include "master/peer_table.h"

#include <gtest/gtest.h>

#include "master/ids.h"

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

}  // namespace
}  // namespace allot
