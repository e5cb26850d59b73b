#include "base/result.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace allot {
namespace {

Result<int> half(int x) {
  if (x % 2 != 0) return Error{"odd: " + std::to_string(x)};
  return x / 2;
}

TEST(Result, CarriesValueOrError) {
  auto good = half(4);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 2);
  auto bad = half(3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "odd: 3");
}

TEST(Result, DescribeAppendsErrnoText) {
  Error e{"open /nope", ENOENT};
  EXPECT_EQ(e.describe(), "open /nope: No such file or directory");
  EXPECT_EQ(Error{"plain"}.describe(), "plain");
}

TEST(ResultDeathTest, ValueOfErrorIsAProgrammerError) {
  auto bad = half(1);
  EXPECT_DEATH((void)bad.value(), "CHECK failed");
}

}  // namespace
}  // namespace allot
