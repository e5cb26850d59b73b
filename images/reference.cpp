#include "images/reference.h"

#include <cctype>

namespace allot::images {

namespace {

bool isLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
bool validComponent(std::string_view c) {
  if (c.empty() || !isLowerAlnum(c.front()) || !isLowerAlnum(c.back())) return false;
  size_t i = 0;
  while (i < c.size()) {
    if (isLowerAlnum(c[i])) { ++i; continue; }
    size_t start = i;
    while (i < c.size() && !isLowerAlnum(c[i])) ++i;
    std::string_view sep = c.substr(start, i - start);
    bool dashes = sep.find_first_not_of('-') == std::string_view::npos;
    if (sep != "." && sep != "_" && sep != "__" && !dashes) return false;
  }
  return true;
}

bool validRepository(std::string_view name) {
  if (name.empty() || name.size() > kRepositoryBytesMax) return false;
  size_t start = 0;
  for (;;) {
    size_t slash = name.find('/', start);
    if (!validComponent(name.substr(start, slash - start))) return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

bool validTag(std::string_view tag) {
  if (tag.empty() || tag.size() > 128) return false;
  auto ok = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; };
  if (tag.front() == '.' || tag.front() == '-') return false;
  for (char c : tag)
    if (!ok(c)) return false;
  return true;
}

// host, host:port or [v6]:port; letters, digits, '.', '-' in the host.
bool validRegistry(std::string_view r) {
  if (r.empty() || r.size() > 255) return false;
  std::string_view host = r;
  std::string_view port;
  if (r.front() == '[') {
    size_t close = r.find(']');
    if (close == std::string_view::npos) return false;
    host = r.substr(1, close - 1);
    if (host.empty() || host.find_first_not_of("0123456789abcdefABCDEF:") != std::string_view::npos)
      return false;
    std::string_view rest = r.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return false;
    port = rest.empty() ? rest : rest.substr(1);
    if (!rest.empty() && port.empty()) return false;
  } else {
    size_t colon = r.find(':');
    if (colon != std::string_view::npos) {
      host = r.substr(0, colon);
      port = r.substr(colon + 1);
      if (port.empty()) return false;
    }
    if (host.empty()) return false;
    for (char c : host)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') return false;
  }
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) return false;
  return true;
}

bool looksLikeRegistry(std::string_view first) {
  return first.find('.') != std::string_view::npos || first.find(':') != std::string_view::npos ||
         first == "localhost" || (!first.empty() && first.front() == '[');
}

}  // namespace

std::string ImageReference::str() const {
  std::string out = registry + "/" + repository;
  if (!tag.empty()) out += ":" + tag;
  if (digest) out += "@" + digest->str();
  return out;
}

Result<ImageReference> parseReference(std::string_view text) {
  if (text.empty() || text.size() > kReferenceBytesMax)
    return Error{"image reference is empty or longer than " + std::to_string(kReferenceBytesMax) + " bytes"};
  std::string quoted = "image reference '" + std::string(text) + "'";
  ImageReference ref;
  if (size_t at = text.find('@'); at != std::string_view::npos) {
    Result<Digest> digest = parseDigest(text.substr(at + 1));
    if (!digest) return Error{quoted + ": " + digest.error().message};
    ref.digest = *digest;
    text = text.substr(0, at);
  }
  size_t slash = text.find('/');
  if (slash == std::string_view::npos || !looksLikeRegistry(text.substr(0, slash)))
    return Error{quoted + " names no registry (write REGISTRY/NAME:TAG, e.g. registry.example:5000/app:1)"};
  ref.registry = std::string(text.substr(0, slash));
  if (!validRegistry(ref.registry)) return Error{quoted + ": bad registry '" + ref.registry + "'"};
  std::string_view rest = text.substr(slash + 1);
  size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos) {
    ref.tag = std::string(rest.substr(colon + 1));
    if (!validTag(ref.tag)) return Error{quoted + ": bad tag '" + ref.tag + "'"};
    rest = rest.substr(0, colon);
  } else if (!ref.digest) {
    ref.tag = "latest";
  }
  ref.repository = std::string(rest);
  if (!validRepository(ref.repository))
    return Error{quoted + ": bad name '" + ref.repository + "' (lower-case components joined by '/')"};
  return ref;
}

}  // namespace allot::images
