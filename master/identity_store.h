// Framework identities that outlive a leader: which principal registered a
// framework id (mutual TLS) and a salted hash of the secret handed out
// with it (plaintext), kept where the next leader can trust them, so that
// taking an id over after a failover needs the same proof as before it
// (PeerTable::mayTakeOver, docs/acls.md).
//
// IdentityStore is the seam, with three implementations:
//   makeFileIdentityStore        one file per framework in a directory of
//                                --work-dir (a master without --zk);
//   makeZooKeeperIdentityStore   one znode per framework under the group
//                                (master/identity_store_zk.h), writable
//                                only by the masters with --zk-credentials;
//   makeUnpersistedIdentityStore nothing kept (no --zk, no --work-dir);
// and a fake for unit tests (tests/master/fake_identity_store.h).
//
// Contract, for every implementation:
//   - load() before put() or remove() can be trusted; its completion runs
//     on the io_context thread, never inside the call, with at most
//     kStoredIdentitiesMax identities (what lies beyond is left unread and
//     logged) or an error saying what was wrong. After an error load() may
//     be called again (the master retries); never while one is running.
//   - put() and remove() are applied in call order and never block on a
//     peer. put()'s completion runs on the io_context thread, never inside
//     the call, once the identity is kept (the file fsync'd, ZooKeeper's
//     answer) or with the error that kept it out: the master answers a
//     registration only after it (master/master.h). remove() failures are
//     logged by the store.
//   - The secret itself is never stored: only hashSecret()'s output.
//
// Thread: the master's io_context thread.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/clock.h"
#include "base/result.h"

namespace boost::asio {
class io_context;
}

namespace allot {

struct StoredIdentity {
  std::string principal;   // of the link that registered the id ("" without TLS)
  std::string secretHash;  // hashSecret() of the framework_secret
  Duration failoverTimeout{};  // the framework's, as it registered
  bool operator==(const StoredIdentity&) const = default;
};
using StoredIdentities = std::unordered_map<std::string, StoredIdentity>;  // by framework id

// Identities kept at most: one znode each, and a ZooKeeper children list
// of this many 34-byte framework ids stays well below the 1 MB reply limit
// (jute.maxbuffer). Frameworks beyond it are not kept (logged).
constexpr size_t kStoredIdentitiesMax = 20000;
// One stored identity, encoded, is at most this large.
constexpr size_t kStoredIdentityBytesMax = 1024;

// "sha256:<salt hex>:<hex of SHA-256(salt | secret)>", a fresh 16-byte salt
// from the kernel each call.
std::string hashSecret(std::string_view secret);
// Does `secret` hash to `stored` (hashSecret's form)? Compared in time
// independent of where they differ; false for a malformed `stored`.
bool secretMatches(std::string_view secret, std::string_view stored);

// The stored form, one line:
//   allot-identity 1 principal=<escaped> secret=sha256:<salt>:<hash> failover_ms=<n>
// The principal is percent-escaped (bytes outside '!'..'~', '%' and '='
// as %XX; the empty principal as a lone %).
std::string encodeIdentity(const StoredIdentity& identity);
Result<StoredIdentity> decodeIdentity(std::string_view text);
// A framework id as a file or znode name: bytes outside [A-Za-z0-9_-] as
// %XX (so never '/', '.' or '..'); the empty id as a lone %.
std::string identityKey(std::string_view frameworkId);
Result<std::string> frameworkIdOfKey(std::string_view key);

class IdentityStore {
 public:
  using LoadFn = std::function<void(Result<StoredIdentities>)>;
  using DoneFn = std::function<void(Status)>;

  virtual ~IdentityStore() = default;
  virtual void load(LoadFn done) = 0;
  virtual void put(const std::string& frameworkId, const StoredIdentity& identity, DoneFn done) = 0;
  virtual void remove(const std::string& frameworkId) = 0;
  // Where the identities live, for logs ("directory /var/...").
  virtual std::string describe() const = 0;
};

// <dir>/<identityKey(id)>: written as <file>.tmp, fsync'd and renamed
// (base/files.h); `dir` is made at load() if missing. Small files written
// at registration rate, so the writes run on the loop; put()'s completion
// is posted after the rename.
std::unique_ptr<IdentityStore> makeFileIdentityStore(boost::asio::io_context& io, std::string dir);

// Keeps nothing: load() yields no identities, put() succeeds.
std::unique_ptr<IdentityStore> makeUnpersistedIdentityStore(boost::asio::io_context& io);

}  // namespace allot
