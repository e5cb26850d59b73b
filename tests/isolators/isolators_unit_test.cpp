// Unit tests of the isolators against the cgroupfs twin in a temp dir (no
// root): the exact files and values written for v1 and v2, the table and
// its errors, recovery, usage parsing, and v2 OOM events through the real
// UringPoller (inotify on a fake memory.events).
#include <gtest/gtest.h>

#include "base/files.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "base/asio.h"
#include "base/unique_fd.h"
#include "base/uring_poller.h"
#include "isolators/cgroup_host.h"
#include "isolators/cgroup_values.h"
#include "isolators/cgroupfs.h"
#include "isolators/cgroupfs_twin.h"
#include "isolators/isolator_table.h"
#include "tests/isolators/cgroup_twin_fixture.h"

namespace allot {
namespace {

namespace fs = std::filesystem;

Resources res(const char* text) {
  auto r = Resources::parse(text);
  EXPECT_TRUE(r.ok()) << text;
  return r ? *r : Resources();
}

class FakeCgroups : public CgroupTwinTest {
 protected:
  void make(CgroupMode mode, const std::string& names) {
    host_ = twinCgroupHost(fs_, mode);
    auto made = createIsolatorsOn(host_, names, options_);
    ASSERT_TRUE(made.ok()) << made.error().describe();
    isolators_ = std::move(*made);
  }
  Status prepareAll(const ContainerId& id, const Resources& r, ChildSetup* setup) {
    for (auto& iso : isolators_) {
      if (Status st = iso->prepare(id, r, setup); !st) return st;
    }
    return okStatus();
  }
  Isolator& named(std::string_view name) {
    for (auto& iso : isolators_) {
      if (iso->name() == name) return *iso;
    }
    ADD_FAILURE() << "no isolator " << name;
    return *isolators_.front();
  }
  // What the launcher's child does with prepare()'s setup before it execs:
  // born in the v2 directory, it writes its pid into each v1 cgroup.procs
  // (isolate() leaves that to it).
  void childJoins(const ChildSetup& setup, pid_t pid) {
    for (const auto& f : setup.cgroupProcsFiles) ASSERT_TRUE(fs_->writeFile(f, std::to_string(pid)).ok());
    if (setup.cgroupDirFd < 0) return;
    std::string dir = fs::read_symlink("/proc/self/fd/" + std::to_string(setup.cgroupDirFd)).string();
    ASSERT_TRUE(fs_->writeFile(dir + "/cgroup.procs", std::to_string(pid)).ok());
  }
  // What the agent's worker pool runs before cleanup().
  Status reapAll(const ContainerId& id) {
    for (auto& iso : isolators_) {
      if (auto job = iso->reapJob(id)) {
        if (Status st = job(); !st) return st;
      }
    }
    return okStatus();
  }
  Status cleanupAll(const ContainerId& id) {
    for (auto it = isolators_.rbegin(); it != isolators_.rend(); ++it) {
      if (Status st = (*it)->cleanup(id); !st) return st;
    }
    return okStatus();
  }

