// filesystem/linux against the real kernel: prepare() from layers in a real
// store, the launcher's child entering the root, volumes, recover, cleanup.
#include "isolators/filesystem_isolator.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/uring_poller.h"
#include "images/layer_store.h"
#include "launcher/launcher.h"
#include "tests/common/test_util.h"
#include "tests/images/tar_builder.h"
#include "tests/images/test_registry.h"

namespace allot {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::readWhole;
using testing::TarBuilder;

class FilesystemIsolatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "filesystem/linux needs root";
    char tmpl[] = "/tmp/allot-fsiso-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto store = images::LayerStore::open({.root = dir_ + "/store", .bytesMax = 1});
    ASSERT_TRUE(store) << store.error().describe();
    store_ = std::move(*store);
    std::string tar = dir_ + "/layer.tar";
    TarBuilder(tar).dir("bin/").file("bin/busybox", readWhole("/bin/busybox"), 0755).symlink("bin/sh", "busybox")
        .dir("etc/").file("etc/os-release", "ID=test-image\n").close();
    std::string bytes = readWhole(tar);
    layer_ = images::sha256Of(bytes);
    ASSERT_TRUE(store_->insert(layer_, tar, bytes.size()));
    for (const char* d : {"/sandbox", "/allowed/data", "/forbidden"}) fs::create_directories(dir_ + d);
    testing::writeWhole(dir_ + "/allowed/data/file", "allowed data");
    testing::writeWhole(dir_ + "/host-bin", "executor");
    options_.imageStore = store_.get();
    options_.rootfsDir = dir_ + "/rootfs";
    options_.volumeAllow = dir_ + "/allowed";
    options_.hostBinds = {{dir_ + "/host-bin", "/opt/allot/allot-executor", true}};
    Result<std::unique_ptr<Isolator>> iso = makeFilesystemIsolator(options_);
    ASSERT_TRUE(iso) << iso.error().describe();
    isolator_ = std::move(*iso);
    poller_ = std::move(*UringPoller::create(io_));
    launcher_ = std::move(*Launcher::create(io_, *poller_));
  }
  void TearDown() override {
    launcher_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  ContainerConfig config() {
    ContainerConfig c({}, dir_ + "/sandbox");
    c.imageLayers = {layer_.hex};
    return c;
  }

  static ContainerVolume volume(const std::string& host, const std::string& target, bool readOnly) {
    return ContainerVolume{host, target, readOnly};
  }

  std::string run(const ChildSetup& setup, const std::string& script) {
    LaunchSpec spec;
    spec.argv = {"/bin/sh", "-c", script};
    spec.env = setup.env;
    spec.env.push_back("PATH=/bin");
    spec.workDir = dir_ + "/sandbox";
    spec.stdoutPath = dir_ + "/out";
    spec.stderrPath = dir_ + "/err";
    spec.setup = setup;
    std::optional<ExitInfo> exit;
    Result<pid_t> pid = launcher_->launch(spec, [&](const ExitInfo& e) { exit = e; });
    EXPECT_TRUE(pid) << pid.error().describe();
    if (!pid) return "";
    EXPECT_TRUE(testing::runUntil(io_, [&] { return exit.has_value(); }, 10s));
    return readWhole(dir_ + "/out") + readWhole(dir_ + "/err");
  }

  std::string dir_;
  images::Digest layer_;
  std::unique_ptr<images::LayerStore> store_;
  IsolatorOptions options_;
  std::unique_ptr<Isolator> isolator_;
  asio::io_context io_;
  std::unique_ptr<UringPoller> poller_;
  std::unique_ptr<Launcher> launcher_;
};

