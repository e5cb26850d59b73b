#include "master/ids.h"

#include <sys/random.h>

#include <cerrno>

#include "base/check.h"

namespace allot {

void RandomIds::appendHex(std::string* out) {
  constexpr size_t kBytes = 16;
  if (used_ + kBytes > pool_.size()) {
    size_t filled = 0;
    while (filled < pool_.size()) {
      ssize_t n = getrandom(pool_.data() + filled, pool_.size() - filled, 0);
      // getrandom without GRND_NONBLOCK only fails with EINTR once the
      // kernel pool is initialized (it blocks before that).
      if (n < 0 && errno == EINTR) continue;
      CHECK(n > 0);
      filled += static_cast<size_t>(n);
    }
    used_ = 0;
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < kBytes; ++i) {
    uint8_t b = pool_[used_ + i];
    out->push_back(kDigits[b >> 4]);
    out->push_back(kDigits[b & 15]);
  }
  used_ += kBytes;
}

std::string RandomIds::id(char kind) {
  std::string out;
  out.reserve(34);
  out.push_back(kind);
  out.push_back('-');
  appendHex(&out);
  return out;
}

std::string RandomIds::secret() {
  std::string out;
  out.reserve(32);
  appendHex(&out);
  return out;
}

}  // namespace allot
