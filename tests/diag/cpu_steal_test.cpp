// CpuSteal: the steal column of /proc/stat's cpuN lines. The parser on made-up
// and malformed text (the kernel's text is input: an Error, never a CHECK),
// the reader on a temp file and on this machine's /proc/stat.
#include "diag/cpu_steal.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace allot {
namespace {

constexpr const char* kTwoCpus =
    "cpu  7484170 2395106 1635872 3763556 94092 0 73317 17596 0 0\n"
    "cpu0 3639413 1282980 753641 1999237 14708 0 32743 8618 0 0\n"
    "cpu1 3844756 1112125 882230 1764319 79384 0 40574 8978 0 0\n"
    "intr 87443955 0 0 0 15520\n"
    "ctxt 1234\n";

TEST(CpuSteal, ParsesTheStealColumnOfEachCpuLine) {
  CpuSteal::Sample s;
  ASSERT_TRUE(CpuSteal::parse(kTwoCpus, s));
  EXPECT_EQ(s.cpus, 2u);
  EXPECT_EQ(s.ticks[0], 8618u);
  EXPECT_EQ(s.ticks[1], 8978u);
  EXPECT_EQ(s.ticks[2], CpuSteal::kUnknown);
}

TEST(CpuSteal, OfflineCpusAreUnknownAndOldKernelsColumnsSuffice) {
  // Exactly 8 values (kernels before guest time); cpu1 offline.
  CpuSteal::Sample s;
  ASSERT_TRUE(CpuSteal::parse("cpu 1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 80\ncpu2 1 2 3 4 5 6 7 82\n", s));
  EXPECT_EQ(s.cpus, 3u);
  EXPECT_EQ(s.ticks[0], 80u);
  EXPECT_EQ(s.ticks[1], CpuSteal::kUnknown);
  EXPECT_EQ(s.ticks[2], 82u);
}

TEST(CpuSteal, MalformedTextIsAnError) {
  CpuSteal::Sample s;
  EXPECT_FALSE(CpuSteal::parse("", s));
  EXPECT_FALSE(CpuSteal::parse("intr 1 2 3\n", s)) << "no cpuN line";
  EXPECT_FALSE(CpuSteal::parse("cpu0 1 2 3 4 5 6 7\n", s)) << "no steal column";
  EXPECT_FALSE(CpuSteal::parse("cpu0 1 2 3 4 5 6 7 x\n", s));
  EXPECT_FALSE(CpuSteal::parse("cpu0 1 2 3 4 5 6 7 -8\n", s));
  EXPECT_FALSE(CpuSteal::parse("cpu0 1 2 3 4 5 6 7 8x 9\n", s));
  EXPECT_FALSE(CpuSteal::parse("cpu0 1 2 3 4 5 6 7 99999999999999999999999\n", s)) << "overflow";
  EXPECT_FALSE(CpuSteal::parse("cpu0x 1 2 3 4 5 6 7 8\n", s));
  EXPECT_FALSE(CpuSteal::parse("cpu99999999999999999999999 1 2 3 4 5 6 7 8\n", s));
  EXPECT_FALSE(CpuSteal::parse("cpu0\n", s));
  auto error = CpuSteal::parse("cpu0 1 2 3 4 5 6 7\n", s);
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().message, "cpu0: no steal column (value 8 missing or not a number)");
}

TEST(CpuSteal, ALineCutOffByTheReadLimitIsIgnoredAndHighCpusAreNotKept) {
  CpuSteal::Sample s;
  ASSERT_TRUE(CpuSteal::parse("cpu0 1 2 3 4 5 6 7 8\ncpu1 1 2 3 4", s));
  EXPECT_EQ(s.cpus, 1u);
  ASSERT_TRUE(CpuSteal::parse("cpu0 1 2 3 4 5 6 7 8\ncpu256 1 2 3 4 5 6 7 9\n", s));
  EXPECT_EQ(s.cpus, 1u);
}

TEST(CpuSteal, StealSinceASampleInMilliseconds) {
  CpuSteal::Sample before, after;
  ASSERT_TRUE(CpuSteal::parse("cpu0 0 0 0 0 0 0 0 100\ncpu1 0 0 0 0 0 0 0 50\n", before));
  ASSERT_TRUE(CpuSteal::parse("cpu0 0 0 0 0 0 0 0 106\ncpu1 0 0 0 0 0 0 0 40\n", after));
  EXPECT_DOUBLE_EQ(after.stealMsSince(before, 0), 6 * CpuSteal::tickMs());
  EXPECT_DOUBLE_EQ(after.stealMsSince(before, 1), 0) << "backwards: hot-plug";
  EXPECT_DOUBLE_EQ(after.stealMsSince(before, 2), 0) << "unknown CPU";
  EXPECT_DOUBLE_EQ(after.stealMsSince(before, -1), 0);
}

TEST(CpuSteal, ReadsAFileAgainEachTime) {
  std::string path = ::testing::TempDir() + "cpu_steal_test_stat";
  auto write = [&](const char* text) { std::ofstream(path, std::ios::trunc) << text; };
  write("cpu0 0 0 0 0 0 0 0 7\n");
  CpuSteal steal(path);
  CpuSteal::Sample s;
  ASSERT_TRUE(steal.read(s));
  EXPECT_EQ(s.ticks[0], 7u);
  write("cpu0 0 0 0 0 0 0 0 9\n");
  ASSERT_TRUE(steal.read(s));
  EXPECT_EQ(s.ticks[0], 9u);
  write("cpu0 garbage\n");
  auto st = steal.read(s);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find(path), std::string::npos) << st.error().message;
  std::remove(path.c_str());

  CpuSteal missing("/nonexistent/stat");
  EXPECT_FALSE(missing.read(s));
}

TEST(CpuSteal, ReadsThisMachinesProcStat) {
  CpuSteal steal;
  CpuSteal::Sample s;
  auto st = steal.read(s);
  ASSERT_TRUE(st) << st.error().describe();
  EXPECT_GE(s.cpus, 1u);
  EXPECT_NE(s.ticks[0], CpuSteal::kUnknown);
}

}  // namespace
}  // namespace allot
