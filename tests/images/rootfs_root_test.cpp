// A process launched in a root filesystem of its own (ChildSetup::rootfs),
// made from layers the test writes into a real layer store: the launcher's
// overlay, pivot_root, /dev, /proc, /sys and binds, against the real kernel.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "base/asio.h"
#include "base/uring_poller.h"
#include "images/layer_store.h"
#include "launcher/launcher.h"
#include "tests/common/test_util.h"
#include "tests/images/tar_builder.h"
#include "tests/images/test_registry.h"

namespace allot::images {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::readWhole;
using testing::TarBuilder;

class Rootfs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (overlay, pivot_root)";
    char tmpl[] = "/tmp/allot-rootfs-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto store = LayerStore::open({.root = dir_ + "/store"});
    ASSERT_TRUE(store) << store.error().describe();
    store_ = std::move(*store);
    for (const char* d : {"/upper", "/work", "/mnt", "/sandbox", "/victim"}) fs::create_directories(dir_ + d);
    testing::writeWhole(dir_ + "/sandbox/in-sandbox", "s");
    testing::writeWhole(dir_ + "/tool", "host tool");
    poller_ = std::move(*UringPoller::create(io_));
    launcher_ = std::move(*Launcher::create(io_, *poller_));
  }
  void TearDown() override {
    launcher_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Inserts a layer built by `build` and returns its lower dir name.
  std::string layer(const std::string& name, const std::function<void(TarBuilder&)>& build) {
    std::string path = dir_ + "/" + name + ".tar";
    {
      TarBuilder tar(path);
      build(tar);
    }
    std::string bytes = readWhole(path);
    Digest digest = sha256Of(bytes);
    Result<std::string> rootfs = store_->insert(digest, path, bytes.size());
    EXPECT_TRUE(rootfs) << rootfs.error().describe();
    return digest.hex + "/rootfs";
  }

  // busybox with /etc/hello in the lower layer, hidden by the upper one.
  RootfsSetup busyboxRoot(const std::function<void(TarBuilder&)>& extra = nullptr) {
    std::string lower = layer("lower", [](TarBuilder& t) {
      t.dir("bin/").file("bin/busybox", readWhole("/bin/busybox"), 0755).symlink("bin/sh", "busybox");
      t.dir("etc/").file("etc/hello", "lower").file("etc/passwd", "root:x:0:0::/:/bin/sh\n");
    });
    std::string upper = layer("upper", [&](TarBuilder& t) {
      t.dir("etc/").file("etc/.wh.hello", "").file("etc/motd", "from the image");
      if (extra) extra(t);
    });
    RootfsSetup root;
    root.layersDir = dir_ + "/store/layers";
    root.lowerDirs = {upper, lower};
    root.upperDir = dir_ + "/upper";
    root.workDir = dir_ + "/work";
    root.mountPoint = dir_ + "/mnt";
    root.binds = {{dir_ + "/sandbox", "/mnt/sandbox", false}, {dir_ + "/tool", "/opt/allot/tool", true}};
    return root;
  }

  // Runs `script` under /bin/sh in `root`; its stdout.
  std::string run(const RootfsSetup& root, const std::string& script, bool pidNamespace = false) {
    LaunchSpec spec;
    spec.argv = {"/bin/sh", "-c", script};
    spec.env = {"PATH=/bin"};
    spec.workDir = dir_ + "/sandbox";
    spec.stdoutPath = dir_ + "/out";
    spec.stderrPath = dir_ + "/err";
    spec.setup.rootfs = root;
    spec.setup.newPidNamespace = pidNamespace;
    std::optional<ExitInfo> exit;
    Result<pid_t> pid = launcher_->launch(spec, [&](const ExitInfo& e) { exit = e; });
    EXPECT_TRUE(pid) << pid.error().describe();
    if (!pid) return "";
    EXPECT_TRUE(testing::runUntil(io_, [&] { return exit.has_value(); }, 10s));
    return readWhole(dir_ + "/out");
  }

  bool hostMounts(const std::string& path) {
    return readWhole("/proc/self/mountinfo").find(path) != std::string::npos;
  }

  std::string dir_;
  asio::io_context io_;
  std::unique_ptr<UringPoller> poller_;
  std::unique_ptr<Launcher> launcher_;
  std::unique_ptr<LayerStore> store_;
};

