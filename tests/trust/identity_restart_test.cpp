// A master without ZooKeeper keeps its frameworks' identities in --work-dir
// (master/identity_store.h): restarted on the same directory, it refuses a
// peer that presents a framework's id without its secret, and the real
// framework, presenting it, re-registers. A master that cannot read them
// refuses every takeover (and every registration it cannot keep) for now,
// and reads them once it can.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "master/identity_store.h"

#include "tests/agent/cluster.h"
#include "tests/common/raw_peer.h"

namespace allot {
namespace {

using testing::Cluster;
using testing::RawPeer;
using testing::registerFramework;

TEST(IdentityRestart, ARestartedMasterRefusesATakeoverWithoutTheSecret) {
  Cluster cluster;
  if (auto why = cluster.missing(); !why.empty()) GTEST_SKIP() << why;
  std::vector<std::string> flags = {"--work-dir", cluster.dir() + "/master-work"};
  ASSERT_TRUE(cluster.startMaster(flags)) << cluster.masterLog();
  std::string id, secret;
  {
    RawPeer framework(cluster.masterPort(), wire::ROLE_SCHEDULER);
    framework.send(registerFramework());
    auto reg = framework.waitFor(wire::Envelope::kFrameworkRegistered);
    ASSERT_TRUE(reg.has_value()) << cluster.masterLog();
    id = reg->framework_registered().framework_id();
    secret = reg->framework_registered().framework_secret();
  }
  cluster.masterProcess().kill(SIGKILL);
  std::filesystem::remove(cluster.dir() + "/master.port");
  ASSERT_TRUE(cluster.startMaster(flags)) << cluster.masterLog();

  RawPeer impostor(cluster.masterPort(), wire::ROLE_SCHEDULER);
  impostor.send(registerFramework(id, std::string(32, 'a')));
  auto refused = impostor.waitFor(wire::Envelope::kError);
  ASSERT_TRUE(refused.has_value()) << cluster.masterLog();
  EXPECT_NE(refused->error().message().find("framework_secret does not match"), std::string::npos)
      << refused->error().message();
  RawPeer framework(cluster.masterPort(), wire::ROLE_SCHEDULER);
  framework.send(registerFramework(id, secret));
  auto back = framework.waitFor(wire::Envelope::kFrameworkRegistered);
  ASSERT_TRUE(back.has_value()) << cluster.masterLog();
  EXPECT_EQ(back->framework_registered().framework_id(), id);
}

// The ErrorMessage a RegisterFramework gets ("" when none came); a
// refusal for now (not fatal) closes the link so the scheduler retries.
std::string refusal(uint16_t port, const std::string& id, const std::string& secret) {
  RawPeer framework(port, wire::ROLE_SCHEDULER);
  framework.send(registerFramework(id, secret));
  auto e = framework.waitFor(wire::Envelope::kError);
  if (!e) return "";
  if (!e->error().fatal()) {
    EXPECT_TRUE(framework.closedByMaster()) << e->error().message();
  }
  return (e->error().fatal() ? "fatal: " : "for now: ") + e->error().message();
}

TEST(IdentityRestart, AMasterThatCannotReadTheIdentitiesRefusesTakeoversUntilItCan) {
  Cluster cluster;
  if (auto why = cluster.missing(); !why.empty()) GTEST_SKIP() << why;
  std::string work = cluster.dir() + "/master-work";
  std::string identities = work + "/framework-identities";
  std::filesystem::create_directories(work);
  std::ofstream(identities) << "not a directory\n";
  ASSERT_TRUE(cluster.startMaster({"--work-dir", work})) << cluster.masterLog();

  std::string early = refusal(cluster.masterPort(), "F-1", "s3cret");
  EXPECT_EQ(early.find("for now: RegisterFramework: framework F-1: this master has not read"), 0u) << early;
  EXPECT_NE(early.find("framework F-1: this master has not read the frameworks' identities yet"), std::string::npos)
      << early;
  std::string unkept = refusal(cluster.masterPort(), "", "");
  EXPECT_EQ(unkept.find("for now: "), 0u) << unkept;
  EXPECT_NE(unkept.find("its identity could not be kept in directory " + identities), std::string::npos) << unkept;

  // What an earlier master kept, readable again: the master reads it at
  // its next attempt (backing off from one second), then F-1 needs its secret.
  std::filesystem::remove(identities);
  std::filesystem::create_directories(identities);
  std::ofstream(identities + "/" + identityKey("F-1"))
      << encodeIdentity({"", hashSecret("s3cret"), std::chrono::seconds(60)});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string impostor;
  do {
    impostor = refusal(cluster.masterPort(), "F-1", "guess");
  } while (impostor.find("not read the frameworks' identities yet") != std::string::npos &&
           std::chrono::steady_clock::now() < deadline);
  EXPECT_NE(impostor.find("framework_secret does not match"), std::string::npos) << impostor << cluster.masterLog();
  RawPeer framework(cluster.masterPort(), wire::ROLE_SCHEDULER);
  framework.send(registerFramework("F-1", "s3cret"));
  auto back = framework.waitFor(wire::Envelope::kFrameworkRegistered);
  ASSERT_TRUE(back.has_value()) << cluster.masterLog();
  EXPECT_EQ(back->framework_registered().framework_id(), "F-1");
}

}  // namespace
}  // namespace allot