  ContainerId id_{"fw-1", "exec/1"};
};

TEST(CgroupValues, CpuWeightsKeepTheProportionsOfCpus) {
  EXPECT_EQ(cpuShares(1), 1024);
  EXPECT_EQ(cpuShares(0.5), 512);
  EXPECT_EQ(cpuShares(1.5), 1536);
  EXPECT_EQ(cpuShares(0), 2);
  EXPECT_EQ(cpuShares(1000), 262144);
  EXPECT_EQ(cpuWeight(1), 100);
  EXPECT_EQ(cpuWeight(0.5), 50);
  EXPECT_EQ(cpuWeight(0.001), 1);
  EXPECT_EQ(cpuWeight(500), 10000);
  EXPECT_EQ(cfsQuotaUs(0.5), 50000);
  EXPECT_EQ(cfsQuotaUs(0.001), kMinCfsQuotaUs);
  EXPECT_EQ(cfsQuotaUs(0), -1);
}

TEST(CgroupValues, MemoryPidsAndBlkio) {
  EXPECT_EQ(memoryBytes(64), 64LL << 20);
  EXPECT_EQ(memoryBytes(0.5), kMinMemoryBytes);
  EXPECT_EQ(memoryBytes(0), -1);
  EXPECT_EQ(pidsMax(0.5, 0), 1024);
  EXPECT_EQ(pidsMax(2.5, 0), 3072);
  EXPECT_EQ(pidsMax(1000, 0), kMaxPids);
  EXPECT_EQ(pidsMax(4, 64), 64);
  EXPECT_EQ(blkioWeightV1(0.01, 0), 10);
  EXPECT_EQ(blkioWeightV1(2, 0), 200);
  EXPECT_EQ(blkioWeightV1(2, 5000), 1000);
  EXPECT_EQ(ioWeightV2(2, 0), 200);
}

TEST(CgroupValues, DeviceLimitsParseAndRejectWithTheEntry) {
  auto ok = parseDeviceLimits("254:0 wbps=1048576 riops=100; 8:16 rbps=5");
  ASSERT_TRUE(ok.ok()) << ok.error().describe();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].device, "254:0");
  EXPECT_EQ((*ok)[0].wbps, 1048576);
  EXPECT_EQ((*ok)[0].riops, 100);
  EXPECT_EQ(ioMaxLine((*ok)[0]), "254:0 rbps=max wbps=1048576 riops=100 wiops=max");
  EXPECT_EQ((*ok)[1].rbps, 5);
  EXPECT_TRUE(parseDeviceLimits("").ok());
  for (const char* bad : {"sda wbps=1", "8:0 speed=1", "8:0 wbps=-1", "8:0 wbps=", "8:0"}) {
    auto r = parseDeviceLimits(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
  }
}

// The name is base/files.h's containerName() (tested there for
// injectivity): isolators, sandboxes and checkpoints agree on it.
TEST(ContainerIdTest, NameIsTheOneContainerName) {
  EXPECT_EQ((ContainerId{"fw-1", "exec/1"}).name(), "fw-1.exec%2F1");
  EXPECT_EQ((ContainerId{"", "x y"}).name(), "%.x%20y");
  EXPECT_EQ((ContainerId{"..", ".."}).name(), "%2E%2E.%2E%2E");
  EXPECT_NE((ContainerId{"a.b", "c"}).name(), (ContainerId{"a", "b.c"}).name());
  EXPECT_NE((ContainerId{"a/b", "c"}).name(), (ContainerId{"a_b", "c"}).name());
  EXPECT_EQ((ContainerId{"f", "e"}).name(), containerName("f", "e"));
}

TEST_F(FakeCgroups, UnknownNamesListTheValidOnes) {
  host_ = twinCgroupHost(fs_, CgroupMode::kLegacy);
  auto made = createIsolatorsOn(host_, "cgroups/cpu,cgroups/gpu", options_);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().message.find("cgroups/gpu"), std::string::npos);
  EXPECT_NE(made.error().message.find("cgroups/cpu, cgroups/mem, cgroups/blkio, cgroups/pids"),
            std::string::npos)
      << made.error().message;
  EXPECT_EQ(knownIsolators().front(), "cgroups/cpu");
}

TEST_F(FakeCgroups, MissingControllerIsRefusedWithTheReason) {
  host_ = twinCgroupHost(fs_, CgroupMode::kLegacy);
  host_.v1.erase("pids");
  auto made = createIsolatorsOn(host_, "cgroups/pids", options_);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().message.find("pids controller"), std::string::npos) << made.error().message;
  IsolatorOptions noPoller = options_;
  noPoller.poller = nullptr;
  EXPECT_FALSE(createIsolatorsOn(host_, "cgroups/mem", noPoller).ok());
  IsolatorOptions badLimits = options_;
  badLimits.blkioLimits = "sda wbps=1";
  EXPECT_FALSE(createIsolatorsOn(host_, "cgroups/blkio", badLimits).ok());
}

TEST_F(FakeCgroups, TableOrderWinsOverFlagOrder) {
  make(CgroupMode::kLegacy, "cgroups/pids, cgroups/cpu,cgroups/mem");
  ASSERT_EQ(isolators_.size(), 4u);
  EXPECT_EQ(isolators_[0]->name(), "containment") << "always first";
  EXPECT_EQ(isolators_[1]->name(), "cgroups/cpu");
  EXPECT_EQ(isolators_[2]->name(), "cgroups/mem");
  EXPECT_EQ(isolators_[3]->name(), "cgroups/pids");
}

