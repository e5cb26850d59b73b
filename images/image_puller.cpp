#include "images/image_puller.h"

namespace allot::images {

void ImagePuller::pull(const std::string& text, Done done) {
  Result<ImageReference> reference = parseReference(text);
  if (!reference) return done(reference.error());
  std::string key = reference->str();
  if (auto it = waiting_.find(key); it != waiting_.end()) {
    if (waiters_ >= kPullWaitersMax) return done(Error{"too many tasks wait for image pulls"});
    it->second.push_back(std::move(done));
    ++waiters_;
    return;
  }
  if (waiting_.size() >= kPullsInFlightMax)
    return done(Error{"more than " + std::to_string(kPullsInFlightMax) + " images are being pulled"});
  RegistryClient* client = &client_;
  LayerStore* store = &store_;
  Status queued = pool_.submit<Result<PulledImage>>(
      [client, store, ref = *reference] { return client->pull(ref, *store); },
      [this, alive = std::weak_ptr<int>(alive_), key](Result<PulledImage> result) {
        if (!alive.expired()) finish(key, result);
      });
  if (!queued) return done(Error{"pulling " + key + ": " + queued.error().message});
  waiting_[key].push_back(std::move(done));
  ++waiters_;
}

void ImagePuller::finish(const std::string& key, const Result<PulledImage>& result) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  std::vector<Done> callers = std::move(it->second);
  waiting_.erase(it);
  waiters_ -= callers.size();
  for (Done& done : callers) done(result);
}

}  // namespace allot::images
