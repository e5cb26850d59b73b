// Unit tests of disk/du (no root): diskUsage() against a temp dir and
// against du(1) itself, and the isolator's checks on a real worker pool
// with a short interval (where the scan runs, how often the limit fires,
// updates, cleanup, recovery).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "base/asio.h"
#include "base/worker_pool.h"
#include "isolators/disk_isolator.h"
#include "isolators/disk_usage.h"
#include "isolators/isolator_table.h"

namespace allot {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1024 * 1024;

// `bytes` of non-zero data, on disk (fsync: allocated, not only reserved).
void writeFile(const std::string& path, size_t bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path;
  std::string chunk(64 * 1024, 'x');
  for (size_t done = 0; done < bytes; done += chunk.size()) {
    size_t n = std::min(chunk.size(), bytes - done);
    ASSERT_EQ(::write(fd, chunk.data(), n), static_cast<ssize_t>(n));
  }
  ::fsync(fd);
  ::close(fd);
}

uint64_t blocksOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

// What du(1) says, in bytes of allocated blocks, one filesystem.
uint64_t duBytes(const std::string& path) {
  std::string cmd = "du -s -x -B1 '" + path + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return 0;
  unsigned long long bytes = 0;
  if (std::fscanf(p, "%llu", &bytes) != 1) bytes = 0;
  ::pclose(p);
  return bytes;
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot-disk-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

using DiskUsageTest = TempDir;

TEST_F(DiskUsageTest, CountsWhatDuCounts) {
  writeFile(dir_ + "/a", 3 * kMiB);
  fs::create_directories(dir_ + "/sub/deeper");
  writeFile(dir_ + "/sub/b", 100 * 1024);
  writeFile(dir_ + "/sub/deeper/c", 1);
  fs::create_symlink("a", dir_ + "/link");
  auto got = diskUsage(dir_);
  ASSERT_TRUE(got.ok()) << got.error().describe();
  EXPECT_FALSE(got->stopped);
  EXPECT_FALSE(got->tooDeep);
  EXPECT_GE(got->bytes, 3 * kMiB + 100 * 1024);
  EXPECT_EQ(got->bytes, duBytes(dir_));
}

TEST_F(DiskUsageTest, CountsAHardLinkedFileOnce) {
  writeFile(dir_ + "/a", 2 * kMiB);
  auto before = diskUsage(dir_);
  ASSERT_TRUE(before.ok());
  fs::create_directory(dir_ + "/sub");
  fs::create_hard_link(dir_ + "/a", dir_ + "/sub/a2");
  fs::create_hard_link(dir_ + "/a", dir_ + "/a3");
  auto after = diskUsage(dir_);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->bytes, before->bytes + blocksOf(dir_ + "/sub"));
  EXPECT_EQ(after->bytes, duBytes(dir_));
}

TEST_F(DiskUsageTest, NeverFollowsSymlinks) {
  std::string outside = dir_ + "/outside";
  std::string sandbox = dir_ + "/sandbox";
  fs::create_directories(outside);
  fs::create_directories(sandbox);
  writeFile(outside + "/big", 4 * kMiB);
  fs::create_symlink(outside + "/big", sandbox + "/to-file");
  fs::create_symlink(outside, sandbox + "/to-dir");
  auto got = diskUsage(sandbox);
  ASSERT_TRUE(got.ok());
  EXPECT_LT(got->bytes, kMiB);
  // The sandbox itself a symlink: refused, not followed.
  fs::create_symlink(outside, dir_ + "/sandbox-link");
  EXPECT_FALSE(diskUsage(dir_ + "/sandbox-link").ok());
}

TEST_F(DiskUsageTest, ASparseFileCountsWhatItUses) {
  int fd = ::open((dir_ + "/sparse").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 1024 * static_cast<off_t>(kMiB)), 0);
  ::close(fd);
  auto got = diskUsage(dir_);
  ASSERT_TRUE(got.ok());
  EXPECT_LT(got->bytes, kMiB);
}