TEST_F(FakeCgroups, V1WritesEachControllersFilesAndFollowsTheTasks) {
  options_.cfsQuota = true;
  options_.blkioLimits = "254:0 wbps=1048576";
  make(CgroupMode::kLegacy, "cgroups/cpu,cgroups/mem,cgroups/blkio,cgroups/pids");
  ChildSetup setup;
  ASSERT_TRUE(prepareAll(id_, res("cpus:0.5;mem:64"), &setup).ok());
  std::string c = "/allot/fw-1.exec%2F1/";
  EXPECT_EQ(read(dir_ + "/cpu" + c + "cpu.shares"), "512");
  EXPECT_EQ(read(dir_ + "/cpu" + c + "cpu.cfs_quota_us"), "50000");
  EXPECT_EQ(read(dir_ + "/cpu" + c + "cpu.cfs_period_us"), "100000");
  EXPECT_EQ(read(dir_ + "/memory" + c + "memory.limit_in_bytes"), std::to_string(64 << 20));
  EXPECT_EQ(read(dir_ + "/pids" + c + "pids.max"), "1024");
  EXPECT_EQ(read(dir_ + "/blkio" + c + "blkio.weight"), "50");
  EXPECT_EQ(read(dir_ + "/blkio" + c + "blkio.throttle.write_bps_device"), "254:0 1048576");
  EXPECT_EQ(read(dir_ + "/blkio" + c + "blkio.throttle.read_bps_device"), "254:0 0");
  EXPECT_EQ(setup.cgroupDirFd, -1);
  // cpu, cpuacct, memory, blkio, pids, freezer: each once, however many isolators.
  EXPECT_EQ(setup.cgroupProcsFiles.size(), 6u);

  // A second task raises the limits at once.
  for (auto& iso : isolators_) ASSERT_TRUE(iso->update(id_, res("cpus:1.5;mem:128")).ok());
  EXPECT_EQ(read(dir_ + "/cpu" + c + "cpu.shares"), "1536");
  EXPECT_EQ(read(dir_ + "/memory" + c + "memory.limit_in_bytes"), std::to_string(128 << 20));
  EXPECT_EQ(read(dir_ + "/pids" + c + "pids.max"), "2048");

  ASSERT_TRUE(cleanupAll(id_).ok());
  for (const char* h : {"cpu", "cpuacct", "memory", "blkio", "pids", "freezer"}) {
    EXPECT_FALSE(fs::exists(dir_ + "/" + h + c)) << h;
  }
  EXPECT_TRUE(cleanupAll(id_).ok()) << "cleanup is idempotent";
}

TEST_F(FakeCgroups, V2WritesOneDirectoryAndEnablesControllersOnlyBelowItsRoot) {
  options_.cfsQuota = true;
  options_.blkioLimits = "8:0 riops=10";
  options_.pidsMax = 99;
  make(CgroupMode::kUnified, "cgroups/cpu,cgroups/mem,cgroups/blkio,cgroups/pids");
  EXPECT_EQ(read(dir_ + "/unified/allot/cgroup.subtree_control"), "+cpu +io +memory +pids");
  EXPECT_FALSE(fs::exists(dir_ + "/unified/cgroup.subtree_control")) << "never above the root";
  ChildSetup setup;
  ASSERT_TRUE(prepareAll(id_, res("cpus:2;mem:256"), &setup).ok());
  std::string d = dir_ + "/unified/allot/fw-1.exec%2F1/";
  EXPECT_EQ(read(d + "cpu.weight"), "200");
  EXPECT_EQ(read(d + "cpu.max"), "200000 100000");
  EXPECT_EQ(read(d + "memory.max"), std::to_string(256 << 20));
  EXPECT_EQ(read(d + "memory.oom.group"), "1");
  EXPECT_EQ(read(d + "memory.swap.max"), "0");
  EXPECT_EQ(read(d + "io.weight"), "default 200");
  EXPECT_EQ(read(d + "io.max"), "8:0 rbps=max wbps=max riops=10 wiops=max");
  EXPECT_EQ(read(d + "pids.max"), "99");
  EXPECT_GE(setup.cgroupDirFd, 0);
  EXPECT_TRUE(setup.cgroupProcsFiles.empty());
  ASSERT_TRUE(cleanupAll(id_).ok());
  EXPECT_FALSE(fs::exists(d));
}

