// RotatingLog (base/rotating_log.h): bounded files, the newest bytes kept,
// the stream continuous across them; pumpTaskOutput drains both pipes.
#include "base/rotating_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace allot {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class RotatingLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/allot-rotating-log-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(RotatingLogTest, KeepsTheNewestBytesInAtMostFilesTimesMax) {
  RotatingLog log(dir_ + "/out", 4096, 3);
  ASSERT_EQ(log.open(), 0);
  std::string all;
  for (int i = 0; i < 5000; ++i) {
    std::string line = std::to_string(i) + "\n";
    all += line;
    ASSERT_EQ(log.write(line.data(), line.size()), 0);
  }
  EXPECT_FALSE(fs::exists(dir_ + "/out.3"));
  std::string kept = slurp(dir_ + "/out.2") + slurp(dir_ + "/out.1") + slurp(dir_ + "/out");
  EXPECT_EQ(fs::file_size(dir_ + "/out.2"), 4096u);
  EXPECT_EQ(fs::file_size(dir_ + "/out.1"), 4096u);
  EXPECT_LE(kept.size(), 3u * 4096);
  EXPECT_EQ(kept, all.substr(all.size() - kept.size()));  // the newest, continuous
}

TEST_F(RotatingLogTest, AppendsToAnExistingFileAndCountsItsSize) {
  std::ofstream(dir_ + "/out") << std::string(4000, 'a');
  RotatingLog log(dir_ + "/out", 4096, 2);
  ASSERT_EQ(log.open(), 0);
  std::string more(200, 'b');
  ASSERT_EQ(log.write(more.data(), more.size()), 0);
  EXPECT_EQ(fs::file_size(dir_ + "/out.1"), 4096u);
  EXPECT_EQ(slurp(dir_ + "/out"), std::string(104, 'b'));
}

TEST_F(RotatingLogTest, PumpDrainsBothPipesUntilTheirEnd) {
  int out[2], err[2];
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(err), 0);
  std::string big(300000, 'x');
  ASSERT_EQ(fcntl(out[1], F_SETPIPE_SZ, 1 << 20) > 0, true);
  ASSERT_EQ(write(out[1], big.data(), big.size()), static_cast<ssize_t>(big.size()));
  ASSERT_EQ(write(err[1], "e\n", 2), 2);
  close(out[1]);
  close(err[1]);
  RotatingLog o(dir_ + "/o", 1 << 20, 2), e(dir_ + "/e", 1 << 20, 2);
  EXPECT_EQ(pumpTaskOutput(out[0], err[0], o, e), 0);
  EXPECT_EQ(fs::file_size(dir_ + "/o"), big.size());
  EXPECT_EQ(slurp(dir_ + "/e"), "e\n");
  close(out[0]);
  close(err[0]);
}

}  // namespace
}  // namespace allot