TEST_F(Rootfs, SeesItsImageAndNotTheHost) {
  RootfsSetup root = busyboxRoot();
  std::string out = run(root,
                        "cat /etc/motd; echo; test -e /etc/hello && echo HELLO; test -e /etc/shadow && echo SHADOW;"
                        "test -e " + dir_ + "/store && echo STORE; ls /mnt/sandbox; cat /opt/allot/tool; echo;"
                        "echo mine > /written; echo inside > /mnt/sandbox/from-task");
  EXPECT_NE(out.find("from the image"), std::string::npos) << out << readWhole(dir_ + "/err");
  EXPECT_EQ(out.find("HELLO"), std::string::npos) << "the whiteout did not hide the lower file";
  EXPECT_EQ(out.find("SHADOW"), std::string::npos) << "the host's /etc is visible";
  EXPECT_EQ(out.find("STORE"), std::string::npos) << "the agent's files are visible";
  EXPECT_NE(out.find("in-sandbox"), std::string::npos);
  EXPECT_NE(out.find("host tool"), std::string::npos);
  EXPECT_EQ(readWhole(dir_ + "/upper/written"), "mine\n") << "writes go to the executor's own layer";
  EXPECT_FALSE(fs::exists("/written"));
  EXPECT_EQ(readWhole(dir_ + "/sandbox/from-task"), "inside\n");
  EXPECT_FALSE(hostMounts(dir_ + "/mnt")) << "the root's mounts reached the host";
}

TEST_F(Rootfs, MasksKernelPathsAndKeepsSysAndBindsReadOnly) {
  RootfsSetup root = busyboxRoot();
  std::string out = run(root,
                        "echo kcore=$(cat /proc/kcore | wc -c);"
                        "mkdir /sys/x 2>/dev/null || echo SYS-RO;"
                        "echo 1 > /proc/sys/kernel/domainname 2>/dev/null || echo PROCSYS-RO;"
                        "echo x > /opt/allot/tool 2>/dev/null || echo BIND-RO;"
                        "echo a > /dev/null && echo DEVNULL; ls /dev; ls /sys/firmware | wc -l");
  EXPECT_NE(out.find("kcore=0"), std::string::npos) << out << readWhole(dir_ + "/err");
  EXPECT_NE(out.find("SYS-RO"), std::string::npos) << out;
  EXPECT_NE(out.find("PROCSYS-RO"), std::string::npos) << out;
  EXPECT_NE(out.find("BIND-RO"), std::string::npos) << out;
  EXPECT_NE(out.find("DEVNULL"), std::string::npos) << out;
  for (const char* node : {"null", "zero", "urandom", "pts", "shm", "ptmx"}) EXPECT_NE(out.find(node), std::string::npos) << node;
  EXPECT_EQ(readWhole(dir_ + "/tool"), "host tool");
}

TEST_F(Rootfs, StartsInItsWorkingDirectoryAsPidOne) {
  RootfsSetup root = busyboxRoot();
  root.workingDir = "/etc";
  std::string out = run(root, "pwd; echo pid=$$; ls /proc | grep -c '^[0-9]'", true);
  EXPECT_NE(out.find("/etc\npid=1\n"), std::string::npos) << out << readWhole(dir_ + "/err");
}

TEST_F(Rootfs, AnImageSymlinkCannotPointABindAtTheHost) {
  std::string victim = dir_ + "/victim";
  // /mnt in the image points at a host directory: after pivot_root that
  // path names nothing inside the root, so the bind has no target there
  // and the launch fails; the host directory stays empty.
  RootfsSetup root = busyboxRoot([&](TarBuilder& t) { t.symlink("mnt", victim); });
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", "true"};
  spec.setup.rootfs = root;
  Result<pid_t> pid = launcher_->launch(spec, [](const ExitInfo&) {});
  ASSERT_FALSE(pid);
  EXPECT_NE(pid.error().describe().find("make a bind's target"), std::string::npos) << pid.error().describe();
  EXPECT_TRUE(fs::is_empty(victim)) << "a mount target was made on the host";
  // Pointing inside the image instead: the bind lands in the image's
  // directory (in the executor's own layer).
  RootfsSetup inside = busyboxRoot([&](TarBuilder& t) { t.symlink("mnt", "/etc"); });
  std::string out = run(inside, "ls /etc/sandbox");
  EXPECT_NE(out.find("in-sandbox"), std::string::npos) << out << readWhole(dir_ + "/err");
  EXPECT_TRUE(fs::is_empty(victim));
}

TEST_F(Rootfs, AMissingLayerFailsTheLaunchWithTheStep) {
  RootfsSetup root = busyboxRoot();
  root.lowerDirs.push_back(std::string(64, 'f') + "/rootfs");
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", "true"};
  spec.setup.rootfs = root;
  Result<pid_t> pid = launcher_->launch(spec, [](const ExitInfo&) {});
  ASSERT_FALSE(pid);
  EXPECT_NE(pid.error().describe().find("enter the root filesystem: mount the overlay"), std::string::npos)
      << pid.error().describe();
}

TEST_F(Rootfs, RefusesASetupItCannotMount) {
  RootfsSetup root = busyboxRoot();
  root.lowerDirs.front() = "/absolute";
  LaunchSpec spec;
  spec.argv = {"/bin/sh"};
  spec.setup.rootfs = root;
  Result<pid_t> pid = launcher_->launch(spec, [](const ExitInfo&) {});
  ASSERT_FALSE(pid);
  EXPECT_NE(pid.error().message.find("relative to layersDir"), std::string::npos) << pid.error().message;
}

}  // namespace
}  // namespace allot::images