TEST_F(DiskUsageTest, StopsOncePastTheLimit) {
  for (int i = 0; i < 20; ++i) writeFile(dir_ + "/f" + std::to_string(i), kMiB);
  auto got = diskUsage(dir_, 3 * kMiB);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->stopped);
  EXPECT_GT(got->bytes, 3 * kMiB);
  EXPECT_LT(got->bytes, 6 * kMiB);  // stopped at the first file past the limit
  auto all = diskUsage(dir_);
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->stopped);
  EXPECT_GE(all->bytes, 20 * kMiB);
}

TEST_F(DiskUsageTest, SaysWhenDirectoriesNestTooDeep) {
  std::string path = dir_;
  for (size_t i = 0; i < kDiskUsageDepthMax + 5; ++i) {
    path += "/d";
    ASSERT_EQ(::mkdir(path.c_str(), 0755), 0) << i;
  }
  auto got = diskUsage(dir_);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->tooDeep);
}

TEST_F(DiskUsageTest, AMissingDirectoryIsAnError) {
  auto got = diskUsage(dir_ + "/nope");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().describe().find(dir_ + "/nope"), std::string::npos) << got.error().describe();
}

// The isolator on a real pool and loop, checking every 10 ms.
class DiskIsolatorTest : public TempDir {
 protected:
  void SetUp() override {
    TempDir::SetUp();
    sandbox_ = dir_ + "/sandbox";
    fs::create_directories(sandbox_);
    loopThread_ = std::this_thread::get_id();
    iso_ = makeDiskIsolator(io_, pool_, 10ms, [this](const std::string& path, uint64_t stopAt) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        scanThreads_.insert(std::this_thread::get_id());
        stopAts_.push_back(stopAt);
      }
      ++scans_;
      while (holdScans_) std::this_thread::sleep_for(1ms);
      return diskUsage(path, stopAt);
    });
  }
  void TearDown() override {
    holdScans_ = false;
    iso_.reset();
    TempDir::TearDown();
  }
  // Runs the loop until `done` or `limit` passes.
  void runUntil(const std::function<bool()>& done, Duration limit = 5s) {
    auto end = SteadyClock::now() + limit;
    while (!done() && SteadyClock::now() < end) {
      io_.restart();
      io_.run_for(5ms);
    }
  }
  void prepareAndWatch(const Resources& limits) {
    ASSERT_TRUE(iso_->prepare(id_, ContainerConfig(limits, sandbox_), nullptr).ok());
    ASSERT_TRUE(iso_->isolate(id_, 1).ok());
    ASSERT_TRUE(iso_->watch(id_, [this](const Limitation& l) { limits_.push_back(l); }).ok());
  }

  asio::io_context io_;
  WorkerPool pool_{io_, {.threads = 1, .queueMax = 16}};
  std::unique_ptr<Isolator> iso_;
  ContainerId id_{"fw", "ex"};
  std::string sandbox_;
  std::thread::id loopThread_;
  std::mutex mu_;
  std::set<std::thread::id> scanThreads_;
  std::vector<uint64_t> stopAts_;
  std::atomic<int> scans_{0};
  std::atomic<bool> holdScans_{false};  // scans wait while set
  std::vector<Limitation> limits_;
};

Resources res(const char* text) { return *Resources::parse(text); }

TEST_F(DiskIsolatorTest, ASandboxPastItsLimitEndsTheContainerOnceWithTheReason) {
  prepareAndWatch(res("cpus:1;disk:2"));
  writeFile(sandbox_ + "/blob", 3 * kMiB);
  runUntil([&] { return !limits_.empty(); });
  ASSERT_EQ(limits_.size(), 1u);
  EXPECT_EQ(limits_[0].reason, wire::REASON_DISK_LIMIT);
  EXPECT_NE(limits_[0].message.find("disk limit 2.0 MiB exceeded"), std::string::npos) << limits_[0].message;
  EXPECT_NE(limits_[0].message.find("holds"), std::string::npos) << limits_[0].message;
  EXPECT_GT(limits_[0].usage.disk_bytes(), 2 * kMiB);
  int scansThen = scans_;
  runUntil([] { return false; }, 100ms);
  EXPECT_EQ(limits_.size(), 1u);
  EXPECT_EQ(scans_, scansThen) << "a limited sandbox is not scanned again";
}

