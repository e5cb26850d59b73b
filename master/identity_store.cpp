#include "master/identity_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <vector>

#include "base/asio.h"
#include "base/encoding.h"
#include "base/secrets.h"
#include "base/unique_fd.h"
#include "base/files.h"
#include "base/log.h"

namespace allot {
namespace {

constexpr size_t kSaltBytes = 16;
constexpr std::string_view kHashScheme = "sha256:";
constexpr std::string_view kMagic = "allot-identity 1";

std::string saltedDigest(std::string_view saltHex, std::string_view secret) {
  std::string input(saltHex);
  input.append(":");
  input.append(secret);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // EVP_Digest with SHA-256 fails only on allocation failure.
  if (EVP_Digest(input.data(), input.size(), digest, &length, EVP_sha256(), nullptr) != 1) std::abort();
  return hexOf(digest, length);
}

// A lone "%" is the empty string (percentDecode() would refuse it).
Result<std::string> unescape(std::string_view text) {
  if (text == "%") return std::string();
  return percentDecode(text);
}

// A principal's bytes kept as they are in a record: visible ASCII but the
// escape and the field separator.
bool keptInPrincipal(unsigned char c) { return c >= '!' && c <= '~' && c != '%' && c != '='; }

std::string escapePrincipal(std::string_view principal) {
  if (principal.empty()) return "%";
  return percentEncode(principal, keptInPrincipal);
}

bool lowerHexDigit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool wellFormedHash(std::string_view stored) {
  if (stored.substr(0, kHashScheme.size()) != kHashScheme) return false;
  std::string_view rest = stored.substr(kHashScheme.size());
  size_t colon = rest.find(':');
  if (colon != kSaltBytes * 2 || rest.size() != colon + 1 + 64) return false;
  for (char c : rest) {
    if (c != ':' && !lowerHexDigit(c)) return false;
  }
  return true;
}

}  // namespace

std::string hashSecret(std::string_view secret) {
  std::array<uint8_t, kSaltBytes> salt{};
  fillRandom(salt.data(), salt.size());
  std::string saltHex = hexOf(salt.data(), salt.size());
  return std::string(kHashScheme) + saltHex + ":" + saltedDigest(saltHex, secret);
}

bool secretMatches(std::string_view secret, std::string_view stored) {
  if (!wellFormedHash(stored)) return false;
  std::string_view rest = stored.substr(kHashScheme.size());
  std::string_view saltHex = rest.substr(0, kSaltBytes * 2);
  std::string_view want = rest.substr(kSaltBytes * 2 + 1);
  std::string got = saltedDigest(saltHex, secret);
  return sameSecret(want, got);
}

std::string encodeIdentity(const StoredIdentity& identity) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(identity.failoverTimeout).count();
  return std::string(kMagic) + " principal=" + escapePrincipal(identity.principal) +
         " secret=" + identity.secretHash + " failover_ms=" + std::to_string(ms < 0 ? 0 : ms) + "\n";
}

Result<StoredIdentity> decodeIdentity(std::string_view text) {
  if (text.size() > kStoredIdentityBytesMax) return Error{"larger than " + std::to_string(kStoredIdentityBytesMax) + " bytes"};
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (text.substr(0, kMagic.size()) != kMagic) return Error{"not an allot-identity 1 record"};
  std::vector<std::string_view> words;
  for (size_t at = kMagic.size(); at < text.size();) {
    if (text[at] != ' ') return Error{"expected a blank before a field"};
    size_t end = text.find(' ', at + 1);
    words.push_back(text.substr(at + 1, end == std::string_view::npos ? end : end - at - 1));
    at = end == std::string_view::npos ? text.size() : end;
  }
  constexpr std::string_view kPrincipal = "principal=", kSecret = "secret=", kFailover = "failover_ms=";
  if (words.size() != 3 || words[0].substr(0, kPrincipal.size()) != kPrincipal ||
      words[1].substr(0, kSecret.size()) != kSecret || words[2].substr(0, kFailover.size()) != kFailover) {
    return Error{"expected principal=, secret= and failover_ms="};
  }
  StoredIdentity out;
  auto principal = unescape(words[0].substr(kPrincipal.size()));
  if (!principal) return principal.error();
  out.principal = std::move(*principal);
  out.secretHash = std::string(words[1].substr(kSecret.size()));
  if (!wellFormedHash(out.secretHash)) return Error{"secret is not sha256:<salt>:<hash>"};
  std::string_view ms = words[2].substr(kFailover.size());
  int64_t n = 0;
  auto [end, ec] = std::from_chars(ms.data(), ms.data() + ms.size(), n);
  if (ec != std::errc() || end != ms.data() + ms.size() || n < 0) return Error{"bad failover_ms"};
  out.failoverTimeout = std::chrono::milliseconds(n);
  return out;
}

