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
// Kept identities (master/identity_store.h): with useIdentityStore(), a
// framework's owner (principal, hash of its secret) is written to the
// store before the claim that binds it (storeAhead, then claim), and
// removed from it when the id is forgotten. The identities an earlier
// leader stored are "kept" once loaded (identitiesLoaded): an id with a
// kept identity but no owner yet is taken over only with the same proof as
// an owned one (the principal over TLS, the secret without), and the claim
// makes it owned. Until they are loaded, a framework id nobody here owns is
// not taken over at all (awaitsIdentities). A kept identity nobody claims
// goes at its failover timeout after it was loaded (dropKeptBefore),
// unless the master still holds that framework.
//
// Invariants, kept here:
//   - a link speaks for at most one id (bind replaces the link's id);
//   - heldBy(kind, principal) is the number of ids of that kind owned by
//     that principal, whatever the order of claims, re-claims and forgets;
//   - mayTakeOver() is the only rule deciding who may register an id that
//     exists; claim() never changes an owned id's secret;
//   - with a store, a framework claim binds nothing the store does not
//     hold (claimNeedsStore() is false when it is called);
//   - at most kStoredIdentitiesMax framework ids are in the store or on
//     their way to it.
//
// Thread: the master's thread.
#pragma once

#include <array>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
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
  PeerTable() = default;
  PeerTable(const PeerTable&) = delete;
  PeerTable& operator=(const PeerTable&) = delete;
  ~PeerTable() { *alive_ = false; }

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
  // whose peer presents the secret the old leader gave it, or the one
  // secretFor() chose), else a fresh one from `ids`. Call after
  // mayTakeOver() allowed it and, for a framework, once
  // claimNeedsStore() is false.
  const IdOwner& claim(IdKind kind, const std::string& id, const std::string& principal,
                       const std::string& adoptSecret, RandomIds& ids);
  // The id is gone (framework removed, agent removed); so is its kept
  // identity, in the store too.
  void forget(IdKind kind, const std::string& id);

  // ---- kept framework identities
  // From now on framework owners are written to `store` (not owned; it
  // outlives the table). What it holds is unknown until
  // identitiesLoaded(). Call once, before the first claim.
  void useIdentityStore(IdentityStore* store);
  // `loaded`: what the store held, trusted as kept identities from `now`
  // on. Call once, after useIdentityStore().
  void identitiesLoaded(StoredIdentities loaded, TimePoint now);
  // True with a store whose identities are not loaded yet.
  bool identitiesPending() const { return store_ != nullptr && !loaded_; }
  // Must a registration of framework `id` wait for the kept identities? An
  // id nobody here owns or wrote ahead may be bound in the store: until it
  // is read, it is not taken over (mayTakeOver refuses it too).
  bool awaitsIdentities(const std::string& frameworkId) const;
  // The secret claim(kFramework, id, ..., adoptSecret, ids) would bind.
  std::string secretFor(const std::string& frameworkId, const std::string& adoptSecret, RandomIds& ids) const;
  // Would claiming framework `id` for `principal` with `secret` bind what
  // the store does not hold yet? Never without a store.
  bool claimNeedsStore(const std::string& frameworkId, const std::string& principal,
                       const std::string& secret) const;
  // Writes that binding (failover timeout `failoverTimeout`) ahead of the
  // claim. `done` runs on the loop when the store has answered: ok, the
  // claim may follow (and writes nothing); an error (the store's, or the id
  // was forgotten meanwhile), it may not. Refused at once (done never
  // runs) beyond kStoredIdentitiesMax. One write ahead per id at a time.
  Status storeAhead(const std::string& frameworkId, const std::string& principal, const std::string& secret,
                    Duration failoverTimeout, IdentityStore::DoneFn done);
  // A write ahead that no claim followed: its binding leaves the store
  // unless the id is owned or kept. No-op for a write still under way.
  void dropAhead(const std::string& frameworkId);
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
  void aheadAnswered(const std::string& frameworkId, Status written, const IdentityStore::DoneFn& done);

  std::unordered_map<PeerId, PeerLink> links_;
  std::deque<std::pair<TimePoint, PeerId>> unregistered_;  // connection order
  std::array<Owners, 2> owners_;
  std::array<std::unordered_map<std::string, size_t>, 2> held_;  // principal -> ids owned
  // A binding written ahead of its claim.
  struct Ahead {
    std::string principal;
    std::string secret;
    bool answered = false;  // the store holds it
    bool valid = true;      // no forget() since it was sent
    bool counted = false;   // in storedCount_ on its own account
  };

  IdentityStore* store_ = nullptr;
  bool loaded_ = false;
  // Framework ids in store_ or on their way (kept, stored owners, counted
  // writes ahead), at most kStoredIdentitiesMax.
  size_t storedCount_ = 0;
  std::unordered_map<std::string, Ahead> ahead_;  // one per id; at most one per registering link
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for store answers
  StoredIdentities kept_;   // loaded, not claimed yet
  std::multimap<TimePoint, std::string> keptUntil_;  // failover deadline -> id in kept_
};

}  // namespace allot