TEST_F(FakeCgroups, UsageReadsEveryControllersCounters) {
  make(CgroupMode::kUnified, "cgroups/cpu,cgroups/mem,cgroups/blkio,cgroups/pids");
  ChildSetup setup;
  ASSERT_TRUE(prepareAll(id_, res("cpus:1;mem:64"), &setup).ok());
  std::string d = dir_ + "/unified/allot/fw-1.exec%2F1/";
  ASSERT_TRUE(fs_->writeFile(d + "cpu.stat", "usage_usec 1500000\nuser_usec 1000000\n").ok());
  ASSERT_TRUE(fs_->writeFile(d + "memory.current", "1048576\n").ok());
  ASSERT_TRUE(fs_->writeFile(d + "memory.peak", "2097152\n").ok());
  ASSERT_TRUE(fs_->writeFile(d + "io.stat", "8:0 rbytes=10 wbytes=20 rios=1 wios=2\n"
                                                 "8:16 rbytes=5 wbytes=7 rios=1 wios=1\n").ok());
  ASSERT_TRUE(fs_->writeFile(d + "pids.current", "3\n").ok());
  wire::ResourceUsage usage;
  for (auto& iso : isolators_) ASSERT_TRUE(iso->usage(id_, &usage).ok()) << iso->name();
  EXPECT_DOUBLE_EQ(usage.cpu_time_s(), 1.5);
  EXPECT_EQ(usage.mem_bytes(), 1048576u);
  EXPECT_EQ(usage.mem_peak_bytes(), 2097152u);
  EXPECT_EQ(usage.io_read_bytes(), 15u);
  EXPECT_EQ(usage.io_write_bytes(), 27u);
  EXPECT_EQ(usage.processes(), 3u);
  ASSERT_TRUE(cleanupAll(id_).ok());
  // A vanished file is an error naming it, not a crash.
  wire::ResourceUsage after;
  Status st = named("cgroups/cpu").usage(id_, &after);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("cpu.stat"), std::string::npos);
}

TEST_F(FakeCgroups, V2OomEventEndsTheContainerOnceWithTheMemoryReason) {
  make(CgroupMode::kUnified, "cgroups/mem");
  ChildSetup setup;
  ASSERT_TRUE(prepareAll(id_, res("cpus:1;mem:64"), &setup).ok());
  std::string d = dir_ + "/unified/allot/fw-1.exec%2F1/";
  ASSERT_TRUE(fs_->writeFile(d + "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n").ok());
  ASSERT_TRUE(fs_->writeFile(d + "memory.current", "67100000\n").ok());
  ASSERT_TRUE(fs_->writeFile(d + "memory.peak", "67108864\n").ok());
  std::vector<Limitation> seen;
  ASSERT_TRUE(named("cgroups/mem").watch(id_, [&](const Limitation& l) { seen.push_back(l); }).ok());
  EXPECT_TRUE(named("cgroups/mem").watch(id_, [&](const Limitation& l) { seen.push_back(l); }).ok());
  io_.run_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(seen.empty()) << "no OOM yet";
  ASSERT_TRUE(fs_->writeFile(d + "memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n").ok());
  for (int i = 0; i < 100 && seen.empty(); ++i) io_.run_for(std::chrono::milliseconds(10));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].reason, wire::REASON_MEMORY_LIMIT);
  EXPECT_NE(seen[0].message.find("64 MiB"), std::string::npos) << seen[0].message;
  EXPECT_EQ(seen[0].usage.mem_peak_bytes(), 67108864u);
  ASSERT_TRUE(fs_->writeFile(d + "memory.events", "oom 2\noom_kill 2\n").ok());
  io_.run_for(std::chrono::milliseconds(50));
  EXPECT_EQ(seen.size(), 1u) << "at most once per container";
  ASSERT_TRUE(cleanupAll(id_).ok());
  EXPECT_EQ(poller_->watchCount(), 0u);
}

