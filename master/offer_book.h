// OfferBook: the master's outstanding offers, their expiry, the offers of
// each framework and each agent, and the rules an AcceptOffers must meet.
//
// An offer is outstanding from add() until remove(); the master removes it
// when the framework accepts or declines it, when it expires, and when its
// framework or agent goes. The book holds no resources itself: what an
// offer carries was taken from the allocator by the master, which returns
// it (or launches tasks with it) when it removes the offer.
//
// Invariants, kept here:
//   - every outstanding offer is listed under exactly its framework and its
//     agent (ofFramework, ofAgent), and no removed offer is;
//   - an offer id is outstanding at most once (add() of a live id is a
//     programmer error: ids are random 128-bit values);
//   - checkAccept() grants an accept only offers that are outstanding, the
//     sender's own, each named once and all on one agent, so no accept can
//     spend an offer twice or another framework's offer.
//
// Thread: the master's thread.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "proto/resources.h"

namespace allot {

struct OfferRecord {
  std::string frameworkId;
  std::string agentId;
  Resources resources;
  TimePoint expiry;
};

// What an accept may spend: the agent of its offers and their sum.
struct AcceptableOffers {
  std::string agentId;
  Resources offered;
};

class OfferBook {
 public:
  using Offers = std::unordered_map<std::string, OfferRecord>;

  void add(const std::string& id, OfferRecord offer);
  // Removes an outstanding offer and returns it (nullopt: not outstanding).
  std::optional<OfferRecord> remove(const std::string& id);
  const OfferRecord* find(const std::string& id) const;
  size_t size() const { return offers_.size(); }
  // Every outstanding offer by id (/state).
  const Offers& all() const { return offers_; }
  // The ids of a framework's or an agent's outstanding offers (a copy: the
  // caller usually removes them).
  std::vector<std::string> ofFramework(const std::string& frameworkId) const;
  std::vector<std::string> ofAgent(const std::string& agentId) const;
  size_t countOfFramework(const std::string& frameworkId) const;
  size_t countOfAgent(const std::string& agentId) const;
  // Outstanding offers whose expiry is at or before `now`, oldest first
  // (they stay outstanding until removed).
  std::vector<std::string> takeExpired(TimePoint now);

  // The accept rules: at least one offer id; every id outstanding and
  // offered to `frameworkId`; no id named twice; all on one agent. On
  // success, that agent and the offers' sum; else the first broken rule.
  // Changes nothing.
  Result<AcceptableOffers> checkAccept(const std::string& frameworkId,
                                       const std::vector<std::string>& offerIds) const;
  // Of `offerIds`, those outstanding and offered to `frameworkId`, each
  // once: what a refused accept releases.
  std::vector<std::string> ownOffers(const std::string& frameworkId,
                                     const std::vector<std::string>& offerIds) const;

 private:
  using Index = std::unordered_map<std::string, std::unordered_set<std::string>>;
  static void unindex(Index* index, const std::string& key, const std::string& offerId);
  static std::vector<std::string> listed(const Index& index, const std::string& key);

  Offers offers_;
  Index byFramework_;
  Index byAgent_;
  // (expiry, id) in creation order; ids of offers removed early stay until
  // their expiry passes (at most one entry per offer made in the last
  // --offer-timeout).
  std::deque<std::pair<TimePoint, std::string>> expiries_;
};

}  // namespace allot
