// base/secrets: random tokens from the kernel and the comparison of secrets.
#include "base/secrets.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace allot {
namespace {

TEST(RandomHex, GivesTwoLowerCaseHexDigitsPerByte) {
  std::string token = randomHex(16);
  EXPECT_EQ(token.size(), 32u);
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;
  EXPECT_EQ(randomHex(6).size(), 12u);
}

TEST(RandomHex, NeverRepeatsA128BitToken) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(seen.insert(randomHex(16)).second);
}

TEST(SameSecret, IsEqualityOfTheWholeSecret) {
  EXPECT_TRUE(sameSecret("abc123", "abc123"));
  EXPECT_TRUE(sameSecret("", ""));
  EXPECT_FALSE(sameSecret("abc123", "abc124")) << "last byte";
  EXPECT_FALSE(sameSecret("abc123", "bbc123")) << "first byte";
  EXPECT_FALSE(sameSecret("abc123", "abc12")) << "a prefix";
  EXPECT_FALSE(sameSecret("abc", std::string("abc\0", 4))) << "a trailing NUL";
}

}  // namespace
}  // namespace allot
