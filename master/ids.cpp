#include "master/ids.h"

#include "base/encoding.h"
#include "base/secrets.h"

namespace allot {

void RandomIds::appendHex(std::string* out) {
  constexpr size_t kBytes = 16;
  if (used_ + kBytes > pool_.size()) {
    fillRandom(pool_.data(), pool_.size());
    used_ = 0;
  }
  allot::appendHex(*out, pool_.data() + used_, kBytes);  // base/encoding.h, not the member
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
