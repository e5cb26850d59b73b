#include "base/encoding.h"

namespace allot {
namespace {

constexpr char kLowerHex[] = "0123456789abcdef";
constexpr char kUpperHex[] = "0123456789ABCDEF";

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte %XX at text[at] spells, or -1 when text[at] does not start one.
int escapedByte(std::string_view text, size_t at) {
  if (text[at] != '%' || at + 2 >= text.size()) return -1;
  int hi = hexValue(text[at + 1]);
  int lo = hexValue(text[at + 2]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

void appendHex(std::string& out, const uint8_t* bytes, size_t n) {
  out.reserve(out.size() + 2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kLowerHex[bytes[i] >> 4];
    out += kLowerHex[bytes[i] & 0xf];
  }
}

std::string hexOf(const uint8_t* bytes, size_t n) {
  std::string out;
  appendHex(out, bytes, n);
  return out;
}

bool uriUnreserved(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

std::string percentEncode(std::string_view text, KeptByte kept) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (kept(c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kUpperHex[c >> 4];
      out += kUpperHex[c & 0xf];
    }
  }
  return out;
}

Result<std::string> percentDecode(std::string_view text, PercentDecoding how) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '+' && how.plusIsSpace) {
      out += ' ';
      continue;
    }
    if (c != '%') {
      out += c;
      continue;
    }
    int byte = escapedByte(text, i);
    if (byte < 0 && !how.keepBadEscapes) return Error{"bad %-escape at byte " + std::to_string(i)};
    if (byte < 0) {
      out += c;
      continue;
    }
    out += static_cast<char>(byte);
    i += 2;
  }
  return out;
}

}  // namespace allot
