#include "master/peer_table.h"

#include "base/check.h"
#include "master/ids.h"

namespace allot {
namespace {

// Compares secrets in time independent of where they differ.
bool sameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

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
  if (o == nullptr) return okStatus();
  bool allowed = auth.tls ? o->principal.empty() || o->principal == auth.principal
                          : o->secret.empty() || sameSecret(secret, o->secret);
  if (allowed) return okStatus();
  std::string what = std::string(kindName(kind)) + " " + id;
  if (auth.tls) return Error{what + " belongs to another principal"};
  return Error{what + ": " + kindName(kind) + "_secret does not match"};
}

const IdOwner& PeerTable::claim(IdKind kind, const std::string& id, const std::string& principal,
                                const std::string& adoptSecret, RandomIds& ids) {
  auto [it, fresh] = owners(kind).try_emplace(id);
  IdOwner& o = it->second;
  if (fresh) {
    o.secret = adoptSecret.empty() ? ids.secret() : adoptSecret;
  } else {
    count(kind, o.principal, -1);
  }
  o.principal = principal;
  count(kind, principal, 1);
  return o;
}

void PeerTable::forget(IdKind kind, const std::string& id) {
  auto it = owners(kind).find(id);
  if (it == owners(kind).end()) return;
  count(kind, it->second.principal, -1);
  owners(kind).erase(it);
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
