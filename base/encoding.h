// Byte spellings shared by every component: hex digits and percent-escapes
// (%XX). Each caller chooses which bytes it keeps as they are; the escape
// itself is spelled here once.
//
// Thread: any (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace allot {

// `n` bytes as 2n lower-case hex digits, appended to `out`.
void appendHex(std::string& out, const uint8_t* bytes, size_t n);
std::string hexOf(const uint8_t* bytes, size_t n);

// Which bytes percentEncode() keeps as they are; every other byte is
// written as %XX (upper-case hex).
using KeptByte = bool (*)(unsigned char);
std::string percentEncode(std::string_view text, KeptByte kept);
// RFC 3986's unreserved characters (ALPHA / DIGIT / "-" / "." / "_" / "~"):
// what a URI's query value keeps.
bool uriUnreserved(unsigned char c);

struct PercentDecoding {
  bool plusIsSpace = false;     // '+' decodes to ' ' (an HTML form's query)
  bool keepBadEscapes = false;  // a '%' without two hex digits stays as is
};
// Undoes percentEncode(): %XX (either case of hex) becomes its byte. A '%'
// not followed by two hex digits is an Error unless `how.keepBadEscapes`.
Result<std::string> percentDecode(std::string_view text, PercentDecoding how = {});

}  // namespace allot
