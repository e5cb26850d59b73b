// The `vm` suite's own check: inside the guest that scripts/vm/run-in-vm.sh
// boots, /sys/fs/cgroup is a cgroup2 root with the controllers the isolators
// need, and a child cgroup takes limits and can be killed as a whole.
// Outside the guest (no ALLOT_VM in the environment) every test skips.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace {

constexpr const char* kRoot = "/sys/fs/cgroup";

bool InVm() { return std::getenv("ALLOT_VM") != nullptr; }

#define REQUIRE_VM()                                                       \
  do {                                                                     \
    if (!InVm()) GTEST_SKIP() << "not inside the test VM; run through "    \
                                 "scripts/vm/run-in-vm.sh (meson test --suite vm)"; \
  } while (0)

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes with one write(2), as the kernel's cgroup files expect; returns errno.
int WriteFile(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = n == static_cast<ssize_t>(value.size()) ? 0 : (n < 0 ? errno : EIO);
  ::close(fd);
  return err;
}

std::set<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::set<std::string> words;
  for (std::string w; in >> w;) words.insert(w);
  return words;
}

// A child cgroup of the root, removed (after killing what is left) at the end.
class ChildCgroup : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_VM();
    path_ = std::string(kRoot) + "/allot-vm-smoke-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(::mkdir(path_.c_str(), 0755), 0) << path_ << ": " << std::strerror(errno);
  }
  void TearDown() override {
    if (path_.empty()) return;
    WriteFile(path_ + "/cgroup.kill", "1");
    for (int i = 0; i < 100 && ::rmdir(path_.c_str()) != 0 && errno == EBUSY; ++i) ::usleep(10'000);
  }
  std::string path_;
};

TEST(VmCgroupRoot, IsCgroup2) {
  REQUIRE_VM();
  struct statfs fs {};
  ASSERT_EQ(::statfs(kRoot, &fs), 0) << std::strerror(errno);
  EXPECT_EQ(static_cast<unsigned long>(fs.f_type), static_cast<unsigned long>(CGROUP2_SUPER_MAGIC))
      << kRoot << " is not a cgroup2 mount";
}

TEST(VmCgroupRoot, OffersCpuIoMemoryPids) {
  REQUIRE_VM();
  auto controllers = Words(ReadFile(std::string(kRoot) + "/cgroup.controllers"));
  for (const char* c : {"cpu", "io", "memory", "pids", "cpuset"})
    EXPECT_TRUE(controllers.count(c)) << "cgroup.controllers lacks " << c;
}

TEST(VmCgroupRoot, DelegatesCpuIoMemoryPidsToChildren) {
  REQUIRE_VM();
  auto enabled = Words(ReadFile(std::string(kRoot) + "/cgroup.subtree_control"));
  for (const char* c : {"cpu", "io", "memory", "pids", "cpuset"})
    EXPECT_TRUE(enabled.count(c)) << "cgroup.subtree_control lacks " << c;
}

TEST_F(ChildCgroup, MemoryMaxReadsBack) {
  ASSERT_EQ(WriteFile(path_ + "/memory.max", "67108864"), 0);
  EXPECT_EQ(ReadFile(path_ + "/memory.max"), "67108864\n");
  ASSERT_EQ(WriteFile(path_ + "/memory.max", "max"), 0);
  EXPECT_EQ(ReadFile(path_ + "/memory.max"), "max\n");
}

TEST_F(ChildCgroup, CpuAndPidsLimitsReadBack) {
  ASSERT_EQ(WriteFile(path_ + "/cpu.max", "50000 100000"), 0);
  EXPECT_EQ(ReadFile(path_ + "/cpu.max"), "50000 100000\n");
  ASSERT_EQ(WriteFile(path_ + "/cpu.weight", "200"), 0);
  EXPECT_EQ(ReadFile(path_ + "/cpu.weight"), "200\n");
  ASSERT_EQ(WriteFile(path_ + "/pids.max", "16"), 0);
  EXPECT_EQ(ReadFile(path_ + "/pids.max"), "16\n");
}

TEST_F(ChildCgroup, CgroupKillKillsEveryMember) {
  struct stat st {};
  ASSERT_EQ(::stat((path_ + "/cgroup.kill").c_str(), &st), 0) << "no cgroup.kill (kernel < 5.14?)";

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) ::pause();
  }
  ASSERT_EQ(WriteFile(path_ + "/cgroup.procs", std::to_string(child)), 0);
  EXPECT_EQ(ReadFile(path_ + "/cgroup.procs"), std::to_string(child) + "\n");
  ASSERT_EQ(WriteFile(path_ + "/cgroup.kill", "1"), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

// With `run-in-vm.sh --disk N` the guest has a virtio disk (ALLOT_VM_DISK),
// and io.max takes a limit for its device number.
TEST_F(ChildCgroup, IoMaxTakesTheVirtioDisk) {
  const char* disk = std::getenv("ALLOT_VM_DISK");
  if (disk == nullptr) GTEST_SKIP() << "no disk in this VM (run-in-vm.sh --disk N)";
  struct stat st {};
  ASSERT_EQ(::stat(disk, &st), 0) << disk << ": " << std::strerror(errno);
  ASSERT_TRUE(S_ISBLK(st.st_mode)) << disk << " is not a block device";
  std::string dev = std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
  ASSERT_EQ(WriteFile(path_ + "/io.max", dev + " rbps=1048576 wiops=100"), 0);
  EXPECT_NE(ReadFile(path_ + "/io.max").find(dev + " rbps=1048576 wbps=max riops=max wiops=100"),
            std::string::npos)
      << ReadFile(path_ + "/io.max");
}

}  // namespace
