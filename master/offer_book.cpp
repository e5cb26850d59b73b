#include "master/offer_book.h"

#include "base/check.h"

namespace allot {

void OfferBook::add(const std::string& id, OfferRecord offer) {
  expiries_.emplace_back(offer.expiry, id);
  byFramework_[offer.frameworkId].insert(id);
  byAgent_[offer.agentId].insert(id);
  bool inserted = offers_.emplace(id, std::move(offer)).second;
  CHECK(inserted);
}

std::optional<OfferRecord> OfferBook::remove(const std::string& id) {
  auto it = offers_.find(id);
  if (it == offers_.end()) return std::nullopt;
  OfferRecord offer = std::move(it->second);
  offers_.erase(it);
  unindex(&byFramework_, offer.frameworkId, id);
  unindex(&byAgent_, offer.agentId, id);
  return offer;
}

const OfferRecord* OfferBook::find(const std::string& id) const {
  auto it = offers_.find(id);
  return it == offers_.end() ? nullptr : &it->second;
}

std::vector<std::string> OfferBook::ofFramework(const std::string& frameworkId) const {
  return listed(byFramework_, frameworkId);
}

std::vector<std::string> OfferBook::ofAgent(const std::string& agentId) const {
  return listed(byAgent_, agentId);
}

size_t OfferBook::countOfFramework(const std::string& frameworkId) const {
  auto it = byFramework_.find(frameworkId);
  return it == byFramework_.end() ? 0 : it->second.size();
}

size_t OfferBook::countOfAgent(const std::string& agentId) const {
  auto it = byAgent_.find(agentId);
  return it == byAgent_.end() ? 0 : it->second.size();
}

std::vector<std::string> OfferBook::takeExpired(TimePoint now) {
  std::vector<std::string> expired;
  while (!expiries_.empty() && expiries_.front().first <= now) {
    std::string id = std::move(expiries_.front().second);
    expiries_.pop_front();
    if (offers_.count(id)) expired.push_back(std::move(id));
  }
  return expired;
}

Result<AcceptableOffers> OfferBook::checkAccept(const std::string& frameworkId,
                                                const std::vector<std::string>& offerIds) const {
  if (offerIds.empty()) return Error{"no offer ids"};
  AcceptableOffers accepted;
  std::unordered_set<std::string> named;
  for (const std::string& id : offerIds) {
    const OfferRecord* offer = find(id);
    if (offer == nullptr || offer->frameworkId != frameworkId) {
      return Error{"offer " + id + " is unknown, was rescinded or belongs to another framework"};
    }
    if (!named.insert(id).second) return Error{"offer " + id + " is named more than once"};
    if (!accepted.agentId.empty() && offer->agentId != accepted.agentId) {
      return Error{"offers span more than one agent"};
    }
    accepted.agentId = offer->agentId;
    accepted.offered += offer->resources;
  }
  return accepted;
}

std::vector<std::string> OfferBook::ownOffers(const std::string& frameworkId,
                                              const std::vector<std::string>& offerIds) const {
  std::vector<std::string> own;
  std::unordered_set<std::string> named;
  for (const std::string& id : offerIds) {
    const OfferRecord* offer = find(id);
    if (offer == nullptr || offer->frameworkId != frameworkId) continue;
    if (named.insert(id).second) own.push_back(id);
  }
  return own;
}

void OfferBook::unindex(Index* index, const std::string& key, const std::string& offerId) {
  auto it = index->find(key);
  if (it == index->end()) return;
  it->second.erase(offerId);
  if (it->second.empty()) index->erase(it);
}

std::vector<std::string> OfferBook::listed(const Index& index, const std::string& key) {
  auto it = index.find(key);
  if (it == index.end()) return {};
  return {it->second.begin(), it->second.end()};
}

}  // namespace allot
