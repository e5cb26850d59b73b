#include "master/peer_table.h"

#include "base/check.h"
#include "base/log.h"
#include "base/secrets.h"
#include "master/ids.h"

namespace allot {
namespace {

const char* kindName(IdKind kind) { return kind == IdKind::kFramework ? "framework" : "agent"; }

}  // namespace

void PeerTable::connect(PeerId peer, wire::Role role, const PeerIdentity& auth, TimePoint now) {
  links_[peer] = PeerLink{role, "", auth};
  unregistered_.emplace_back(now, peer);
}

std::optional<PeerLink> PeerTable::close(PeerId peer) {
  auto it = links_.find(peer);
  if (it == links_.end()) return std::nullopt;
  PeerLink link = std::move(it->second);
  links_.erase(it);
  return link;
}

const PeerLink* PeerTable::link(PeerId peer) const {
  auto it = links_.find(peer);
  return it == links_.end() ? nullptr : &it->second;
}

void PeerTable::bind(PeerId peer, const std::string& id) {
  auto it = links_.find(peer);
  if (it != links_.end()) it->second.id = id;
}

std::vector<PeerId> PeerTable::takeUnregistered(TimePoint deadline) {
  std::vector<PeerId> overdue;
  while (!unregistered_.empty() && unregistered_.front().first <= deadline) {
    PeerId peer = unregistered_.front().second;
    unregistered_.pop_front();
    const PeerLink* l = link(peer);
    if (l != nullptr && l->id.empty()) overdue.push_back(peer);
  }
  return overdue;
}

Status PeerTable::mayTakeOver(IdKind kind, const std::string& id, const PeerIdentity& auth,
                              const std::string& secret) const {
  if (kind == IdKind::kFramework && awaitsIdentities(id)) {
    return Error{"framework " + id + ": the identities kept in " + store_->describe() + " are not read yet"};
  }
  const IdOwner* o = owner(kind, id);
  const StoredIdentity* k = o == nullptr && kind == IdKind::kFramework ? kept(id) : nullptr;
  if (o == nullptr && k == nullptr) return okStatus();
  const std::string& principal = o != nullptr ? o->principal : k->principal;
  bool allowed = auth.tls ? principal.empty() || principal == auth.principal
                 : o != nullptr ? o->secret.empty() || sameSecret(secret, o->secret)
                                : secretMatches(secret, k->secretHash);
  if (allowed) return okStatus();
  std::string what = std::string(kindName(kind)) + " " + id;
  if (auth.tls) return Error{what + " belongs to another principal"};
  return Error{what + ": " + kindName(kind) + "_secret does not match"};
}

const IdOwner& PeerTable::claim(IdKind kind, const std::string& id, const std::string& principal,
                                const std::string& adoptSecret, RandomIds& ids) {
  bool framework = kind == IdKind::kFramework;
  auto [it, fresh] = owners(kind).try_emplace(id);
  IdOwner& o = it->second;
  bool changed = fresh || o.principal != principal;
  if (fresh) {
    o.secret = adoptSecret.empty() ? ids.secret() : adoptSecret;
    // A kept identity becomes this owner; the store holds it already.
    if (framework && kept_.erase(id) > 0) o.stored = true;
  } else {
    count(kind, o.principal, -1);
  }
  o.principal = principal;
  count(kind, principal, 1);
  if (framework && changed && store_ != nullptr) {
    // The binding was written ahead (storeAhead); it is the owner's now.
    auto a = ahead_.find(id);
    CHECK(a != ahead_.end() && a->second.answered && a->second.valid && a->second.principal == principal &&
          a->second.secret == o.secret);
    o.stored = true;
    ahead_.erase(a);
  }
  return o;
}

void PeerTable::forget(IdKind kind, const std::string& id) {
  bool stored = false;
  if (auto it = owners(kind).find(id); it != owners(kind).end()) {
    count(kind, it->second.principal, -1);
    stored = it->second.stored;
    owners(kind).erase(it);
  }
  if (kind == IdKind::kFramework) {
    stored = kept_.erase(id) > 0 || stored;
    if (auto a = ahead_.find(id); a != ahead_.end()) {
      // Its answer will be refused; the remove below follows its write.
      a->second.valid = false;
      stored = a->second.counted || stored;
      a->second.counted = false;
    }
  }
  if (!stored) return;
  --storedCount_;
  if (store_ != nullptr) store_->remove(id);
}

void PeerTable::useIdentityStore(IdentityStore* store) {
  CHECK(store_ == nullptr && store != nullptr && owners(IdKind::kFramework).empty());
  store_ = store;
}

void PeerTable::identitiesLoaded(StoredIdentities loaded, TimePoint now) {
  CHECK(store_ != nullptr && !loaded_);
  loaded_ = true;
  for (auto& [id, identity] : loaded) {
    // An id bound since the store was opened (a new framework's) keeps
    // its newer binding.
    if (owners(IdKind::kFramework).count(id) > 0 || ahead_.count(id) > 0) continue;
    keptUntil_.emplace(now + identity.failoverTimeout, id);
    kept_.emplace(id, std::move(identity));
    ++storedCount_;
  }
}

bool PeerTable::awaitsIdentities(const std::string& frameworkId) const {
  // An id written ahead here is this master's own (a new framework's).
  return identitiesPending() && !frameworkId.empty() && owner(IdKind::kFramework, frameworkId) == nullptr &&
         ahead_.count(frameworkId) == 0;
}

std::string PeerTable::secretFor(const std::string& frameworkId, const std::string& adoptSecret,
                                 RandomIds& ids) const {
  if (const IdOwner* o = owner(IdKind::kFramework, frameworkId)) return o->secret;
  return adoptSecret.empty() ? ids.secret() : adoptSecret;
}

bool PeerTable::claimNeedsStore(const std::string& frameworkId, const std::string& principal,
                                const std::string& secret) const {
  if (store_ == nullptr) return false;
  const IdOwner* o = owner(IdKind::kFramework, frameworkId);
  if (o != nullptr && o->principal == principal) return false;
  auto a = ahead_.find(frameworkId);
  return a == ahead_.end() || !a->second.answered || !a->second.valid || a->second.principal != principal ||
         a->second.secret != secret;
}

Status PeerTable::storeAhead(const std::string& frameworkId, const std::string& principal,
                             const std::string& secret, Duration failoverTimeout, IdentityStore::DoneFn done) {
  dropAhead(frameworkId);
  CHECK(store_ != nullptr && ahead_.count(frameworkId) == 0);
  const IdOwner* o = owner(IdKind::kFramework, frameworkId);
  bool counted = !(o != nullptr && o->stored) && kept_.count(frameworkId) == 0;
  if (counted && storedCount_ >= kStoredIdentitiesMax) {
    return Error{std::to_string(kStoredIdentitiesMax) + " framework identities are kept already"};
  }
  if (counted) ++storedCount_;
  ahead_[frameworkId] = Ahead{principal, secret, false, true, counted};
  store_->put(frameworkId, StoredIdentity{principal, hashSecret(secret), failoverTimeout},
              [this, alive = alive_, frameworkId, done = std::move(done)](Status written) {
                if (*alive) aheadAnswered(frameworkId, std::move(written), done);
              });
  return okStatus();
}

void PeerTable::aheadAnswered(const std::string& frameworkId, Status written, const IdentityStore::DoneFn& done) {
  auto a = ahead_.find(frameworkId);
  CHECK(a != ahead_.end() && !a->second.answered);
  if (written && a->second.valid) {
    a->second.answered = true;
    return done(okStatus());
  }
  if (a->second.counted) --storedCount_;
  ahead_.erase(a);
  done(written ? Status(Error{"framework " + frameworkId + " was removed while its identity was being kept"})
               : written);
}

void PeerTable::dropAhead(const std::string& frameworkId) {
  auto a = ahead_.find(frameworkId);
  if (a == ahead_.end() || !a->second.answered) return;
  bool orphan = a->second.counted;
  ahead_.erase(a);
  // An owned or kept id's binding stays: it holds the same proof.
  if (!orphan) return;
  --storedCount_;
  store_->remove(frameworkId);
}

const StoredIdentity* PeerTable::kept(const std::string& frameworkId) const {
  auto it = kept_.find(frameworkId);
  return it == kept_.end() ? nullptr : &it->second;
}

size_t PeerTable::dropKeptBefore(TimePoint now, const std::function<bool(const std::string&)>& held) {
  size_t dropped = 0;
  while (!keptUntil_.empty() && keptUntil_.begin()->first <= now) {
    std::string id = std::move(keptUntil_.begin()->second);
    keptUntil_.erase(keptUntil_.begin());
    if (!kept_.count(id) || held(id)) continue;  // claimed meanwhile, or forget() drops it
    forget(IdKind::kFramework, id);
    ++dropped;
  }
  return dropped;
}

const IdOwner* PeerTable::owner(IdKind kind, const std::string& id) const {
  auto it = owners(kind).find(id);
  return it == owners(kind).end() ? nullptr : &it->second;
}

size_t PeerTable::heldBy(IdKind kind, const std::string& principal) const {
  const auto& held = held_[static_cast<size_t>(kind)];
  auto it = held.find(principal);
  return it == held.end() ? 0 : it->second;
}

Status PeerTable::withinLimit(IdKind kind, const std::string& id, const std::string& principal,
                              size_t max) const {
  const IdOwner* o = id.empty() ? nullptr : owner(kind, id);
  if (o != nullptr && o->principal == principal) return okStatus();
  size_t held = heldBy(kind, principal);
  if (held < max) return okStatus();
  std::string what = std::string(kindName(kind)) + "s";
  return Error{"principal '" + principal + "' holds " + std::to_string(held) + " " + what +
               " already (" + what + "_max=" + std::to_string(max) + ")"};
}

void PeerTable::count(IdKind kind, const std::string& principal, int delta) {
  auto& held = held_[static_cast<size_t>(kind)];
  size_t& n = held[principal];
  CHECK(delta > 0 || n > 0);
  n += delta;
  if (n == 0) held.erase(principal);
}

}  // namespace allot
