// Unit tests of the agent's cgroup layout and CPU weights (CgroupLayer,
// docs/hog-analysis.md) against the cgroupfs twin: the root's weight on v1
// and v2, the agent's own process in <root>/agent (its weight when set)
// and back out, a root delegated by a service manager left
// unweighted, the flags' ranges.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "base/asio.h"
#include "base/uring_poller.h"
#include "isolators/cgroup_layer.h"
#include "isolators/cgroupfs.h"
#include "isolators/cgroupfs_twin.h"
#include "isolators/isolator_table.h"
#include "tests/isolators/cgroup_twin_fixture.h"

namespace allot {
namespace {

namespace fs = std::filesystem;

bool holdsMe(const std::string& procsFile) {
  return CgroupTwinTest::read(procsFile).find(std::to_string(getpid()) + "\n") != std::string::npos;
}

class CgroupLayout : public CgroupTwinTest {
 protected:
  // The agent, started by hand in the top cgroup of every hierarchy.
  void byHand(CgroupMode mode) {
    host_ = twinCgroupHost(fs_, mode);
    for (const auto& [c, mount] : host_.v1) {
      host_.agentV1Cgroups[c] = "/";
      ASSERT_TRUE(fs_->writeFile(mount + "/cgroup.procs", std::to_string(getpid())).ok());
    }
    if (!host_.v2.empty()) {
      host_.agentV2Cgroup = "/user.slice";
      ASSERT_TRUE(fs_->makeDir(host_.v2 + "/user.slice").ok());
      ASSERT_TRUE(fs_->writeFile(host_.v2 + "/user.slice/cgroup.procs", std::to_string(getpid())).ok());
    }
  }
  Status make(const std::string& names) {
    auto made = createIsolatorsOn(host_, names, options_);
    if (!made) return made.error();
    isolators_ = std::move(*made);
    return okStatus();
  }
  // The agent started by systemd in its delegated v2 unit (the unit's own
  // process in it): returns the unit's directory in the twin.
  std::string inDelegatedUnit() {
    host_ = twinCgroupHost(fs_, CgroupMode::kUnified);
    options_.cgroupsRoot = "system.slice/allot-agent.service";
    host_.agentV2Cgroup = "/" + options_.cgroupsRoot;
    std::string unit = dir_ + "/unified/" + options_.cgroupsRoot;
    EXPECT_TRUE(fs_->makeDir(dir_ + "/unified/system.slice").ok());
    EXPECT_TRUE(fs_->makeDir(unit).ok());
    EXPECT_TRUE(fs_->writeFile(unit + "/cgroup.procs", std::to_string(getpid())).ok());
    return unit;
  }
};

TEST_F(CgroupLayout, V1RootOutweighsTheSystemAndTheAgentSitsInALeafBesideItsExecutors) {
  byHand(CgroupMode::kLegacy);
  ASSERT_TRUE(make("cgroups/cpu,cgroups/mem").ok());
  EXPECT_EQ(read(dir_ + "/cpu/allot/cpu.shares"), "102400") << "10000 on the v2 scale, * 1024 / 100";
  EXPECT_TRUE(holdsMe(dir_ + "/cpu/allot/agent/cgroup.procs"));
  EXPECT_FALSE(fs::exists(dir_ + "/cpu/allot/agent/cpu.shares")) << "the kernel's default unless set";
  EXPECT_FALSE(holdsMe(dir_ + "/cpu/cgroup.procs"));
  EXPECT_TRUE(holdsMe(dir_ + "/memory/cgroup.procs")) << "only the cpu hierarchy places the agent";
  EXPECT_FALSE(fs::exists(dir_ + "/memory/allot/agent"));
  ChildSetup setup;
  ContainerId id{"fw", "ex"};
  for (auto& iso : isolators_) ASSERT_TRUE(iso->prepare(id, *Resources::parse("cpus:2;mem:64"), &setup).ok());
  EXPECT_EQ(read(dir_ + "/cpu/allot/fw.ex/cpu.shares"), "2048");
  for (auto& iso : isolators_) ASSERT_TRUE(iso->cleanup(id).ok());
  isolators_.clear();  // the agent stops: back where it came from, root gone
  EXPECT_TRUE(holdsMe(dir_ + "/cpu/cgroup.procs"));
  EXPECT_FALSE(fs::exists(dir_ + "/cpu/allot"));
}

// A nested --cgroups-root whose parent exists in no hierarchy (or, as with
// an operator's node cgroup made only in the v1 hierarchies, in some) is
// made level by level, a v1 cpuset level with its parent's cpus.
TEST_F(CgroupLayout, ANestedRootIsMadeLevelByLevelInEveryHierarchy) {
  byHand(CgroupMode::kHybrid);
  ASSERT_TRUE(fs_->makeDir(dir_ + "/cpu/node").ok());
  options_.cgroupsRoot = "node/allot";
  ASSERT_TRUE(make("cgroups/cpu,cgroups/mem,cgroups/cpuset").ok());
  EXPECT_TRUE(holdsMe(dir_ + "/cpu/node/allot/agent/cgroup.procs"));
  EXPECT_TRUE(fs::is_directory(dir_ + "/memory/node/allot"));
  EXPECT_TRUE(fs::is_directory(dir_ + "/unified/node/allot"));
  EXPECT_EQ(read(dir_ + "/cpuset/node/cpuset.cpus"), read(dir_ + "/cpuset/cpuset.cpus"));
  EXPECT_EQ(read(dir_ + "/cpuset/node/allot/cpuset.cpus"), read(dir_ + "/cpuset/cpuset.cpus"));
}

TEST_F(CgroupLayout, V2RootOutweighsTheSystemAndTheAgentLeavesTheInnerNode) {
  byHand(CgroupMode::kUnified);
  ASSERT_TRUE(make("cgroups/cpu,cgroups/pids").ok());
  EXPECT_EQ(read(dir_ + "/unified/allot/cpu.weight"), "10000");
  EXPECT_TRUE(holdsMe(dir_ + "/unified/allot/agent/cgroup.procs"));
  EXPECT_FALSE(holdsMe(dir_ + "/unified/user.slice/cgroup.procs"));
  EXPECT_EQ(read(dir_ + "/unified/allot/cgroup.subtree_control"), "+cpu +pids");
  isolators_.clear();
  EXPECT_TRUE(holdsMe(dir_ + "/unified/user.slice/cgroup.procs"));
  EXPECT_FALSE(fs::exists(dir_ + "/unified/allot"));
}

// systemd's Delegate=yes: the unit's cgroup is the root and holds the agent.
// The root's attributes are systemd's (CPUWeight=); the agent moves into a
// leaf so that executors can be its siblings (no processes in inner nodes).
TEST_F(CgroupLayout, DelegatedRootKeepsItsServiceManagersWeight) {
  std::string unit = inDelegatedUnit();
  ASSERT_TRUE(fs_->writeFile(unit + "/cpu.weight", "100").ok());
  ASSERT_TRUE(make("cgroups/cpu").ok());
  EXPECT_EQ(read(unit + "/cpu.weight"), "100");
  EXPECT_TRUE(holdsMe(unit + "/agent/cgroup.procs"));
  EXPECT_FALSE(holdsMe(unit + "/cgroup.procs"));
  ChildSetup setup;
  ContainerId id{"fw", "ex"};
  for (auto& iso : isolators_) ASSERT_TRUE(iso->prepare(id, *Resources::parse("cpus:0.5"), &setup).ok());
  EXPECT_EQ(read(unit + "/fw.ex/cpu.weight"), "50");
  for (auto& iso : isolators_) ASSERT_TRUE(iso->cleanup(id).ok());
  isolators_.clear();
  EXPECT_TRUE(holdsMe(unit + "/agent/cgroup.procs")) << "never back into the inner node";
}

// The packaged units: executors live in allot-executors.service (a unit of
// their own with Delegate=yes), the agent in allot-agent.service. The agent
// neither weighs, enters nor removes the other unit's cgroup, and enables
// the controllers in it (systemd leaves a delegated subtree_control alone).
TEST_F(CgroupLayout, AnotherUnitsDelegatedRootHoldsOnlyExecutors) {
  host_ = twinCgroupHost(fs_, CgroupMode::kUnified);
  options_.cgroupsRoot = "system.slice/allot-executors.service";
  host_.rootDelegated = true;
  options_.agentCpuWeight = 500;  // the agent stays in its unit: nothing to weigh
  host_.agentV2Cgroup = "/system.slice/allot-agent.service";
  std::string agentUnit = dir_ + "/unified/system.slice/allot-agent.service";
  std::string root = dir_ + "/unified/" + options_.cgroupsRoot;
  ASSERT_TRUE(fs_->makeDir(dir_ + "/unified/system.slice").ok());
  ASSERT_TRUE(fs_->makeDir(agentUnit).ok());
  ASSERT_TRUE(fs_->makeDir(root).ok());
  ASSERT_TRUE(fs_->writeFile(root + "/cpu.weight", "10000").ok());
  ASSERT_TRUE(fs_->writeFile(agentUnit + "/cgroup.procs", std::to_string(getpid())).ok());
  ASSERT_TRUE(fs_->writeFile(root + "/cgroup.procs", "424242").ok());  // the unit's placeholder
  ASSERT_TRUE(make("cgroups/cpu,cgroups/mem").ok());
  EXPECT_EQ(read(root + "/cgroup.procs"), "") << "no process left in the inner node";
  EXPECT_EQ(read(root + "/holder/cgroup.procs"), "424242\n");
  EXPECT_EQ(read(root + "/cpu.weight"), "10000") << "the unit's CPUWeight=, not rewritten";
  EXPECT_EQ(read(root + "/cgroup.subtree_control"), "+cpu +memory");
  EXPECT_TRUE(holdsMe(agentUnit + "/cgroup.procs")) << "the agent stays in its own unit";
  EXPECT_FALSE(fs::exists(root + "/agent"));
  EXPECT_FALSE(fs::exists(agentUnit + "/cpu.weight")) << "the agent's unit weighs by its own CPUWeight=";
  ChildSetup setup;
  ContainerId id{"fw", "ex"};
  for (auto& iso : isolators_) ASSERT_TRUE(iso->prepare(id, *Resources::parse("cpus:0.5;mem:64"), &setup).ok());
  EXPECT_EQ(read(root + "/fw.ex/cpu.weight"), "50");
  for (auto& iso : isolators_) ASSERT_TRUE(iso->cleanup(id).ok());
  isolators_.clear();
  EXPECT_TRUE(fs::exists(root)) << "the unit's cgroup is systemd's to remove";
  EXPECT_TRUE(holdsMe(agentUnit + "/cgroup.procs"));
}

TEST_F(CgroupLayout, DelegatedV1RootKeepsItsWeight) {
  byHand(CgroupMode::kHybrid);
  options_.cgroupsRoot = "system.slice/allot-agent.service";
  host_.agentV1Cgroups["cpu"] = "/" + options_.cgroupsRoot;
  for (const auto& h : {std::string("cpu"), std::string("cpuacct"), std::string("freezer"), std::string("unified")}) {
    ASSERT_TRUE(fs_->makeDir(dir_ + "/" + h + "/system.slice").ok());
  }
  Status made = make("cgroups/cpu");
  ASSERT_TRUE(made.ok()) << made.error().describe();
  EXPECT_FALSE(fs::exists(dir_ + "/cpu/" + options_.cgroupsRoot + "/cpu.shares")) << "never written";
  EXPECT_TRUE(holdsMe(dir_ + "/cpu/" + options_.cgroupsRoot + "/agent/cgroup.procs"));
}

TEST_F(CgroupLayout, RootWeightIsConfigurableAndZeroLeavesItAlone) {
  byHand(CgroupMode::kHybrid);
  options_.rootCpuWeight = 400;
  ASSERT_TRUE(make("cgroups/cpu").ok());
  EXPECT_EQ(read(dir_ + "/cpu/allot/cpu.shares"), "4096");
  isolators_.clear();
  options_.rootCpuWeight = 0;
  ASSERT_TRUE(make("cgroups/cpu").ok());
  EXPECT_FALSE(fs::exists(dir_ + "/cpu/allot/cpu.shares")) << "never written";
  EXPECT_TRUE(holdsMe(dir_ + "/cpu/allot/agent/cgroup.procs"));
}

TEST_F(CgroupLayout, RootWeightOutOfRangeIsRefused) {
  byHand(CgroupMode::kLegacy);
  for (int64_t weight : {-1, 10001}) {
    options_.rootCpuWeight = weight;
    Status st = make("cgroups/cpu");
    ASSERT_FALSE(st.ok()) << weight;
    EXPECT_NE(st.error().describe().find("--cgroups-root-cpu-weight"), std::string::npos);
  }
}

// Inside a delegated subtree the leaf is the agent's to weigh (v2 scale).
TEST_F(CgroupLayout, V2AgentWeightIsWrittenInItsLeafWhenSet) {
  std::string unit = inDelegatedUnit();
  options_.agentCpuWeight = 500;
  ASSERT_TRUE(make("cgroups/cpu").ok());
  EXPECT_TRUE(holdsMe(unit + "/agent/cgroup.procs"));
  EXPECT_EQ(read(unit + "/agent/cpu.weight"), "500");
  EXPECT_FALSE(fs::exists(unit + "/cpu.weight")) << "the unit's own weight is systemd's";
}

TEST_F(CgroupLayout, AgentWeightIsConfigurableAndZeroLeavesTheKernelsDefault) {
  byHand(CgroupMode::kHybrid);
  options_.agentCpuWeight = 300;
  ASSERT_TRUE(make("cgroups/cpu").ok());
  EXPECT_EQ(read(dir_ + "/cpu/allot/agent/cpu.shares"), "3072");
  isolators_.clear();
  options_.agentCpuWeight = 0;
  ASSERT_TRUE(make("cgroups/cpu").ok());
  EXPECT_TRUE(holdsMe(dir_ + "/cpu/allot/agent/cgroup.procs"));
  EXPECT_FALSE(fs::exists(dir_ + "/cpu/allot/agent/cpu.shares")) << "never written";
  isolators_.clear();
  for (int64_t weight : {-1, 10001}) {
    options_.agentCpuWeight = weight;
    Status st = make("cgroups/cpu");
    ASSERT_FALSE(st.ok()) << weight;
    EXPECT_NE(st.error().describe().find("--cgroups-agent-cpu-weight"), std::string::npos);
  }
}

// Started in its v2 root with no cpu controller in use (tracking only): the
// agent leaves the inner node but weighs nothing, even when asked to.
TEST_F(CgroupLayout, DelegatedRootWithoutTheCpuControllerWeighsNothing) {
  std::string unit = inDelegatedUnit();
  options_.agentCpuWeight = 500;
  ASSERT_TRUE(make("cgroups/pids").ok());
  EXPECT_TRUE(holdsMe(unit + "/agent/cgroup.procs"));
  EXPECT_FALSE(fs::exists(unit + "/agent/cpu.weight"));
  EXPECT_FALSE(fs::exists(unit + "/cpu.weight"));
}

TEST_F(CgroupLayout, WithoutTheCpuControllerTheAgentStaysWhereItWasStarted) {
  byHand(CgroupMode::kHybrid);
  ASSERT_TRUE(make("cgroups/mem").ok());
  EXPECT_TRUE(holdsMe(dir_ + "/cpu/cgroup.procs"));
  EXPECT_FALSE(fs::exists(dir_ + "/cpu/allot"));
  EXPECT_TRUE(holdsMe(dir_ + "/unified/user.slice/cgroup.procs"));
}

}  // namespace
}  // namespace allot
