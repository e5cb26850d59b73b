#include "images/digest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/encoding.h"
#include "base/unique_fd.h"

namespace allot::images {

namespace {

constexpr size_t kQuoteBytesMax = 80;
// What hashing a blob reads from its file at a time.
constexpr size_t kHashReadChunkBytes = 1u << 16;

std::string quote(std::string_view text) {
  std::string shown(text.substr(0, kQuoteBytesMax));
  if (text.size() > kQuoteBytesMax) shown += "...";
  return "'" + shown + "'";
}

bool isLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

Result<Digest> parseDigest(std::string_view text) {
  constexpr std::string_view kPrefix = "sha256:";
  if (text.substr(0, kPrefix.size()) != kPrefix)
    return Error{"digest " + quote(text) + " is not sha256:<hex> (only sha256 is accepted)"};
  std::string_view hex = text.substr(kPrefix.size());
  if (hex.size() != 64) return Error{"digest " + quote(text) + " has not 64 hex characters"};
  for (char c : hex)
    if (!isLowerHex(c)) return Error{"digest " + quote(text) + " has a character outside [0-9a-f]"};
  return Digest{std::string(hex)};
}

struct Sha256::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

// EVP fails only on allocation failure, which the process does not survive
// anyway (as in base/files.cpp).
Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  if (ctx_->md == nullptr || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1) std::abort();
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t size) {
  if (EVP_DigestUpdate(ctx_->md, data, size) != 1) std::abort();
}

Digest Sha256::finish() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx_->md, out, &length) != 1) std::abort();
  Digest digest;
  digest.hex = hexOf(out, length);
  return digest;
}

Digest sha256Of(std::string_view data) {
  Sha256 hash;
  hash.update(data.data(), data.size());
  return hash.finish();
}

Status verifyBlobFile(const std::string& path, const Digest& digest, uint64_t size) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return Error::fromErrno("open blob " + path);
  Sha256 hash;
  uint64_t total = 0;
  std::string buffer(kHashReadChunkBytes, '\0');
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::fromErrno("read blob " + path);
    if (n == 0) break;
    total += static_cast<uint64_t>(n);
    if (total > size)
      return Error{"blob " + digest.str() + " is larger than its declared " + std::to_string(size) +
                   " bytes"};
    hash.update(buffer.data(), static_cast<size_t>(n));
  }
  if (total != size)
    return Error{"blob " + digest.str() + " has " + std::to_string(total) + " bytes, " +
                 std::to_string(size) + " declared"};
  Digest actual = hash.finish();
  if (actual != digest)
    return Error{"blob " + digest.str() + " does not match its digest (content is " + actual.str() + ")"};
  return okStatus();
}

}  // namespace allot::images