TEST_F(FakeCgroups, CpusetGivesWholeCpusTheirOwnCoresAndSharesTheRest) {
  make(CgroupMode::kLegacy, "cgroups/cpuset");
  ASSERT_TRUE(fs_->writeFile(dir_ + "/cpuset/allot/cpuset.cpus", "0-3\n").ok());
  ContainerId a{"fw", "a"}, b{"fw", "b"}, c{"fw", "c"};
  ChildSetup sa, sb, sc;
  auto cpus = [&](const ContainerId& id) { return read(dir_ + "/cpuset/allot/" + id.name() + "/cpuset.cpus"); };
  ASSERT_TRUE(prepareAll(a, res("cpus:2"), &sa).ok());
  ASSERT_TRUE(prepareAll(b, res("cpus:0.5"), &sb).ok());
  EXPECT_EQ(cpus(a), "0,1");
  EXPECT_EQ(cpus(b), "2,3");
  // Two more whole cpus would leave no shared core: c shares.
  ASSERT_TRUE(prepareAll(c, res("cpus:2"), &sc).ok());
  EXPECT_EQ(cpus(c), "2,3");
  // a's task ended: it shares now, and everyone sharing gets its cores.
  ASSERT_TRUE(named("cgroups/cpuset").update(a, res("cpus:0.5")).ok());
  EXPECT_EQ(cpus(a), "0,1,2,3");
  EXPECT_EQ(cpus(b), "0,1,2,3");
  // c asks again (a new task): now it fits.
  ASSERT_TRUE(named("cgroups/cpuset").update(c, res("cpus:3")).ok());
  EXPECT_EQ(cpus(c), "0,1,2");
  EXPECT_EQ(cpus(b), "3");
  ASSERT_TRUE(cleanupAll(c).ok());
  EXPECT_EQ(cpus(b), "0,1,2,3");
  ASSERT_TRUE(cleanupAll(a).ok());
  ASSERT_TRUE(cleanupAll(b).ok());
}

// An executor that ended has its cgroups removed off the loop before its
// cleanup() reaches the cpuset isolator: a launch meanwhile (which rewrites
// every sharing executor's cpuset) must not fail on the removed one.
TEST_F(FakeCgroups, CpusetSkipsASharingExecutorWhoseCgroupIsAlreadyGone) {
  make(CgroupMode::kLegacy, "cgroups/cpuset");
  ASSERT_TRUE(fs_->writeFile(dir_ + "/cpuset/allot/cpuset.cpus", "0-3\n").ok());
  ContainerId gone{"fw", "gone"}, next{"fw", "next"};
  ChildSetup sg, sn;
  ASSERT_TRUE(prepareAll(gone, res("cpus:0.5"), &sg).ok());
  fs::remove_all(dir_ + "/cpuset/allot/" + gone.name());
  Status st = prepareAll(next, res("cpus:1"), &sn);
  ASSERT_TRUE(st.ok()) << st.error().describe();
  EXPECT_EQ(read(dir_ + "/cpuset/allot/" + next.name() + "/cpuset.cpus"), "0");
  ASSERT_TRUE(cleanupAll(next).ok());
}

TEST_F(FakeCgroups, RecoverDestroysUnknownContainersOnly) {
  make(CgroupMode::kLegacy, "cgroups/cpu,cgroups/pids");
  ChildSetup a, b;
  ContainerId known{"fw", "keep"}, orphan{"fw", "orphan"};
  ASSERT_TRUE(prepareAll(known, res("cpus:1"), &a).ok());
  ASSERT_TRUE(prepareAll(orphan, res("cpus:1"), &b).ok());
  for (auto& iso : isolators_) ASSERT_TRUE(iso->recover({known}).ok());
  EXPECT_TRUE(fs::exists(dir_ + "/cpu/allot/fw.keep"));
  EXPECT_TRUE(fs::exists(dir_ + "/pids/allot/fw.keep"));
  EXPECT_FALSE(fs::exists(dir_ + "/cpu/allot/fw.orphan"));
  EXPECT_FALSE(fs::exists(dir_ + "/freezer/allot/fw.orphan"));
  ASSERT_TRUE(cleanupAll(known).ok());
}

}  // namespace
}  // namespace allot

