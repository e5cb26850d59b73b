// solaris/project against a recording platform: the exact commands and
// values for launch, update and cleanup, recovery of leftovers, and the
// refusal on this (Linux) host. No Solaris machine ran these commands.
#include <gtest/gtest.h>

#include "isolators/isolator_table.h"
#include "isolators/solaris_project.h"
#include "tests/isolators/cgroup_twin_fixture.h"

namespace allot {
namespace {

using Commands = std::vector<std::vector<std::string>>;

class RecordingPlatform : public SolarisPlatform {
 public:
  explicit RecordingPlatform(Commands* log, std::vector<std::string> projects = {})
      : log_(log), projects_(std::move(projects)) {}
  std::string whyNoProjects() const override { return ""; }
  Status run(const std::vector<std::string>& argv) override {
    log_->push_back(argv);
    return okStatus();
  }
  Result<std::vector<std::string>> projects() override { return projects_; }

 private:
  Commands* log_;
  std::vector<std::string> projects_;
};

Resources res(const char* text) { return *Resources::parse(text); }

std::unique_ptr<Isolator> make(Commands* log, std::vector<std::string> projects = {}) {
  auto made = makeSolarisProjectIsolator(std::make_unique<RecordingPlatform>(log, std::move(projects)), 0);
  EXPECT_TRUE(made.ok());
  return std::move(*made);
}

TEST(SolarisProject, LaunchCreatesTheProjectWithControlsAndMovesTheExecutorIntoIt) {
  Commands log;
  auto iso = make(&log);
  ContainerId id{"fw1", "ex1"};
  ChildSetup setup;
  ASSERT_TRUE(iso->prepare(id, res("cpus:1.5;mem:256"), &setup).ok());
  ASSERT_TRUE(iso->isolate(id, 4242).ok());
  Commands want = {
      {"/usr/sbin/projadd", "-c", "allot executor fw1.ex1", "-K", "project.cpu-shares=(privileged,150,none)", "-K",
       "project.max-lwps=(privileged,2048,deny)", "-K", "rcap.max-rss=268435456", "allot.fw1.ex1"},
      {"/usr/bin/newtask", "-p", "allot.fw1.ex1", "-c", "4242"}};
  EXPECT_EQ(log, want);
}

TEST(SolarisProject, TaskAddedAndRemovedRewritesTheControls) {
  Commands log;
  auto iso = make(&log);
  ContainerId id{"fw1", "ex1"};
  ChildSetup setup;
  ASSERT_TRUE(iso->prepare(id, res("cpus:0.5;mem:64"), &setup).ok());
  log.clear();
  // A task of cpus:1;mem:128 joins.
  ASSERT_TRUE(iso->update(id, res("cpus:1.5;mem:192")).ok());
  Commands added = {
      {"/usr/sbin/projmod", "-s", "-K", "project.cpu-shares=(privileged,150,none)", "-K",
       "project.max-lwps=(privileged,2048,deny)", "-K", "rcap.max-rss=201326592", "allot.fw1.ex1"},
      {"/usr/bin/prctl", "-n", "project.cpu-shares", "-r", "-v", "150", "-i", "project", "allot.fw1.ex1"},
      {"/usr/bin/prctl", "-n", "project.max-lwps", "-r", "-v", "2048", "-i", "project", "allot.fw1.ex1"}};
  EXPECT_EQ(log, added);
  log.clear();
  ASSERT_TRUE(iso->update(id, res("cpus:1.5;mem:192")).ok());
  EXPECT_TRUE(log.empty()) << "unchanged limits must not run anything";
  // The task ends.
  ASSERT_TRUE(iso->update(id, res("cpus:0.5;mem:64")).ok());
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0][3], "project.cpu-shares=(privileged,50,none)");
  EXPECT_EQ(log[0][5], "project.max-lwps=(privileged,1024,deny)");
  EXPECT_EQ(log[0][7], "rcap.max-rss=67108864");
  EXPECT_EQ(log[1][5], "50");
}

TEST(SolarisProject, CleanupKillsTheProjectsProcessesAndDeletesItOnce) {
  Commands log;
  auto iso = make(&log);
  ContainerId id{"fw1", "ex1"};
  ChildSetup setup;
  ASSERT_TRUE(iso->prepare(id, res("cpus:1;mem:64"), &setup).ok());
  log.clear();
  ASSERT_TRUE(iso->cleanup(id).ok());
  ASSERT_TRUE(iso->cleanup(id).ok());
  Commands want = {{"/usr/bin/pkill", "-9", "-J", "allot.fw1.ex1"}, {"/usr/sbin/projdel", "allot.fw1.ex1"}};
  EXPECT_EQ(log, want);
}

TEST(SolarisProject, RecoveryDeletesProjectsOfGoneExecutorsOnly) {
  Commands log;
  auto iso = make(&log, {"system", "user.root", "allot.fw1.alive", "allot.fw1.gone", "default"});
  ASSERT_TRUE(iso->recover({ContainerId{"fw1", "alive"}}).ok());
  Commands want = {{"/usr/bin/pkill", "-9", "-J", "allot.fw1.gone"}, {"/usr/sbin/projdel", "allot.fw1.gone"}};
  EXPECT_EQ(log, want);
  log.clear();
  ASSERT_TRUE(iso->cleanup({"fw1", "alive"}).ok());
  EXPECT_EQ(log.back(), (std::vector<std::string>{"/usr/sbin/projdel", "allot.fw1.alive"}));
}

// The table on a host twin in a temp dir (its containment isolator comes
// first on any host): no root needed, nothing made on the real cgroupfs.
class SolarisProjectTable : public CgroupTwinTest {};

TEST_F(SolarisProjectTable, RefusesToStartOnAHostWithoutProjects) {
  auto made = createIsolatorsOn(twinCgroupHost(fs_, CgroupMode::kHybrid), "solaris/project", options_);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().describe().find("solaris/project needs Solaris projects"), std::string::npos)
      << made.error().describe();
  EXPECT_NE(made.error().describe().find("Linux"), std::string::npos) << made.error().describe();
}

}  // namespace
}  // namespace allot
