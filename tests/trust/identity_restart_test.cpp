// A master without ZooKeeper keeps its frameworks' identities in --work-dir
// (master/identity_store.h): restarted on the same directory, it refuses a
// peer that presents a framework's id without its secret, and the real
// framework, presenting it, re-registers.
#include <gtest/gtest.h>

#include <filesystem>

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

}  // namespace
}  // namespace allot