TEST_F(DiskIsolatorTest, ScansRunOnTheWorkerNeverOnTheLoop) {
  prepareAndWatch(res("disk:100"));
  runUntil([&] { return scans_ >= 3; });
  ASSERT_GE(scans_, 3);
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_FALSE(scanThreads_.count(loopThread_));
  for (uint64_t stopAt : stopAts_) EXPECT_EQ(stopAt, 100 * kMiB);
}

TEST_F(DiskIsolatorTest, ASandboxUnderItsLimitRunsAndReportsItsUsage) {
  prepareAndWatch(res("disk:8"));
  writeFile(sandbox_ + "/blob", 2 * kMiB);
  runUntil([&] { return scans_ >= 3; });
  runUntil([] { return false; }, 30ms);
  EXPECT_TRUE(limits_.empty());
  wire::ResourceUsage usage;
  ASSERT_TRUE(iso_->usage(id_, &usage).ok());
  EXPECT_GE(usage.disk_bytes(), 2 * kMiB);
  EXPECT_LT(usage.disk_bytes(), 3 * kMiB);
}

TEST_F(DiskIsolatorTest, WithoutADiskResourceItMeasuresButNeverLimits) {
  prepareAndWatch(res("cpus:1;mem:64"));
  writeFile(sandbox_ + "/blob", 3 * kMiB);
  runUntil([&] { return scans_ >= 3; });
  runUntil([] { return false; }, 30ms);
  EXPECT_TRUE(limits_.empty());
  wire::ResourceUsage usage;
  ASSERT_TRUE(iso_->usage(id_, &usage).ok());
  EXPECT_GE(usage.disk_bytes(), 3 * kMiB);
}

TEST_F(DiskIsolatorTest, AnUpdateMovesTheLimit) {
  prepareAndWatch(res("disk:1"));
  ASSERT_TRUE(iso_->update(id_, res("disk:10")).ok());  // a second task joined
  writeFile(sandbox_ + "/blob", 3 * kMiB);
  runUntil([&] { return scans_ >= 3; });
  runUntil([] { return false; }, 30ms);
  EXPECT_TRUE(limits_.empty());
  ASSERT_TRUE(iso_->update(id_, res("disk:2")).ok());  // it ended
  runUntil([&] { return !limits_.empty(); });
  ASSERT_EQ(limits_.size(), 1u);
  EXPECT_NE(limits_[0].message.find("disk limit 2.0 MiB"), std::string::npos) << limits_[0].message;
}

TEST_F(DiskIsolatorTest, CleanupStopsTheChecksAndDropsAScanInFlight) {
  prepareAndWatch(res("disk:1"));
  writeFile(sandbox_ + "/blob", 3 * kMiB);
  holdScans_ = true;
  runUntil([&] { return scans_ >= 1; });
  ASSERT_TRUE(iso_->cleanup(id_).ok());  // while its scan runs
  holdScans_ = false;
  int scansThen = scans_;
  runUntil([] { return false; }, 60ms);
  EXPECT_TRUE(limits_.empty()) << "a result for a cleaned-up container fired";
  EXPECT_LE(scans_, scansThen + 1);
  wire::ResourceUsage usage;
  ASSERT_TRUE(iso_->usage(id_, &usage).ok());
  EXPECT_EQ(usage.disk_bytes(), 0u);
}

TEST_F(DiskIsolatorTest, RecoveredContainersAreCheckedAgainstTheirCheckpointedLimits) {
  writeFile(sandbox_ + "/blob", 3 * kMiB);
  ASSERT_TRUE(iso_->recover({KnownContainer(id_, ContainerConfig(res("disk:2"), sandbox_)),
                             KnownContainer(ContainerId{"fw", "no-sandbox"})})
                  .ok());
  ASSERT_TRUE(iso_->watch(id_, [this](const Limitation& l) { limits_.push_back(l); }).ok());
  runUntil([&] { return !limits_.empty(); });
  ASSERT_EQ(limits_.size(), 1u);
  EXPECT_EQ(limits_[0].reason, wire::REASON_DISK_LIMIT);
}

