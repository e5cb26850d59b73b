// RegistryClient: pulls an image over the OCI distribution API into the
// layer store. HTTPS verified against the operator's CA (or the system's);
// plain HTTP only for loopback registries and those the operator lists as
// insecure. Bearer tokens (and Basic) from a credentials file; OCI and
// Docker schema-2 manifests, indexes and manifest lists (the node's
// platform is picked); every manifest, config and layer checked against
// its digest and size, each under a named cap (images/image_limits.h). Redirects
// are followed (at most kRedirectsMax) without the Authorization field
// when they leave the registry's host.
//
// Credentials file: one registry per line, "REGISTRY USER PASSWORD"
// (whitespace-separated; '#' starts a comment line).
//
// Thread: pull() blocks (network, disk): call it from a worker, never from
// a daemon's loop. Concurrent pull()s on one client are fine, and a layer
// that several of them need at once is downloaded once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "images/digest.h"
#include "images/layer_store.h"
#include "images/reference.h"
#include "images/registry_http.h"

namespace allot::images {

inline constexpr int kRedirectsMax = 3;
inline constexpr size_t kCredentialsFileBytesMax = 64u << 10;
inline constexpr size_t kTokenAnswerBytesMax = 64u << 10;

struct RegistryOptions {
  std::string caFile;                           // PEM; "" = the system's store
  std::vector<std::string> insecureRegistries;  // "host" or "host:port": plain HTTP
  std::string credentialsFile;                  // "" = anonymous
  std::chrono::milliseconds ioTimeout{30'000};  // silence that ends an exchange
  std::string os = "linux";
  std::string architecture;                     // "" = this node's (nodeArchitecture())
};

// What the task's process is made from, from the image's config.
struct ImageExec {
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::vector<std::string> env;  // "K=V"
  std::string workingDir;
  std::string user;
};

struct PulledImage {
  ImageReference reference;
  Digest manifest;             // of the platform's manifest
  std::vector<Digest> layers;  // bottom first; all in the store
  ImageExec exec;
};

// This node's architecture as OCI names it ("amd64", "arm64", ...).
std::string nodeArchitecture();

class RegistryClient {
 public:
  static Result<std::unique_ptr<RegistryClient>> create(const RegistryOptions& options);

  // Resolves `reference` to this node's manifest and brings every layer the
  // store lacks into it. The error names the reference and what failed.
  Result<PulledImage> pull(const ImageReference& reference, LayerStore& store);

  // Layer blobs downloaded so far (tests: one download per layer).
  uint64_t layerDownloads() const { return layerDownloads_; }

 private:
  struct Session;
  struct Credentials {
    std::string user;
    std::string password;
  };

  RegistryClient(const RegistryOptions& options) : options_(options) {}
  Status loadCredentials();
  bool allowsPlain(const Url& url) const;
  Result<HttpAnswer> get(Session& session, const std::string& path, const std::string& accept,
                         uint64_t bodyBytesMax, const BodySink* sink);
  Status authenticate(Session& session, const std::string& challenge);
  Status fetchToken(Session& session, const std::map<std::string, std::string>& params);
  Result<std::string> fetchManifest(Session& session, const std::string& ref, const Digest* expected,
                                    uint64_t expectedSize, std::string* mediaType);
  Result<PulledImage> resolve(Session& session, const ImageReference& reference, std::vector<uint64_t>* sizes);
  Status fetchConfig(Session& session, const std::string& digest, int64_t size, ImageExec* exec);
  Status fetchLayers(Session& session, const std::vector<Digest>& layers, const std::vector<uint64_t>& sizes,
                     LayerStore& store);
  Status downloadLayer(Session& session, const Digest& digest, uint64_t size, LayerStore& store);

  RegistryOptions options_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::map<std::string, Credentials> credentials_;  // by registry, read once
  std::atomic<uint64_t> layerDownloads_{0};
  std::mutex flightsMu_;
  std::map<Digest, std::shared_future<Status>> flights_;  // guarded by flightsMu_
};

}  // namespace allot::images
