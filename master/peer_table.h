// PeerTable: the master's links and who owns which framework and agent id
// (docs/acls.md, docs/links.md section 3).
//
// Links: every connected peer with the role it said hello as, the identity
// its link proved (TLS: the certificate) and the id it registered, if any;
// and the peers not registered yet, in connection order, so the master
// closes those that stay unregistered too long.
//
// Owners: every framework and agent id a peer registered is bound to the
// principal of that peer's link and to a secret handed out with the id. An
// id learned otherwise (a new leader hears of frameworks from its agents)
// has no owner until a peer claims it.
//
// Kept identities (master/identity_store.h): with keepIdentitiesIn(), each
// framework owner is also written to the store (principal, hash of its
// secret), and removed from it when the id is forgotten; the identities an
// earlier leader stored are "kept": an id with a kept identity but no owner
// yet is taken over only with the same proof as an owned one (the
// principal over TLS, the secret without), and the claim makes it owned. A
// kept identity nobody claims goes at its failover timeout after it was
// loaded (dropKeptBefore), unless the master still holds that framework.
//
// Invariants, kept here:
//   - a link speaks for at most one id (bind replaces the link's id);
//   - heldBy(kind, principal) is the number of ids of that kind owned by
//     that principal, whatever the order of claims, re-claims and forgets;
//   - mayTakeOver() is the only rule deciding who may register an id that
//     exists; claim() never changes an owned id's secret.
//
// Thread: the master's thread.
#pragma once

#include <array>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "master/identity_store.h"
#include "proto/allot.pb.h"
#include "proto/peer_identity.h"

namespace allot {

class RandomIds;
using PeerId = uint64_t;

enum class IdKind { kFramework = 0, kAgent = 1 };

struct PeerLink {
  wire::Role role = wire::ROLE_UNKNOWN;
  std::string id;     // framework or agent id once registered, else empty
  PeerIdentity auth;  // who the link proved it is
};

struct IdOwner {
  std::string principal;  // of the link that registered the id
  std::string secret;     // handed out with the id (framework_secret, agent_secret)
  bool stored = false;    // a framework's: written to the identity store
};

class PeerTable {
 public:
  // ---- links
  void connect(PeerId peer, wire::Role role, const PeerIdentity& auth, TimePoint now);
  // Forgets the link; returns what it was (nullopt: unknown peer).
  std::optional<PeerLink> close(PeerId peer);
  const PeerLink* link(PeerId peer) const;
  // The link now speaks for `id` (empty: for none). No-op for an unknown peer.
  void bind(PeerId peer, const std::string& id);
  // Peers that connected at or before `deadline` and are still connected
  // and unregistered, oldest first; they leave the queue.
  std::vector<PeerId> takeUnregistered(TimePoint deadline);
  size_t linkCount() const { return links_.size(); }

  // ---- owners
  // May a peer whose link proved `auth`, presenting `secret`, register the
  // existing id `id`? An id without an owner may be claimed by anyone. An
  // owned id: over TLS only by the owner's principal; on a plaintext link
  // (no principal to compare) only with the owner's secret, compared in
  // time independent of where they differ.
  Status mayTakeOver(IdKind kind, const std::string& id, const PeerIdentity& auth,
                     const std::string& secret) const;
  // Binds `id` to `principal`. An owned id keeps its secret; a new owner
  // gets `adoptSecret` when not empty (an id a new leader did not know,
  // whose peer presents the secret the old leader gave it), else a fresh
  // one from `ids`. Call after mayTakeOver() allowed it. A framework's new
  // owner (or new principal) is written to the identity store with
  // `failoverTimeout`.
  const IdOwner& claim(IdKind kind, const std::string& id, const std::string& principal,
                       const std::string& adoptSecret, RandomIds& ids,
                       Duration failoverTimeout = {});
  // The id is gone (framework removed, agent removed); so is its kept
  // identity, in the store too.
  void forget(IdKind kind, const std::string& id);

  // ---- kept framework identities
  // From now on framework owners are written to `store` (not owned; it
  // outlives the table or is replaced). `loaded`: what it held, trusted as
  // kept identities from `now` on. Call once, before the first claim.
  void keepIdentitiesIn(IdentityStore* store, StoredIdentities loaded, TimePoint now);
  const StoredIdentity* kept(const std::string& frameworkId) const;
  size_t keptCount() const { return kept_.size(); }
  // Drops (here and in the store) the kept identities whose failover
  // timeout, counted from when they were loaded, has passed by `now`,
  // except those `held` says the master still holds (they go with
  // forget()). Returns how many went.
  size_t dropKeptBefore(TimePoint now, const std::function<bool(const std::string&)>& held);
  const IdOwner* owner(IdKind kind, const std::string& id) const;
  // Ids of `kind` that `principal` owns (per-principal limits, docs/acls.md).
  size_t heldBy(IdKind kind, const std::string& principal) const;
  // May `principal`, allowed at most `max` ids of `kind`, register `id`
  // (empty: a new one)? Always for an id it owns already; otherwise only
  // while it owns fewer than `max`.
  Status withinLimit(IdKind kind, const std::string& id, const std::string& principal,
                     size_t max) const;

 private:
  using Owners = std::unordered_map<std::string, IdOwner>;
  Owners& owners(IdKind kind) { return owners_[static_cast<size_t>(kind)]; }
  const Owners& owners(IdKind kind) const { return owners_[static_cast<size_t>(kind)]; }
  void count(IdKind kind, const std::string& principal, int delta);
  void store(const std::string& frameworkId, IdOwner& owner, Duration failoverTimeout);

  std::unordered_map<PeerId, PeerLink> links_;
  std::deque<std::pair<TimePoint, PeerId>> unregistered_;  // connection order
  std::array<Owners, 2> owners_;
  std::array<std::unordered_map<std::string, size_t>, 2> held_;  // principal -> ids owned
  IdentityStore* store_ = nullptr;
  size_t storedCount_ = 0;  // framework owners written to store_, at most kStoredIdentitiesMax
  StoredIdentities kept_;   // loaded, not claimed yet
  std::multimap<TimePoint, std::string> keptUntil_;  // failover deadline -> id in kept_
};

}  // namespace allot