TEST_F(FilesystemIsolatorTest, RunsTheExecutorInItsImageWithSandboxVolumesAndHostBinds) {
  ContainerId id{"fw", "exec-1"};
  ContainerConfig c = config();
  c.volumes = {volume(dir_ + "/allowed/data", "/data", true), volume("cache", "/cache", false)};
  ChildSetup setup;
  ASSERT_TRUE(isolator_->prepare(id, c, &setup));
  std::string out = run(setup,
                        "cat /etc/os-release; echo sandbox=$ALLOT_SANDBOX; pwd; cat /data/file; echo;"
                        "echo x > /data/file 2>/dev/null || echo DATA-RO; echo c > /cache/c; cat /opt/allot/allot-executor;"
                        "echo; echo w > /written");
  EXPECT_NE(out.find("ID=test-image"), std::string::npos) << out;
  EXPECT_NE(out.find("sandbox=/mnt/sandbox\n/mnt/sandbox\n"), std::string::npos) << out;
  EXPECT_NE(out.find("allowed data"), std::string::npos) << out;
  EXPECT_NE(out.find("DATA-RO"), std::string::npos) << out;
  EXPECT_NE(out.find("executor"), std::string::npos) << out;
  EXPECT_EQ(readWhole(dir_ + "/sandbox/cache/c"), "c\n");
  EXPECT_EQ(readWhole(dir_ + "/rootfs/" + id.name() + "/upper/written"), "w\n");
  // Held while it runs: eviction (cap 1 byte) leaves the layer alone.
  EXPECT_TRUE(store_->evict().empty());
  std::function<Status()> reap = isolator_->reapJob(id);
  ASSERT_TRUE(reap);
  ASSERT_TRUE(reap());
  ASSERT_TRUE(isolator_->cleanup(id));
  EXPECT_FALSE(fs::exists(dir_ + "/rootfs/" + id.name()));
  EXPECT_EQ(store_->evict(), std::vector<images::Digest>{layer_}) << "cleanup did not let go of the layer";
}

// The root's mount points (/proc, /dev, /etc/hosts, the sandbox...) come
// from the isolator's shared read-only dir: the writable layer of a task
// that writes nothing stays empty.
TEST_F(FilesystemIsolatorTest, TakesMountPointsFromASharedDirNotTheWritableLayer) {
  if (access("/etc/hosts", R_OK) != 0 || access("/etc/resolv.conf", R_OK) != 0)
    GTEST_SKIP() << "needs the host's /etc/hosts and /etc/resolv.conf";
  ContainerId id{"fw", "points"};
  ChildSetup setup;
  ASSERT_TRUE(isolator_->prepare(id, config(), &setup));
  EXPECT_EQ(setup.rootfs.mountPointsDir, dir_ + "/rootfs-mount-points/executor");
  std::string out = run(setup, "cat /etc/os-release; ls /proc/self/status /dev/null /etc/hosts; pwd");
  EXPECT_NE(out.find("ID=test-image"), std::string::npos) << out;
  EXPECT_NE(out.find("/dev/null"), std::string::npos) << out;
  EXPECT_NE(out.find("/mnt/sandbox"), std::string::npos) << out;
  std::vector<std::string> upper;
  for (const auto& entry : fs::directory_iterator(dir_ + "/rootfs/" + id.name() + "/upper"))
    upper.push_back(entry.path().filename());
  EXPECT_TRUE(upper.empty()) << "made in the writable layer: " << ::testing::PrintToString(upper);
  ASSERT_TRUE(isolator_->cleanup(id));
}

// An image whose /etc is a symlink keeps it: the shared dir's /etc would
// hide it, so that root makes its mount points in its writable layer.
TEST_F(FilesystemIsolatorTest, KeepsAnImageWhoseEtcIsASymlink) {
  std::string tar = dir_ + "/linked.tar";
  TarBuilder(tar).dir("bin/").file("bin/busybox", readWhole("/bin/busybox"), 0755).symlink("bin/sh", "busybox")
      .dir("usr/").dir("usr/etc/").file("usr/etc/os-release", "ID=linked-etc\n").symlink("etc", "usr/etc").close();
  std::string bytes = readWhole(tar);
  images::Digest linked = images::sha256Of(bytes);
  ASSERT_TRUE(store_->insert(linked, tar, bytes.size()));
  ContainerId id{"fw", "linked"};
  ContainerConfig c = config();
  c.imageLayers = {linked.hex};
  ChildSetup setup;
  ASSERT_TRUE(isolator_->prepare(id, c, &setup));
  EXPECT_EQ(setup.rootfs.mountPointsDir, "");
  std::string out = run(setup, "cat /etc/os-release");
  EXPECT_NE(out.find("ID=linked-etc"), std::string::npos) << out;
  ASSERT_TRUE(isolator_->cleanup(id));
}

