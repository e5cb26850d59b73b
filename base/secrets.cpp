#include "base/secrets.h"

#include <sys/random.h>

#include <cerrno>
#include <vector>

#include "base/check.h"
#include "base/encoding.h"

namespace allot {

void fillRandom(uint8_t* bytes, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::getrandom(bytes + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    CHECK(r > 0);
    got += static_cast<size_t>(r);
  }
}

std::string randomHex(size_t bytes) {
  std::vector<uint8_t> random(bytes);
  fillRandom(random.data(), random.size());
  return hexOf(random.data(), random.size());
}

bool sameSecret(std::string_view expected, std::string_view given) {
  if (expected.size() != given.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i] ^ given[i]);
  }
  return diff == 0;
}

}  // namespace allot
