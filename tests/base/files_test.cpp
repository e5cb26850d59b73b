#include "base/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace allot {
namespace {

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(EscapeId, KeepsSafeBytesAndEscapesEverythingElse) {
  EXPECT_EQ(escapeId("F-1_a"), "F-1_a");
  EXPECT_EQ(escapeId("exec/1"), "exec%2F1");
  EXPECT_EQ(escapeId(".."), "%2E%2E");
  EXPECT_EQ(escapeId("%"), "%25");
  EXPECT_EQ(escapeId(std::string("a\0b", 3)), "a%00b");
  EXPECT_EQ(escapeId("\xff"), "%FF");
  EXPECT_EQ(escapeId(""), "%");
}

// Pairs that collide under naive sanitizers: one mapping unsafe bytes to
// '_', one keeping '.' both in ids and as the separator.
TEST(ContainerName, DistinctPairsNeverCollide) {
  std::vector<std::pair<std::string, std::string>> pairs = {
      {"a.b", "c"}, {"a", "b.c"}, {"a", "b_c"}, {"a", "b/c"}, {"a", "b c"}, {"a_", "b"}, {"a/", "b"},
      {"", "a.b"}, {".", "a.b"}, {"", ""}, {"%", ""}, {"", "%"}, {"%25", ""}, {"%", "25"},
      {"a%2E", "b"}, {"a", "%2Eb"}, {"a.", "b"}, {"a", ".b"}, {"..", "x"}, {".", ".x"},
      {std::string(300, 'a'), "b"}, {std::string(300, 'a'), "c"}, {std::string(299, 'a'), "ab"},
      {std::string(256, '.'), std::string(256, '/')}, {std::string(256, '/'), std::string(256, '.')}};
  std::set<std::string> names;
  for (const auto& [fw, ex] : pairs) {
    std::string name = containerName(fw, ex);
    EXPECT_TRUE(names.insert(name).second) << "\"" << fw << "\", \"" << ex << "\" -> " << name;
  }
}

TEST(ContainerName, IsAFileNameWithRoomForSuffixes) {
  for (const auto& [fw, ex] : std::vector<std::pair<std::string, std::string>>{
           {"F-1", "exec/1"}, {std::string(256, '\xee'), std::string(256, '/')}, {"", ""}, {"..", ".."}}) {
    std::string name = containerName(fw, ex);
    EXPECT_LE(name.size(), kContainerNameBytesMax);
    EXPECT_EQ(name.find('/'), std::string::npos) << name;
    EXPECT_NE(name.front(), '.') << name;
    EXPECT_NE(name, "..");
  }
  EXPECT_EQ(containerName("F-1", "exec/1"), "F-1.exec%2F1");
  std::string longName = containerName(std::string(256, '/'), "x");
  EXPECT_EQ(longName.size(), 120u + 1 + 64);
  EXPECT_EQ(longName[120], '~');
}

TEST(ContainerName, EveryShortNameSplitsBackIntoItsPair) {
  // The first '.' separates the two escaped ids: decoding gives the pair.
  auto unescape = [](const std::string& s) {
    if (s == "%") return std::string();
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '%') {
        out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        out += s[i];
      }
    }
    return out;
  };
  for (const auto& [fw, ex] : std::vector<std::pair<std::string, std::string>>{
           {"a.b", "c"}, {"", "%x"}, {"f\n", "e\t."}, {"%", "%25"}}) {
    std::string name = containerName(fw, ex);
    size_t dot = name.find('.');
    ASSERT_NE(dot, std::string::npos);
    EXPECT_EQ(name.find('.', dot + 1), std::string::npos);
    EXPECT_EQ(unescape(name.substr(0, dot)), fw);
    EXPECT_EQ(unescape(name.substr(dot + 1)), ex);
  }
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/allot-files-XXXXXX";
    path_ = ::mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(WriteFileAtomically, ReplacesTheFileWithTheGivenModeAndLeavesNoTemp) {
  TempDir dir;
  std::string path = dir.path() + "/f";
  ASSERT_TRUE(writeFileAtomically(path, "one\n"));
  ASSERT_TRUE(writeFileAtomically(path, "two\n", /*durable=*/false, 0644));
  EXPECT_EQ(readAll(path), "two\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(WriteFileAtomically, FailureLeavesTheOldFileAndNoTemp) {
  TempDir dir;
  std::string path = dir.path() + "/f";
  ASSERT_TRUE(writeFileAtomically(path, "old"));
  // A directory where the file should go: the rename fails.
  std::string blocked = dir.path() + "/d";
  std::filesystem::create_directories(blocked + "/inside");
  Status st = writeFileAtomically(blocked, "new");
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().describe().find(blocked), std::string::npos) << st.error().describe();
  EXPECT_FALSE(std::filesystem::exists(blocked + ".tmp"));
  EXPECT_EQ(readAll(path), "old");
  EXPECT_FALSE(writeFileAtomically(dir.path() + "/missing/f", "x"));
}

TEST(WriteAll, WritesEverythingAndNamesThePathOnError) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  EXPECT_TRUE(writeAll(fds[1], "hello", "pipe"));
  char got[8] = {};
  EXPECT_EQ(::read(fds[0], got, sizeof got), 5);
  EXPECT_EQ(std::string(got), "hello");
  ::close(fds[0]);
  ::close(fds[1]);
  Status st = writeAll(fds[1], "x", "/the/path");
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().describe().find("write /the/path"), std::string::npos);
}

// Restores the process's RLIMIT_NOFILE when a test ends.
class FileLimit : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved_), 0); }
  void TearDown() override { setrlimit(RLIMIT_NOFILE, &saved_); }
  rlimit saved_{};
};

TEST_F(FileLimit, ASoftLimitAlreadyHighEnoughIsKept) {
  EXPECT_EQ(raiseFileLimit(saved_.rlim_cur), saved_.rlim_cur);
  EXPECT_EQ(raiseFileLimit(1), saved_.rlim_cur);
}

TEST_F(FileLimit, TheSoftLimitRisesToTheHardOne) {
  rlimit lowered{saved_.rlim_cur / 2, saved_.rlim_max};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  EXPECT_EQ(raiseFileLimit(saved_.rlim_max), saved_.rlim_max);
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(now.rlim_cur, saved_.rlim_max);
}

TEST_F(FileLimit, PastAHardLimitThatCannotRiseItStopsAtTheHardOne) {
  // Even root cannot lift the hard limit past fs.nr_open.
  rlimit lowered{saved_.rlim_cur / 2, saved_.rlim_max};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  rlim_t beyond = std::numeric_limits<int>::max();
  EXPECT_EQ(raiseFileLimit(beyond), saved_.rlim_max);
}

}  // namespace
}  // namespace allot
