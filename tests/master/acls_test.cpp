#include <gtest/gtest.h>

#include "master/acls.h"
#include "master/policy.h"

namespace allot {
namespace {

TEST(Acls, WithoutAFileAnyoneRegistersAndNobodyRunsAsRoot) {
  Acls acls = Acls::permissive();
  auto grant = acls.registerFramework("");
  ASSERT_TRUE(grant.has_value());
  EXPECT_TRUE(grant->allowsUser(""));
  EXPECT_TRUE(grant->allowsUser("alice"));
  EXPECT_FALSE(grant->allowsUser("root"));
  EXPECT_FALSE(grant->allowsUser("0"));
  EXPECT_TRUE(acls.registerAgent("anything"));
  EXPECT_FALSE(acls.operate(""));
}

TEST(Acls, FirstMatchingRuleDecidesAndTheRestIsRefused) {
  auto acls = Acls::parse(
      "# comment\n"
      "register_framework alice users=bob,carol roles=batch weight_max=4  # trailing\n"
      "register_framework * users=*\n"
      "register_agent agent\n"
      "operate admin\n",
      "test.acls");
  ASSERT_TRUE(acls.ok()) << acls.error().describe();
  EXPECT_EQ(acls->ruleCount(), 4u);
  auto alice = acls->registerFramework("alice");
  ASSERT_TRUE(alice.has_value());
  EXPECT_TRUE(alice->allowsUser("bob"));
  EXPECT_FALSE(alice->allowsUser("dave"));
  EXPECT_TRUE(alice->allowsRole("batch"));
  EXPECT_FALSE(alice->allowsRole("prod"));
  EXPECT_EQ(alice->weightMax, 4);
  auto other = acls->registerFramework("zed");
  ASSERT_TRUE(other.has_value());
  EXPECT_TRUE(other->allowsUser("dave"));
  EXPECT_FALSE(other->allowsUser("root"));
  EXPECT_TRUE(acls->registerAgent("agent"));
  EXPECT_FALSE(acls->registerAgent("zed"));
  EXPECT_TRUE(acls->operate("admin"));
  EXPECT_FALSE(acls->operate("alice"));
}

TEST(Acls, RootOnlyWhenNamed) {
  auto acls = Acls::parse("register_framework ops users=*,root\nregister_framework dev users=*\n", "a");
  ASSERT_TRUE(acls.ok());
  EXPECT_TRUE(acls->registerFramework("ops")->allowsUser("root"));
  EXPECT_FALSE(acls->registerFramework("dev")->allowsUser("root"));
}

TEST(Acls, ParseErrorsNameLineAndColumn) {
  auto bad = [](const char* text) {
    auto acls = Acls::parse(text, "f.acls");
    return acls.ok() ? std::string("ok") : acls.error().describe();
  };
  EXPECT_NE(bad("register_agent a\nallow_everything *\n").find("f.acls:2:1: unknown action"),
            std::string::npos);
  EXPECT_NE(bad("register_framework a users=x weight_max=-1\n").find("f.acls:1:41: weight_max"),
            std::string::npos)
      << bad("register_framework a users=x weight_max=-1\n");
  EXPECT_NE(bad("register_framework a colour=blue\n").find("f.acls:1:22: unknown option"),
            std::string::npos);
  EXPECT_NE(bad("  operate\n").find("f.acls:1:10: missing principal"), std::string::npos);
  EXPECT_NE(bad("operate admin users=x\n").find("f.acls:1:15: 'operate' takes no options"),
            std::string::npos);
  EXPECT_EQ(bad("\n\n# only comments\n"), "ok");
  EXPECT_NE(bad("register_framework a guarantee=cpus:x\n").find("f.acls:1:32: guarantee"),
            std::string::npos)
      << bad("register_framework a guarantee=cpus:x\n");
  EXPECT_NE(bad("register_framework a guarantee=ports:[1-2]\n").find("scalars only"), std::string::npos);
}

TEST(Acls, AGuaranteeIsGrantedPerPrincipal) {
  auto acls = Acls::parse("register_framework mpi guarantee=cpus:8;mem:8192\nregister_framework *\n", "a");
  ASSERT_TRUE(acls.ok()) << acls.error().describe();
  EXPECT_EQ(acls->registerFramework("mpi")->guarantee.scalarMillis("cpus"), 8000);
  EXPECT_TRUE(acls->registerFramework("web")->guarantee.empty());
  // The larger of the role's and the principal's allowance, per scalar;
  // what the framework asks is clamped to it.
  PolicyOptions policy;
  policy.guarantees["batch"] = *Resources::parse("cpus:2;mem:16384");
  wire::FrameworkInfo info;
  info.set_role("batch");
  Resources g = effectiveGuarantee(policy, info, acls->registerFramework("mpi")->guarantee);
  EXPECT_EQ(g.scalarMillis("cpus"), 8000);
  EXPECT_EQ(g.scalarMillis("mem"), 16384000);
  Resources::parse("cpus:20")->toWire(info.mutable_guaranteed());
  EXPECT_EQ(effectiveGuarantee(policy, info, acls->registerFramework("mpi")->guarantee).scalarMillis("cpus"),
            8000);
  info.set_role("other");
  info.clear_guaranteed();
  EXPECT_TRUE(effectiveGuarantee(policy, info).empty());
  EXPECT_EQ(effectiveGuarantee(policy, info, acls->registerFramework("mpi")->guarantee).scalarMillis("cpus"),
            8000);
}

TEST(Acls, PerPrincipalLimitsHaveNamedDefaultsAndRuleValues) {
  Acls permissive = Acls::permissive();
  EXPECT_EQ(permissive.registerFramework("")->frameworksMax, kFrameworksPerPrincipalDefault);
  EXPECT_EQ(permissive.agentsMax("any"), kAgentsPerPrincipalDefault);
  auto acls = Acls::parse(
      "register_framework alice frameworks_max=3 users=*\n"
      "register_framework *\n"
      "register_agent rack1 agents_max=40\n"
      "register_agent *\n",
      "a");
  ASSERT_TRUE(acls.ok()) << acls.error().describe();
  EXPECT_EQ(acls->registerFramework("alice")->frameworksMax, 3u);
  EXPECT_TRUE(acls->registerFramework("alice")->allowsUser("bob"));
  EXPECT_EQ(acls->registerFramework("bob")->frameworksMax, kFrameworksPerPrincipalDefault);
  EXPECT_EQ(acls->agentsMax("rack1"), 40u);
  EXPECT_EQ(acls->agentsMax("rack2"), kAgentsPerPrincipalDefault);
  auto only = Acls::parse("register_agent rack1\n", "b");
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->agentsMax("rack2"), 0u);  // may not register
}

TEST(Acls, PerPrincipalLimitsMustBePositiveAndBelongToTheirAction) {
  auto bad = [](const char* text) {
    auto acls = Acls::parse(text, "f.acls");
    return acls.ok() ? std::string("ok") : acls.error().describe();
  };
  EXPECT_NE(bad("register_framework a frameworks_max=0\n").find("f.acls:1:37: frameworks_max must be a positive"),
            std::string::npos)
      << bad("register_framework a frameworks_max=0\n");
  EXPECT_NE(bad("register_agent a agents_max=ten\n").find("f.acls:1:29: agents_max must be a positive"),
            std::string::npos)
      << bad("register_agent a agents_max=ten\n");
  EXPECT_NE(bad("register_agent a frameworks_max=2\n").find("f.acls:1:18: unknown option 'frameworks_max' (agents_max)"),
            std::string::npos)
      << bad("register_agent a frameworks_max=2\n");
  EXPECT_NE(bad("register_framework a agents_max=2\n").find("f.acls:1:22: unknown option 'agents_max'"),
            std::string::npos);
}

}  // namespace
}  // namespace allot
