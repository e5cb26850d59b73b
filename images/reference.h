// Image references as users write them: REGISTRY/NAME:TAG or
// REGISTRY/NAME@sha256:<hex> (both: the digest is what is pulled). allot has
// no default registry: the first component names one (it holds a '.' or a
// ':' or is "localhost"), so `busybox:1.36` is refused with a hint.
//
// Grammar (distribution/reference): a NAME is components of
// [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* joined by '/'; a TAG is
// [A-Za-z0-9_][A-Za-z0-9._-]{0,127}; no tag and no digest means "latest".
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "images/digest.h"

namespace allot::images {

inline constexpr size_t kReferenceBytesMax = 512;
inline constexpr size_t kRepositoryBytesMax = 255;

struct ImageReference {
  std::string registry;    // host[:port], as written
  std::string repository;  // "library/busybox"
  std::string tag;         // "latest" when neither tag nor digest was given
  std::optional<Digest> digest;

  // What the registry is asked for: the digest when there is one, else the tag.
  std::string manifestRef() const { return digest ? digest->str() : tag; }
  // The canonical spelling: registry/repository[:tag][@digest].
  std::string str() const;
};

Result<ImageReference> parseReference(std::string_view text);

}  // namespace allot::images
