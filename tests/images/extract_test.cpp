#include "images/extract.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/images/tar_builder.h"

namespace allot::images {
namespace {

namespace fs = std::filesystem;
using testing::TarBuilder;

class Extract : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot-extract-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    layer_ = root_ + "/layer";
    outside_ = root_ + "/outside";
    fs::create_directory(layer_);
    fs::create_directory(outside_);
    std::ofstream(outside_ + "/secret") << "host data";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string blob() const { return root_ + "/blob.tar"; }

  Result<ExtractStats> unpack(const ExtractLimits& limits = {}) { return extractLayer(blob(), layer_, limits); }

  // Expects the unpack to fail with `reason` in its message and the victim
  // directory outside the layer to be as the test left it.
  void expectRefused(const std::string& reason) {
    Result<ExtractStats> r = unpack();
    ASSERT_FALSE(r) << "unpacked a hostile layer";
    EXPECT_NE(r.error().message.find(reason), std::string::npos) << r.error().message;
    size_t victims = 0;
    for (const auto& e : fs::directory_iterator(outside_)) victims += e.path().filename() != "secret";
    EXPECT_EQ(victims, 0u) << "something was written outside the layer";
    std::ifstream secret(outside_ + "/secret");
    std::string text((std::istreambuf_iterator<char>(secret)), {});
    EXPECT_EQ(text, "host data");
  }

  static std::string read(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

  std::string root_, layer_, outside_;
};

TEST_F(Extract, UnpacksFilesDirectoriesSymlinksAndHardLinks) {
  TarBuilder(blob())
      .dir("bin/")
      .file("./bin/busybox", "ELF", 0755)
      .symlink("bin/sh", "busybox")
      .symlink("etc-host", "/etc")  // resolved only inside the task's root
      .hardlink("bin/ls", "bin/busybox")
      .close();
  Result<ExtractStats> r = unpack();
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(read(layer_ + "/bin/busybox"), "ELF");
  EXPECT_EQ(fs::read_symlink(layer_ + "/bin/sh"), "busybox");
  EXPECT_EQ(fs::read_symlink(layer_ + "/etc-host"), "/etc");
  EXPECT_EQ(fs::hard_link_count(layer_ + "/bin/busybox"), 2u);
  EXPECT_EQ(fs::status(layer_ + "/bin/busybox").permissions() & fs::perms::owner_exec, fs::perms::owner_exec);
  EXPECT_EQ(r->bytes, 3u);
}

TEST_F(Extract, UnpacksGzipAndZstdLayers) {
  for (auto c : {TarBuilder::Compression::kGzip, TarBuilder::Compression::kZstd}) {
    fs::remove_all(layer_);
    fs::create_directory(layer_);
    TarBuilder(blob(), c).file("a", "compressed").close();
    Result<ExtractStats> r = unpack();
    ASSERT_TRUE(r) << r.error().describe();
    EXPECT_EQ(read(layer_ + "/a"), "compressed");
  }
}

TEST_F(Extract, RefusesDotDotPaths) {
  TarBuilder(blob()).file("../outside/pwned", "x").close();
  expectRefused("'..'");
  TarBuilder(blob()).dir("a/").file("a/../../outside/pwned", "x").close();
  expectRefused("'..'");
}

TEST_F(Extract, RefusesAbsolutePaths) {
  TarBuilder(blob()).file(outside_ + "/pwned", "x").close();
  expectRefused("absolute path");
}

TEST_F(Extract, RefusesAFileThroughAnEscapingSymlink) {
  TarBuilder(blob()).symlink("esc", "../outside").file("esc/pwned", "x").close();
  expectRefused("goes through the symlink 'esc'");
}

TEST_F(Extract, RefusesAFileThroughAnAbsoluteSymlink) {
  TarBuilder(blob()).symlink("abs", outside_).dir("abs/sub/").file("abs/sub/pwned", "x").close();
  expectRefused("goes through the symlink 'abs'");
}

TEST_F(Extract, RefusesHardLinksToHostFiles) {
  TarBuilder(blob()).hardlink("shadow", "/etc/shadow").close();
  expectRefused("absolute path");
  TarBuilder(blob()).hardlink("secret", "../outside/secret").close();
  expectRefused("'..'");
  TarBuilder(blob()).symlink("l", outside_).hardlink("secret", "l/secret").close();
  expectRefused("goes through the symlink 'l'");
  TarBuilder(blob()).hardlink("x", "not-in-this-layer").close();
  expectRefused("not an earlier file of this layer");
}

TEST_F(Extract, RefusesDeviceNodes) {
  TarBuilder(blob()).device("null", AE_IFCHR, 1, 3).close();
  expectRefused("device node");
  TarBuilder(blob()).device("disk", AE_IFBLK, 8, 0).close();
  expectRefused("device node");
}

TEST_F(Extract, ReplacingASymlinkWithADirectoryNeverFollowsIt) {
  TarBuilder(blob()).symlink("d", outside_).dir("d/").file("d/x", "inside").close();
  Result<ExtractStats> r = unpack();
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(layer_ + "/d")));
  EXPECT_EQ(read(layer_ + "/d/x"), "inside");
  EXPECT_FALSE(fs::exists(outside_ + "/x"));
}

