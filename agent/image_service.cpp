#include "agent/image_service.h"

#include "base/log.h"

namespace allot {

namespace {

ContainerImage containerImage(const images::PulledImage& pulled) {
  ContainerImage image;
  for (const images::Digest& layer : pulled.layers) image.layers.push_back(layer.hex);
  image.entrypoint = pulled.exec.entrypoint;
  image.cmd = pulled.exec.cmd;
  image.env = pulled.exec.env;
  image.workingDir = pulled.exec.workingDir;
  image.user = pulled.exec.user;
  return image;
}

// Holds `layers` in `store` until the returned pointer's last copy goes.
Result<std::shared_ptr<void>> holdLayers(images::LayerStore& store, const std::vector<images::Digest>& layers) {
  auto taken = std::make_shared<std::vector<images::Digest>>();
  for (const images::Digest& layer : layers) {
    if (!store.acquire(layer)) {
      for (const images::Digest& d : *taken) store.release(d);
      return Error{"layer " + layer.str() + " left the image store"};
    }
    taken->push_back(layer);
  }
  return std::shared_ptr<void>(nullptr, [&store, taken](void*) {
    for (const images::Digest& d : *taken) store.release(d);
  });
}

}  // namespace

Result<std::unique_ptr<ImageService>> ImageService::create(asio::io_context& io, const ImageServiceOptions& options,
                                                           std::unique_ptr<WorkerPool> pool) {
  if (!pool) {
    pool = std::make_unique<WorkerPool>(io, WorkerPoolOptions{.threads = kImagePullThreads,
                                                              .queueMax = images::kPullsInFlightMax * 2,
                                                              .niceness = kBackgroundNiceness,
                                                              .name = "allot-pull"});
  }
  std::unique_ptr<ImageService> service(new ImageService(std::move(pool)));
  auto store = images::LayerStore::open({.root = options.workDir + "/images", .bytesMax = options.cacheBytesMax});
  if (!store) return Error{"image store: " + store.error().describe()};
  service->store_ = std::move(*store);
  auto client = images::RegistryClient::create(options.registry);
  if (!client) return Error{"registry client: " + client.error().describe()};
  service->client_ = std::move(*client);
  service->puller_ = std::make_unique<images::ImagePuller>(*service->pool_, *service->client_, *service->store_);
  return service;
}

void ImageService::pull(const std::string& reference, ExecutorManagerOptions::ImageDone done) {
  if (!evicting_) return start(reference, std::move(done));
  if (deferred_.size() >= images::kPullWaitersMax) return done(Error{"too many tasks wait for image pulls"});
  deferred_.emplace_back(reference, std::move(done));
}

void ImageService::start(const std::string& reference, ExecutorManagerOptions::ImageDone done) {
  puller_->pull(reference, [this, done = std::move(done)](const Result<images::PulledImage>& pulled) {
    if (!pulled) return done(pulled.error());
    auto hold = holdLayers(*store_, pulled->layers);
    if (!hold) return done(hold.error());
    ContainerImage image = containerImage(*pulled);
    image.layersDir = store_->root() + "/layers";
    image.hold = std::move(*hold);
    done(std::move(image));
    evict();
  });
}

// Not while a pull is under way: it may have found a layer in the store
// that it has not held yet.
void ImageService::evict() {
  if (puller_->inFlight() > 0 || evicting_) return;
  images::LayerStore* store = store_.get();
  evicting_ = true;
  Status queued = pool_->submit<size_t>([store] { return store->evict().size(); }, [this](size_t removed) {
    if (removed) LOG_INFO("image store: evicted " << removed << " unused layers (--image-cache-max)");
    evicting_ = false;
    auto waiting = std::move(deferred_);
    deferred_.clear();
    for (auto& [reference, done] : waiting) start(reference, std::move(done));
  });
  if (!queued) {
    evicting_ = false;
    LOG_WARNING("image store: eviction skipped: " << queued.error().describe());
  }
}

}  // namespace allot
