// Content digests of OCI blobs ("sha256:<64 lower-case hex>") and the
// SHA-256 that checks them. Only sha256 is accepted: it is what registries
// serve, and a digest is used as a file name only after parseDigest() has
// checked its grammar (an unchecked digest was a path traversal in
// containers/image, CVE-2024-3727).
//
// Thread: Sha256 is one object per thread; the functions are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace allot::images {

struct Digest {
  std::string hex;  // 64 lower-case hex characters

  std::string str() const { return "sha256:" + hex; }
  bool operator==(const Digest&) const = default;
  auto operator<=>(const Digest&) const = default;
};

// "sha256:" followed by exactly 64 of [0-9a-f]; anything else is an Error
// that quotes (a bounded prefix of) the input.
Result<Digest> parseDigest(std::string_view text);

// Incremental SHA-256 (OpenSSL EVP).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t size);
  // The digest of everything given so far; the object is spent afterwards.
  Digest finish();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

Digest sha256Of(std::string_view data);

// Checks that the file at `path` holds exactly `size` bytes whose SHA-256 is
// `digest`; the error says which (size or digest) and both values.
Status verifyBlobFile(const std::string& path, const Digest& digest, uint64_t size);

}  // namespace allot::images