TEST_F(DiskIsolatorTest, PrepareWithoutASandboxIsAnError) {
  EXPECT_FALSE(iso_->prepare(id_, ContainerConfig(res("disk:1")), nullptr).ok());
  EXPECT_FALSE(iso_->watch(id_, [](const Limitation&) {}).ok());
}

TEST(DiskScanDelay, ShrinksNearTheLimitAndWhileTheSandboxGrowsFast) {
  Duration interval = 16s;
  auto at = [&](uint64_t limitMiB, uint64_t usedMiB, double growthMiBPerS) {
    return std::chrono::duration<double>(
               diskScanDelay(interval, limitMiB * kMiB, usedMiB * kMiB, growthMiBPerS * kMiB))
        .count();
  };
  EXPECT_DOUBLE_EQ(at(0, 500, 100), 16) << "no limit: the interval";
  EXPECT_DOUBLE_EQ(at(100, 0, 0), 16) << "an empty, quiet sandbox";
  EXPECT_DOUBLE_EQ(at(100, 50, 0), 8) << "half full: half the interval";
  EXPECT_DOUBLE_EQ(at(100, 50, 10), 2.5) << "50 MiB free at 10 MiB/s: half of it in 2.5 s";
  EXPECT_DOUBLE_EQ(at(100, 99, 0), 1) << "never below interval / 16";
  EXPECT_DOUBLE_EQ(at(100, 50, 1e6), 1);
  EXPECT_DOUBLE_EQ(at(100, 120, 0), 1) << "past the limit";
}

// A sandbox growing at 100 MiB/s towards a 40 MiB limit, checked with a
// 1.6 s interval: the first scan comes at 0.1 s, the next ones sooner as
// the free space shrinks, so the limit fires past 40 MiB by about what
// 0.1 s of writing adds (a scan every 1.6 s would let it reach 160 MiB).
TEST(DiskIsolatorSchedule, AGrowingSandboxIsStoppedNearItsLimit) {
  asio::io_context io;
  WorkerPool pool{io, {.threads = 1, .queueMax = 16}};
  auto started = SteadyClock::now();
  std::atomic<int> scans{0};
  auto iso = makeDiskIsolator(io, pool, 1600ms, [&](const std::string&, uint64_t) -> Result<DiskUsage> {
    ++scans;
    double s = std::chrono::duration<double>(SteadyClock::now() - started).count();
    return DiskUsage{static_cast<uint64_t>(s * 100 * kMiB), false, false};
  });
  ContainerId id{"fw", "ex"};
  std::vector<Limitation> limits;
  ASSERT_TRUE(iso->prepare(id, ContainerConfig(*Resources::parse("disk:40"), "/nonexistent"), nullptr).ok());
  ASSERT_TRUE(iso->watch(id, [&](const Limitation& l) { limits.push_back(l); }).ok());
  auto end = SteadyClock::now() + 5s;
  while (limits.empty() && SteadyClock::now() < end) {
    io.restart();
    io.run_for(5ms);
  }
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_GE(scans, 3);
  EXPECT_LT(limits[0].usage.disk_bytes(), 40 * kMiB + 20 * kMiB) << "0.1 s of writing plus slack";
  EXPECT_LT(SteadyClock::now() - started, 1s);
}

TEST(DiskIsolatorTable, NeedsThePoolAndAPositiveInterval) {
  IsolatorOptions options;
  auto made = makeDiskIsolatorFromOptions(options);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().describe().find("worker pool"), std::string::npos);
  asio::io_context io;
  WorkerPool pool(io, {});
  options.io = &io;
  options.pool = &pool;
  options.diskWatchIntervalS = 0;
  made = makeDiskIsolatorFromOptions(options);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().describe().find("--disk-watch-interval"), std::string::npos);
  options.diskWatchIntervalS = 0.5;
  made = makeDiskIsolatorFromOptions(options);
  ASSERT_TRUE(made.ok()) << made.error().describe();
  EXPECT_EQ((*made)->name(), "disk/du");
  bool listed = false;
  for (const auto& name : knownIsolators()) listed |= name == "disk/du";
  EXPECT_TRUE(listed);
}

}  // namespace
}  // namespace allot
