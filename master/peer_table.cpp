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
                                const std::string& adoptSecret, RandomIds& ids,
                                Duration failoverTimeout) {
  auto [it, fresh] = owners(kind).try_emplace(id);
  IdOwner& o = it->second;
  bool changed = fresh || o.principal != principal;
  if (fresh) {
    o.secret = adoptSecret.empty() ? ids.secret() : adoptSecret;
    // A kept identity becomes this owner (its store entry is rewritten
    // below, with the secret the claim proved or a fresh one).
    if (kind == IdKind::kFramework && kept_.erase(id) > 0) o.stored = true;
  } else {
    count(kind, o.principal, -1);
  }
  o.principal = principal;
  count(kind, principal, 1);
  if (kind == IdKind::kFramework && changed) store(id, o, failoverTimeout);
  return o;
}

void PeerTable::forget(IdKind kind, const std::string& id) {
  bool stored = false;
  if (auto it = owners(kind).find(id); it != owners(kind).end()) {
    count(kind, it->second.principal, -1);
    stored = it->second.stored;
    owners(kind).erase(it);
  }
  if (kind == IdKind::kFramework) stored = kept_.erase(id) > 0 || stored;
  if (!stored) return;
  --storedCount_;
  if (store_ != nullptr) store_->remove(id);
}

void PeerTable::store(const std::string& frameworkId, IdOwner& owner, Duration failoverTimeout) {
  if (store_ == nullptr) return;
  if (!owner.stored && storedCount_ >= kStoredIdentitiesMax) {
    LOG_WARNING("framework " << frameworkId << ": " << kStoredIdentitiesMax
                             << " identities are kept already; this one will not survive a failover");
    return;
  }
  if (!owner.stored) ++storedCount_;
  owner.stored = true;
  store_->put(frameworkId, StoredIdentity{owner.principal, hashSecret(owner.secret), failoverTimeout});
}

void PeerTable::keepIdentitiesIn(IdentityStore* store, StoredIdentities loaded, TimePoint now) {
  CHECK(store_ == nullptr && storedCount_ == 0);
  store_ = store;
  kept_ = std::move(loaded);
  storedCount_ = kept_.size();
  for (const auto& [id, identity] : kept_) keptUntil_.emplace(now + identity.failoverTimeout, id);
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