TEST_F(FilesystemIsolatorTest, RefusesVolumesOutsideTheAllowedPaths) {
  ChildSetup setup;
  ContainerConfig c = config();
  c.volumes = {volume(dir_ + "/forbidden", "/f", false)};
  Status st = isolator_->prepare({"fw", "e"}, c, &setup);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("--volume-allow"), std::string::npos) << st.error().message;
  fs::create_directory_symlink(dir_ + "/forbidden", dir_ + "/allowed/link");
  c.volumes = {volume(dir_ + "/allowed/link", "/f", false)};
  EXPECT_FALSE(isolator_->prepare({"fw", "e"}, c, &setup)) << "a symlink under an allowed path led outside it";
  c.volumes = {volume("../escape", "/f", false)};
  EXPECT_FALSE(isolator_->prepare({"fw", "e"}, c, &setup));
  c.volumes = {volume("ok", "relative", false)};
  EXPECT_FALSE(isolator_->prepare({"fw", "e"}, c, &setup));
  EXPECT_FALSE(setup.rootfs.enabled());
  EXPECT_FALSE(store_->evict().empty()) << "a refused prepare still holds the layer";
}

// A resolv.conf the operator names must exist; the host's may not.
TEST_F(FilesystemIsolatorTest, RefusesAMissingResolvConfTheOperatorNamed) {
  IsolatorOptions options = options_;
  options.resolvConf = dir_ + "/no-such-resolv.conf";
  Result<std::unique_ptr<Isolator>> iso = makeFilesystemIsolator(options);
  ASSERT_FALSE(iso);
  EXPECT_NE(iso.error().describe().find("--resolv-conf " + options.resolvConf), std::string::npos)
      << iso.error().describe();
}

TEST_F(FilesystemIsolatorTest, LeavesAContainerWithoutAnImageOnTheHost) {
  ChildSetup setup;
  ASSERT_TRUE(isolator_->prepare({"fw", "plain"}, ContainerConfig({}, dir_ + "/sandbox"), &setup));
  EXPECT_FALSE(setup.rootfs.enabled());
  EXPECT_TRUE(setup.env.empty());
  EXPECT_FALSE(isolator_->reapJob({"fw", "plain"}));
}

TEST_F(FilesystemIsolatorTest, RecoverHoldsKnownLayersAndDropsUnknownWritableLayers) {
  ChildSetup setup;
  ASSERT_TRUE(isolator_->prepare({"fw", "kept"}, config(), &setup));
  fs::create_directories(dir_ + "/rootfs/stale.one/upper");
  Result<std::unique_ptr<Isolator>> restarted = makeFilesystemIsolator(options_);
  ASSERT_TRUE(restarted);
  ContainerConfig known = config();
  ASSERT_TRUE((*restarted)->recover({KnownContainer({"fw", "kept"}, known)}));
  EXPECT_TRUE(fs::exists(dir_ + "/rootfs/" + ContainerId{"fw", "kept"}.name()));
  EXPECT_FALSE(fs::exists(dir_ + "/rootfs/stale.one"));
  ASSERT_TRUE(isolator_->cleanup({"fw", "kept"}));  // the first instance lets go; the recovered one holds
  fs::create_directories(dir_ + "/rootfs/" + ContainerId{"fw", "kept"}.name());
  EXPECT_TRUE(store_->evict().empty());
  ASSERT_TRUE((*restarted)->cleanup({"fw", "kept"}));
  EXPECT_EQ(store_->evict(), std::vector<images::Digest>{layer_});
}

}  // namespace
}  // namespace allot
