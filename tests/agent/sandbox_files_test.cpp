// SandboxDir (agent/sandbox_files.h): what a task may put in its sandbox
// never leads the agent's reads outside it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/files_api.h"
#include "agent/sandbox_files.h"

namespace allot {
namespace {

namespace fs = std::filesystem;

class SandboxFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot-sandbox-files-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    sandbox_ = root_ + "/sandbox";
    fs::create_directories(sandbox_ + "/sub");
    std::ofstream(sandbox_ + "/task.stdout") << "hello\nworld\n";
    std::ofstream(root_ + "/secret") << "outside";
  }
  void TearDown() override { fs::remove_all(root_); }

  SandboxDir open() {
    auto dir = SandboxDir::open(sandbox_);
    EXPECT_TRUE(dir.ok());
    return std::move(*dir);
  }

  std::string root_, sandbox_;
};

TEST_F(SandboxFilesTest, ReadsARangeOfAFileInTheSandbox) {
  SandboxDir dir = open();
  auto fd = dir.openFile("task.stdout");
  ASSERT_TRUE(fd.ok()) << fd.error().describe();
  auto bytes = readAt(fd->get(), 6, 100);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "world\n");
  auto id = identifyFd(fd->get());
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->size, 12u);
}

TEST_F(SandboxFilesTest, RefusesAnAbsoluteSymlinkAsTheTasksStdout) {
  fs::remove(sandbox_ + "/task.stdout");
  fs::create_symlink("/etc/shadow", sandbox_ + "/task.stdout");
  auto fd = open().openFile("task.stdout");
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.error().errnum, EXDEV) << fd.error().describe();
}

TEST_F(SandboxFilesTest, RefusesASymlinkToTheRootAndDotDotEscapes) {
  fs::create_symlink("/", sandbox_ + "/root");
  fs::create_symlink("../secret", sandbox_ + "/up");
  SandboxDir dir = open();
  EXPECT_FALSE(dir.openFile("root/etc/passwd").ok());
  EXPECT_FALSE(dir.list("root").ok());
  EXPECT_FALSE(dir.openFile("up").ok());
  EXPECT_FALSE(dir.openFile("../secret").ok());
  EXPECT_FALSE(dir.openFile("sub/../../secret").ok());
  EXPECT_FALSE(dir.openFile("/etc/passwd").ok());
  // A relative link that stays inside is followed.
  fs::create_symlink("task.stdout", sandbox_ + "/alias");
  EXPECT_TRUE(dir.openFile("alias").ok());
  EXPECT_TRUE(dir.openFile("sub/../task.stdout").ok());
}

TEST_F(SandboxFilesTest, RefusesAFifoWithoutBlockingAndADirectoryAsAFile) {
  ASSERT_EQ(mkfifo((sandbox_ + "/pipe").c_str(), 0600), 0);
  SandboxDir dir = open();
  auto fifo = dir.openFile("pipe");
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.error().message.find("not a regular file"), std::string::npos);
  EXPECT_FALSE(dir.openFile("sub").ok());
}

TEST_F(SandboxFilesTest, ListsADirectoryWithoutFollowingLinks) {
  fs::create_symlink("/", sandbox_ + "/root");
  auto listing = open().list("");
  ASSERT_TRUE(listing.ok()) << listing.error().describe();
  ASSERT_EQ(listing->entries.size(), 3u);
  EXPECT_EQ(listing->entries[0].name, "root");
  EXPECT_EQ(listing->entries[0].type, 'l');
  EXPECT_EQ(listing->entries[1].name, "sub");
  EXPECT_EQ(listing->entries[1].type, 'd');
  EXPECT_EQ(listing->entries[2].name, "task.stdout");
  EXPECT_EQ(listing->entries[2].size, 12u);
}

TEST_F(SandboxFilesTest, RefusesAHardLinkToAnotherUsersFile) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to own files as another user";
  ASSERT_EQ(chown(sandbox_.c_str(), 65534, 65534), 0);
  ASSERT_EQ(link((root_ + "/secret").c_str(), (sandbox_ + "/linked").c_str()), 0);
  auto fd = open().openFile("linked");
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.error().message.find("hard link"), std::string::npos);
}

TEST_F(SandboxFilesTest, RefusesOverlongAndNulPaths) {
  SandboxDir dir = open();
  EXPECT_FALSE(dir.openFile(std::string(kPathBytesMax + 1, 'a')).ok());
  EXPECT_FALSE(dir.openFile(std::string("task.stdout\0x", 13)).ok());
}

http::Request tlsPeer(const std::string& principal, const std::string& role) {
  http::Request r;
  r.tls = true;
  r.principal = principal;
  r.certRole = role;
  return r;
}

TEST(FilesApiReaders, FrameworkPrincipalAndOperatorsReadOthersAreRefused) {
  SandboxReaders none;
  EXPECT_EQ(readRefusal(http::Request{}, "fw", none), "");  // plaintext: loopback only
  EXPECT_EQ(readRefusal(tlsPeer("fw", "framework"), "fw", none), "");
  EXPECT_NE(readRefusal(tlsPeer("other", "framework"), "fw", none), "");
  EXPECT_NE(readRefusal(tlsPeer("ops", "operator"), "fw", none), "");  // not registered yet
  SandboxReaders byRole{.known = true, .aclsFromFile = false, .operators = {}};
  EXPECT_EQ(readRefusal(tlsPeer("ops", "operator"), "fw", byRole), "");
  EXPECT_NE(readRefusal(tlsPeer("other", "framework"), "fw", byRole), "");
  SandboxReaders byAcl{.known = true, .aclsFromFile = true, .operators = {"ops"}};
  EXPECT_EQ(readRefusal(tlsPeer("ops", "framework"), "fw", byAcl), "");
  EXPECT_NE(readRefusal(tlsPeer("root", "operator"), "fw", byAcl), "");
  // A framework on a plaintext link has the empty principal: no certificate matches it.
  EXPECT_NE(readRefusal(tlsPeer("", "framework"), "", byAcl), "");
}

}  // namespace
}  // namespace allot