namespace allot {
namespace {

TEST_F(FakeCgroups, CfsQuotaWithoutBandwidthControlIsRefused) {
  fs_->withoutFile("cpu.cfs_quota_us");
  host_ = twinCgroupHost(fs_, CgroupMode::kLegacy);
  options_.cfsQuota = true;
  auto made = createIsolatorsOn(host_, "cgroups/cpu", options_);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().message.find("cpu.cfs_quota_us"), std::string::npos) << made.error().message;
  options_.cfsQuota = false;
  EXPECT_TRUE(createIsolatorsOn(host_, "cgroups/cpu", options_).ok());
}

TEST_F(FakeCgroups, V1CleanupFreezesKillsEveryMemberAndRemovesEveryDirectory) {
  make(CgroupMode::kLegacy, "cgroups/cpu,cgroups/mem");
  ChildSetup setup;
  ASSERT_TRUE(prepareAll(id_, res("cpus:1;mem:64"), &setup).ok());
  childJoins(setup, 4242);
  for (auto& iso : isolators_) ASSERT_TRUE(iso->isolate(id_, 4242).ok());
  // A process the executor forked after it joined.
  std::string c = "/allot/fw-1.exec%2F1";
  ASSERT_TRUE(fs_->writeFile(dir_ + "/freezer" + c + "/cgroup.procs", "4343").ok());
  ASSERT_TRUE(fs_->writeFile(dir_ + "/memory" + c + "/cgroup.procs", "4343").ok());
  EXPECT_EQ(read(dir_ + "/cpu" + c + "/cgroup.procs"), "4242\n") << "joined once, however many isolators";
  ASSERT_TRUE(reapAll(id_).ok());
  EXPECT_FALSE(fs::exists(dir_ + "/freezer" + c)) << "the reap removed it";
  ASSERT_TRUE(cleanupAll(id_).ok());
  std::set<pid_t> killed;
  for (auto [pid, sig] : fs_->signals()) {
    if (sig == SIGKILL) killed.insert(pid);
  }
  EXPECT_EQ(killed, (std::set<pid_t>{4242, 4343}));
  for (const char* h : {"cpu", "cpuacct", "memory", "freezer"}) EXPECT_FALSE(fs::exists(dir_ + "/" + h + c)) << h;
}

// cleanup() runs on the agent's loop: when the reap could not end a
// process, it kills once, tries one rmdir and says which directory is
// still busy, without the reap's waits (2 s for the kill, 1 s of rmdir
// retries). The reap itself fails after its bounded wait, naming it too.
TEST_F(FakeCgroups, CleanupNeverWaitsForAProcessThatDoesNotDie) {
  make(CgroupMode::kHybrid, "cgroups/cpu,cgroups/mem");
  ChildSetup setup;
  ASSERT_TRUE(prepareAll(id_, res("cpus:1;mem:64"), &setup).ok());
  childJoins(setup, 4242);
  fs_->unkillable(4242);
  auto started = std::chrono::steady_clock::now();
  Status st = cleanupAll(id_);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(500));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().describe().find("still has processes"), std::string::npos) << st.error().describe();
  EXPECT_TRUE(fs::exists(dir_ + "/unified/allot/fw-1.exec%2F1"));
  Status reaped = reapAll(id_);
  ASSERT_FALSE(reaped.ok());
  EXPECT_NE(reaped.error().describe().find("still has processes 2 s after the kill"), std::string::npos)
      << reaped.error().describe();
}

// The agent starts executors without waiting for their exec
// (Launcher::start), so isolate() must neither race the child's own joins
// nor block the loop on a v1 cgroup.procs write: it writes nothing.
TEST_F(FakeCgroups, IsolateLeavesJoiningToTheChildsSetup) {
  make(CgroupMode::kHybrid, "cgroups/cpu,cgroups/mem");
  ChildSetup setup;
  ASSERT_TRUE(prepareAll(id_, res("cpus:1;mem:64"), &setup).ok());
  for (auto& iso : isolators_) ASSERT_TRUE(iso->isolate(id_, 4242).ok());
  std::string c = "/allot/fw-1.exec%2F1/cgroup.procs";
  for (const char* h : {"/cpu", "/memory", "/freezer", "/unified"}) {
    EXPECT_EQ(read(dir_ + h + c), "<missing " + dir_ + h + c + ">") << h;
  }
  EXPECT_GE(setup.cgroupDirFd, 0);
  EXPECT_EQ(setup.cgroupProcsFiles.size(), 4u) << "cpu, cpuacct, memory, freezer: the child's";
  ASSERT_TRUE(cleanupAll(id_).ok());
}