TEST_F(Extract, TurnsWhiteoutsIntoOverlayWhiteouts) {
  TarBuilder(blob()).file("keep", "k").file(".wh.gone", "").file("d/.wh.sub", "").close();
  Result<ExtractStats> r = unpack();
  ASSERT_TRUE(r) << r.error().describe();
  for (const char* hidden : {"/gone", "/d/sub"}) {
    struct stat st;
    ASSERT_EQ(::lstat((layer_ + hidden).c_str(), &st), 0) << hidden;
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << hidden;
    EXPECT_EQ(st.st_rdev, makedev(0, 0)) << hidden;
  }
  EXPECT_FALSE(fs::exists(layer_ + "/.wh.gone"));
  EXPECT_EQ(r->whiteouts, 2u);
}

TEST_F(Extract, AWhiteoutNeverHidesAFileOfItsOwnLayer) {
  TarBuilder(blob()).file("same", "kept").file(".wh.same", "").file(".wh.later", "").file("later", "new").close();
  Result<ExtractStats> r = unpack();
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(read(layer_ + "/same"), "kept");
  EXPECT_EQ(read(layer_ + "/later"), "new");
}

TEST_F(Extract, RefusesABareWhiteout) {
  TarBuilder(blob()).file(".wh.", "").close();
  expectRefused("bare whiteout");
}

TEST_F(Extract, MarksOpaqueDirectories) {
  if (geteuid() != 0) GTEST_SKIP() << "trusted.overlay.opaque needs CAP_SYS_ADMIN (run as root)";
  TarBuilder(blob()).dir("d/").file("d/.wh..wh..opq", "").file("d/own", "o").close();
  Result<ExtractStats> r = unpack();
  ASSERT_TRUE(r) << r.error().describe();
  char value[8] = {};
  ASSERT_EQ(::lgetxattr((layer_ + "/d").c_str(), "trusted.overlay.opaque", value, sizeof(value)), 1);
  EXPECT_EQ(value[0], 'y');
  EXPECT_EQ(read(layer_ + "/d/own"), "o");
  EXPECT_FALSE(fs::exists(layer_ + "/d/.wh..wh..opq"));
}

TEST_F(Extract, EnforcesTheEntryAndByteCaps) {
  TarBuilder(blob()).file("a", "1").file("b", "2").file("c", "3").close();
  Result<ExtractStats> entries = unpack({.entriesMax = 2, .bytesMax = 100});
  ASSERT_FALSE(entries);
  EXPECT_NE(entries.error().message.find("more than 2 entries"), std::string::npos);
  fs::remove_all(layer_);
  fs::create_directory(layer_);
  TarBuilder(blob()).file("big", std::string(11, 'x')).close();
  Result<ExtractStats> bytes = unpack({.entriesMax = 10, .bytesMax = 10});
  ASSERT_FALSE(bytes);
  EXPECT_NE(bytes.error().message.find("more than 10 bytes"), std::string::npos);
}

TEST_F(Extract, RefusesATruncatedTar) {
  TarBuilder(blob()).file("a", std::string(4000, 'x')).close();
  fs::resize_file(blob(), 2048);
  Result<ExtractStats> r = unpack();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("layer"), std::string::npos) << r.error().message;
}

TEST_F(Extract, RefusesSomethingThatIsNotATar) {
  std::ofstream(blob()) << std::string(1024, 'z');
  EXPECT_FALSE(unpack());
}

}  // namespace
}  // namespace allot::images