std::string identityKey(std::string_view frameworkId) { return escapeId(frameworkId); }

Result<std::string> frameworkIdOfKey(std::string_view key) {
  auto id = unescape(key);
  if (!id) return id.error();
  if (escapeId(*id) != key) return Error{"'" + std::string(key) + "' is not an escaped framework id"};
  return id;
}

namespace {

class FileIdentityStore final : public IdentityStore {
 public:
  FileIdentityStore(asio::io_context& io, std::string dir) : io_(io), dir_(std::move(dir)) {}

  void load(LoadFn done) override {
    Result<StoredIdentities> result = read();
    asio::post(io_, [done = std::move(done), result = std::move(result)]() mutable {
      done(std::move(result));
    });
  }

  void put(const std::string& frameworkId, const StoredIdentity& identity, DoneFn done) override {
    std::string path = pathOf(frameworkId);
    Status st = writeFileAtomically(path, encodeIdentity(identity), /*durable=*/true, 0600);
    if (!st) st = Error{"cannot write " + path + ": " + st.error().describe()};
    asio::post(io_, [done = std::move(done), st = std::move(st)]() mutable { done(std::move(st)); });
  }

  void remove(const std::string& frameworkId) override {
    std::string path = pathOf(frameworkId);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      LOG_ERROR("cannot remove " << path << ": " << Error::fromErrno("unlink").describe());
    }
  }

  std::string describe() const override { return "directory " + dir_; }

 private:
  std::string pathOf(const std::string& frameworkId) const { return dir_ + "/" + identityKey(frameworkId); }

  Result<StoredIdentities> read() const {
    if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) return Error::fromErrno("cannot make " + dir_);
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return Error::fromErrno("cannot open " + dir_);
    StoredIdentities out;
    size_t skipped = 0;
    while (dirent* entry = ::readdir(d)) {
      std::string_view name = entry->d_name;
      if (name == "." || name == ".." || name.ends_with(".tmp")) continue;
      if (out.size() >= kStoredIdentitiesMax) {
        ++skipped;
        continue;
      }
      if (Status st = readOne(name, &out); !st) LOG_WARNING(st.error().describe() << "; ignored");
    }
    ::closedir(d);
    if (skipped > 0) {
      LOG_WARNING(dir_ << ": " << skipped << " identities beyond " << kStoredIdentitiesMax << " left unread");
    }
    return out;
  }

  Status readOne(std::string_view name, StoredIdentities* out) const {
    std::string path = dir_ + "/" + std::string(name);
    auto id = frameworkIdOfKey(name);
    if (!id) return Error{path + ": " + id.error().describe()};
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return Error::fromErrno("cannot open " + path);
    std::string text(kStoredIdentityBytesMax + 1, '\0');
    ssize_t n = ::read(fd.get(), text.data(), text.size());
    if (n < 0) return Error::fromErrno("cannot read " + path);
    text.resize(static_cast<size_t>(n));
    auto identity = decodeIdentity(text);
    if (!identity) return Error{path + ": " + identity.error().describe()};
    (*out)[*id] = std::move(*identity);
    return okStatus();
  }

  asio::io_context& io_;
  std::string dir_;
};

class UnpersistedIdentityStore final : public IdentityStore {
 public:
  explicit UnpersistedIdentityStore(asio::io_context& io) : io_(io) {}
  void load(LoadFn done) override {
    asio::post(io_, [done = std::move(done)] { done(StoredIdentities()); });
  }
  void put(const std::string&, const StoredIdentity&, DoneFn done) override {
    asio::post(io_, [done = std::move(done)] { done(okStatus()); });
  }
  void remove(const std::string&) override {}
  std::string describe() const override { return "none (no --zk or --work-dir)"; }

 private:
  asio::io_context& io_;
};

}  // namespace

std::unique_ptr<IdentityStore> makeFileIdentityStore(asio::io_context& io, std::string dir) {
  return std::make_unique<FileIdentityStore>(io, std::move(dir));
}

std::unique_ptr<IdentityStore> makeUnpersistedIdentityStore(asio::io_context& io) {
  return std::make_unique<UnpersistedIdentityStore>(io);
}

}  // namespace allot