TEST_F(FakeCgroups, V2CleanupKillsTheGroupThroughCgroupKill) {
  make(CgroupMode::kUnified, "cgroups/pids");
  ChildSetup setup;
  ASSERT_TRUE(prepareAll(id_, res("cpus:1"), &setup).ok());
  childJoins(setup, 4242);
  ASSERT_TRUE(named("cgroups/pids").isolate(id_, 4242).ok());
  ASSERT_TRUE(cleanupAll(id_).ok());
  EXPECT_TRUE(fs_->signals().empty()) << "cgroup.kill, no pid by pid";
  EXPECT_FALSE(fs::exists(dir_ + "/unified/allot/fw-1.exec%2F1"));
}

TEST_F(FakeCgroups, V2WithoutCgroupKillSignalsEveryMember) {
  fs_->withoutFile("cgroup.kill");
  make(CgroupMode::kUnified, "cgroups/pids");
  ChildSetup setup;
  ASSERT_TRUE(prepareAll(id_, res("cpus:1"), &setup).ok());
  childJoins(setup, 4242);
  ASSERT_TRUE(named("cgroups/pids").isolate(id_, 4242).ok());
  ASSERT_TRUE(cleanupAll(id_).ok());
  ASSERT_FALSE(fs_->signals().empty());
  EXPECT_EQ(fs_->signals().front(), std::make_pair(pid_t{4242}, SIGKILL));
}

TEST_F(FakeCgroups, HybridHostSplitsControllersBetweenV1AndV2) {
  host_ = twinCgroupHost(fs_, CgroupMode::kHybrid);
  host_.v1.erase("pids");
  host_.v2Usable = {"pids"};
  auto made = createIsolatorsOn(host_, "cgroups/cpu,cgroups/mem,cgroups/pids", options_);
  ASSERT_TRUE(made.ok()) << made.error().describe();
  isolators_ = std::move(*made);
  EXPECT_EQ(read(dir_ + "/unified/allot/cgroup.subtree_control"), "+pids");
  ChildSetup setup;
  ASSERT_TRUE(prepareAll(id_, res("cpus:1;mem:32"), &setup).ok());
  std::string c = "/allot/fw-1.exec%2F1/";
  EXPECT_EQ(read(dir_ + "/cpu" + c + "cpu.shares"), "1024");
  EXPECT_EQ(read(dir_ + "/memory" + c + "memory.limit_in_bytes"), std::to_string(32 << 20));
  EXPECT_EQ(read(dir_ + "/unified" + c + "pids.max"), "1024");
  EXPECT_FALSE(fs::exists(dir_ + "/unified" + c + "cpu.weight"));
  EXPECT_GE(setup.cgroupDirFd, 0) << "born in its v2 cgroup";
  EXPECT_EQ(setup.cgroupProcsFiles.size(), 4u) << "cpu, cpuacct, memory, freezer";
  for (auto& iso : isolators_) ASSERT_TRUE(iso->update(id_, res("cpus:2;mem:64")).ok());
  EXPECT_EQ(read(dir_ + "/cpu" + c + "cpu.shares"), "2048");
  EXPECT_EQ(read(dir_ + "/unified" + c + "pids.max"), "2048");
  ASSERT_TRUE(cleanupAll(id_).ok());
  EXPECT_FALSE(fs::exists(dir_ + "/unified" + c));
  EXPECT_FALSE(fs::exists(dir_ + "/cpu" + c));
}

}  // namespace
}  // namespace allot

