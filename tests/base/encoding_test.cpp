// base/encoding: hex and percent-escapes, the one spelling every component
// uses (file names, role names, query strings).
#include "base/encoding.h"

#include <gtest/gtest.h>

#include <string>

namespace allot {
namespace {

bool alnumOnly(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

TEST(Hex, SpellsEachByteAsTwoLowerCaseDigits) {
  const uint8_t bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(hexOf(bytes, sizeof bytes), "000fa5ff");
  std::string out = "x-";
  appendHex(out, bytes, 2);
  EXPECT_EQ(out, "x-000f");
}

TEST(PercentEncode, EscapesEveryByteTheCallerDoesNotKeepInUpperCaseHex) {
  EXPECT_EQ(percentEncode("ab/c d%\xff", alnumOnly), "ab%2Fc%20d%25%FF");
  EXPECT_EQ(percentEncode("", alnumOnly), "");
}

TEST(PercentEncode, AQueryValueKeepsOnlyUriUnreservedCharacters) {
  EXPECT_EQ(percentEncode("a b/\xc3\xa9-_.~Z9", uriUnreserved), "a%20b%2F%C3%A9-_.~Z9");
}

TEST(PercentDecode, UndoesTheEncodingForEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  auto back = percentDecode(percentEncode(all, alnumOnly));
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(*back, all);
  EXPECT_EQ(*percentDecode("%c3%A9"), "\xc3\xa9") << "either case of hex";
}

TEST(PercentDecode, RefusesABadEscapeUnlessToldToKeepIt) {
  for (const char* bad : {"%", "%4", "a%zz", "%4g", "abc%"}) {
    EXPECT_FALSE(percentDecode(bad)) << bad;
  }
  PercentDecoding lenient{.keepBadEscapes = true};
  EXPECT_EQ(*percentDecode("100%", lenient), "100%");
  EXPECT_EQ(*percentDecode("%zz%41", lenient), "%zzA");
}

TEST(PercentDecode, PlusIsASpaceOnlyInAForm) {
  EXPECT_EQ(*percentDecode("a+b%2B"), "a+b+");
  EXPECT_EQ(*percentDecode("a+b%2B", {.plusIsSpace = true}), "a b+");
}

}  // namespace
}  // namespace allot