namespace allot {
namespace {

TEST_F(FakeCgroups, EveryExecutorGetsATrackingCgroupWithNoIsolation) {
  make(CgroupMode::kHybrid, "");
  ASSERT_EQ(isolators_.size(), 1u);
  EXPECT_EQ(isolators_[0]->name(), "containment");
  ChildSetup setup;
  ASSERT_TRUE(prepareAll(id_, res("cpus:1"), &setup).ok());
  EXPECT_GE(setup.cgroupDirFd, 0) << "born in its cgroup2 directory";
  EXPECT_TRUE(setup.cgroupProcsFiles.empty()) << "no v1 hierarchy without a v1 controller";
  std::string d = dir_ + "/unified/allot/fw-1.exec%2F1";
  EXPECT_TRUE(fs::exists(d));
  EXPECT_FALSE(fs::exists(dir_ + "/unified/allot/cgroup.subtree_control")) << "no controller enabled";
  childJoins(setup, 4242);
  ASSERT_TRUE(isolators_[0]->isolate(id_, 4242).ok());
  auto job = isolators_[0]->reapJob(id_);
  ASSERT_TRUE(job);
  ASSERT_TRUE(job().ok());
  EXPECT_FALSE(fs::exists(d)) << "the reap job kills and removes";
  EXPECT_TRUE(cleanupAll(id_).ok());
}

TEST_F(FakeCgroups, LegacyHostTracksExecutorsWithTheFreezer) {
  make(CgroupMode::kLegacy, "");
  ChildSetup setup;
  ASSERT_TRUE(prepareAll(id_, res("cpus:1"), &setup).ok());
  ASSERT_EQ(setup.cgroupProcsFiles.size(), 1u);
  EXPECT_EQ(setup.cgroupProcsFiles[0], dir_ + "/freezer/allot/fw-1.exec%2F1/cgroup.procs");
  childJoins(setup, 4242);
  ASSERT_TRUE(isolators_[0]->isolate(id_, 4242).ok());
  ASSERT_TRUE(isolators_[0]->reapJob(id_)().ok());
  ASSERT_EQ(fs_->signals().size(), 1u);
  EXPECT_EQ(fs_->signals()[0], std::make_pair(pid_t{4242}, SIGKILL));
  EXPECT_EQ(read(dir_ + "/freezer/allot/fw-1.exec%2F1/freezer.state"), "<missing " + dir_ + "/freezer/allot/fw-1.exec%2F1/freezer.state>");
}

TEST_F(FakeCgroups, NoCgroupToHoldExecutorsIsAnError) {
  host_ = twinCgroupHost(fs_, CgroupMode::kLegacy);
  host_.v1.erase("freezer");
  auto made = createIsolatorsOn(host_, "", options_);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().message.find("freezer"), std::string::npos);
}

// A cgroup file write the kernel interrupts for a pending signal (EINTR;
// here: a write blocked on a full pipe, reopened through /proc/self/fd,
// and a signal whose handler does not restart calls) is tried again.
void noteSignal(int) {}

TEST(CgroupFsWrite, AWriteInterruptedByASignalIsTriedAgain) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  UniqueFd readEnd(fds[0]), writeEnd(fds[1]);
  int capacity = fcntl(writeEnd.get(), F_GETPIPE_SZ);
  ASSERT_GT(capacity, 0);
  std::string fill(static_cast<size_t>(capacity), 'x');
  ASSERT_EQ(write(writeEnd.get(), fill.data(), fill.size()), static_cast<ssize_t>(fill.size()));
  struct sigaction action {}, previous {};
  action.sa_handler = noteSignal;  // no SA_RESTART: a blocked write returns EINTR
  ASSERT_EQ(sigaction(SIGUSR2, &action, &previous), 0);
  pthread_t writer = pthread_self();
  std::thread helper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    pthread_kill(writer, SIGUSR2);  // interrupts the blocked write
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::string drained(static_cast<size_t>(capacity), '\0');
    (void)!read(readEnd.get(), drained.data(), drained.size());  // lets the next attempt through
  });
  Status st = cgroupfs::writeFile("/proc/self/fd/" + std::to_string(writeEnd.get()), "12345");
  helper.join();
  sigaction(SIGUSR2, &previous, nullptr);
  EXPECT_TRUE(st.ok()) << st.error().describe();
}

}  // namespace
}  // namespace allot
