#include "images/registry_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>

#include <google/protobuf/util/json_util.h>

#include "base/files.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "images/image_limits.h"
#include "images/oci.pb.h"
#include "images/registry_session.h"

namespace allot::images {

namespace {

constexpr std::string_view kOciIndex = "application/vnd.oci.image.index.v1+json";
constexpr std::string_view kOciManifest = "application/vnd.oci.image.manifest.v1+json";
constexpr std::string_view kDockerList = "application/vnd.docker.distribution.manifest.list.v2+json";
constexpr std::string_view kDockerManifest = "application/vnd.docker.distribution.manifest.v2+json";
// All four, always: distribution 2.8 answers 404 for an OCI manifest asked
// for with Docker's types only, and schema 1 when asked with none.
const std::string kAcceptManifests = std::string(kOciManifest) + ", " + std::string(kOciIndex) + ", " +
                                     std::string(kDockerManifest) + ", " + std::string(kDockerList);
constexpr std::string_view kLayerTypes[] = {
    "application/vnd.oci.image.layer.v1.tar", "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd", "application/vnd.docker.image.rootfs.diff.tar.gzip"};
constexpr std::string_view kConfigTypes[] = {"application/vnd.oci.image.config.v1+json",
                                             "application/vnd.docker.container.image.v1+json"};
constexpr size_t kShownBodyBytes = 200;

bool isIndex(std::string_view type) { return type == kOciIndex || type == kDockerList; }
bool isManifest(std::string_view type) { return type == kOciManifest || type == kDockerManifest; }

template <typename List>
bool among(const List& list, std::string_view value) {
  return std::find(std::begin(list), std::end(list), value) != std::end(list);
}

bool isLoopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

std::string shownBody(const HttpAnswer& answer) {
  std::string body = answer.body.substr(0, kShownBodyBytes);
  std::replace_if(body.begin(), body.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return body.empty() ? "" : " (" + body + ")";
}

template <typename Message>
Status parseJson(const std::string& body, Message* out, std::string_view what) {
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(body, out, parse).ok())
    return Error{std::string(what) + " is not the JSON document expected"};
  return okStatus();
}

// The manifest's layers, each of a known type with a digest and a size
// within bounds, into image->layers and their sizes into `sizes`.
Status readLayers(const oci::Manifest& manifest, PulledImage* image, std::vector<uint64_t>* sizes) {
  for (const oci::Descriptor& layer : manifest.layers()) {
    if (!among(kLayerTypes, layer.mediatype()))
      return Error{"layer " + layer.digest() + " has media type '" + layer.mediatype() +
                   "' (foreign, encrypted and unknown layers are refused)"};
    Result<Digest> digest = parseDigest(layer.digest());
    if (!digest) return digest.error();
    if (layer.size() <= 0 || static_cast<uint64_t>(layer.size()) > kLayerBlobBytesMax)
      return Error{"layer " + layer.digest() + " declares a bad size " + std::to_string(layer.size())};
    image->layers.push_back(*digest);
    sizes->push_back(static_cast<uint64_t>(layer.size()));
  }
  return okStatus();
}

}  // namespace

std::string nodeArchitecture() {
  utsname u;
  if (::uname(&u) != 0) return "amd64";
  std::string machine = u.machine;
  if (machine == "x86_64") return "amd64";
  if (machine == "aarch64") return "arm64";
  if (machine == "i686" || machine == "i386") return "386";
  if (machine.rfind("armv", 0) == 0) return "arm";
  return machine;  // ppc64le, s390x, riscv64 are spelled alike
}

Result<std::unique_ptr<RegistryClient>> RegistryClient::create(const RegistryOptions& options) {
  std::unique_ptr<RegistryClient> client(new RegistryClient(options));
  if (client->options_.architecture.empty()) client->options_.architecture = nodeArchitecture();
  Result<std::shared_ptr<boost::asio::ssl::context>> tls = makeRegistryTls(options.caFile);
  if (!tls) return tls.error();
  client->tls_ = *tls;
  if (Status st = client->loadCredentials(); !st) return st.error();
  return client;
}

bool RegistryClient::allowsPlain(const Url& url) const {
  if (isLoopback(url.host)) return true;
  for (const std::string& insecure : options_.insecureRegistries)
    if (insecure == url.host || insecure == url.hostPort()) return true;
  return false;
}

Result<HttpAnswer> RegistryClient::get(Session& session, const std::string& path, const std::string& accept,
                                       uint64_t bodyBytesMax, const BodySink* sink) {
  Url url = session.base;
  url.target = path;
  bool authenticated = false;
  for (int hop = 0; hop <= kRedirectsMax + 1; ++hop) {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!accept.empty()) headers.emplace_back("Accept", accept);
    bool sameHost = url.host == session.base.host && url.port == session.base.port;
    if (sameHost && !session.authorization.empty()) headers.emplace_back("Authorization", session.authorization);
    Result<HttpAnswer> answer = httpGet(url, headers, bodyBytesMax, sink, {.tls = tls_, .ioTimeout = options_.ioTimeout});
    if (!answer) return answer;
    if (answer->status == 401 && sameHost && !authenticated) {
      authenticated = true;
      if (Status st = authenticate(session, answer->wwwAuthenticate); !st) return st.error();
      continue;
    }
    unsigned s = answer->status;
    if (s != 301 && s != 302 && s != 303 && s != 307 && s != 308) return answer;
    Result<Url> next = parseUrl(answer->location, &url);
    if (!next) return Error{path + ": redirect: " + next.error().message};
    if (!next->tls && !allowsPlain(*next))
      return Error{path + ": redirect to plain HTTP at " + next->hostPort() + " refused"};
    url = *next;
  }
  return Error{path + ": more than " + std::to_string(kRedirectsMax) + " redirects"};
}

// The manifest body for `ref` (a tag or a digest), checked against
// `expected` and `expectedSize` when given; its media type in `mediaType`.
Result<std::string> RegistryClient::fetchManifest(Session& session, const std::string& ref, const Digest* expected,
                                                  uint64_t expectedSize, std::string* mediaType) {
  std::string path = "/v2/" + session.repository + "/manifests/" + ref;
  Result<HttpAnswer> answer = get(session, path, kAcceptManifests, kManifestBytesMax, nullptr);
  if (!answer) return answer.error();
  if (answer->status == 404) return Error{"manifest " + ref + " not found" + shownBody(*answer)};
  if (answer->status != 200)
    return Error{"manifest " + ref + ": registry answered " + std::to_string(answer->status) + shownBody(*answer)};
  Digest actual = sha256Of(answer->body);
  if (expected != nullptr && actual != *expected)
    return Error{"manifest " + ref + " does not match its digest (content is " + actual.str() + ")"};
  if (expected != nullptr && expectedSize != answer->body.size())
    return Error{"manifest " + ref + " has " + std::to_string(answer->body.size()) + " bytes, " +
                 std::to_string(expectedSize) + " declared"};
  oci::Manifest probe;
  if (Status st = parseJson(answer->body, &probe, "manifest " + ref); !st) return st.error();
  if (!probe.mediatype().empty() && !answer->contentType.empty() && probe.mediatype() != answer->contentType)
    return Error{"manifest " + ref + " says it is " + probe.mediatype() + " but was served as " + answer->contentType};
  *mediaType = probe.mediatype().empty() ? answer->contentType : probe.mediatype();
  return std::move(answer->body);
}

// Follows an index to this node's platform, then reads the manifest's
// config and layer list.
Result<PulledImage> RegistryClient::resolve(Session& session, const ImageReference& reference,
                                            std::vector<uint64_t>* sizes) {
  std::string type;
  const Digest* pinned = reference.digest ? &*reference.digest : nullptr;
  Result<std::string> body = Error{"unread"};
  if (pinned != nullptr) {
    // The reference pins the content, not the size: any size with that
    // digest is the manifest.
    std::string path = reference.manifestRef();
    body = fetchManifest(session, path, nullptr, 0, &type);
    if (body && sha256Of(*body) != *pinned)
      return Error{"manifest " + path + " does not match its digest (content is " + sha256Of(*body).str() + ")"};
  } else {
    body = fetchManifest(session, reference.tag, nullptr, 0, &type);
  }
  if (!body) return body.error();
  oci::Manifest manifest;
  (void)parseJson(*body, &manifest, "manifest");
  if (isIndex(type)) {
    const oci::Descriptor* chosen = nullptr;
    std::string seen;
    for (const oci::Descriptor& d : manifest.manifests()) {
      if (d.platform().os() == options_.os && d.platform().architecture() == options_.architecture) {
        chosen = &d;
        break;
      }
      if (seen.size() < kShownBodyBytes) seen += " " + d.platform().os() + "/" + d.platform().architecture();
    }
    if (chosen == nullptr)
      return Error{"the image has no manifest for " + options_.os + "/" + options_.architecture + " (it has:" + seen + ")"};
    Result<Digest> digest = parseDigest(chosen->digest());
    if (!digest) return digest.error();
    if (chosen->size() <= 0 || static_cast<uint64_t>(chosen->size()) > kManifestBytesMax)
      return Error{"index entry " + chosen->digest() + " declares a bad size " + std::to_string(chosen->size())};
    body = fetchManifest(session, digest->str(), &*digest, static_cast<uint64_t>(chosen->size()), &type);
    if (!body) return body.error();
    manifest.Clear();
    (void)parseJson(*body, &manifest, "manifest");
  }
  if (!isManifest(type)) return Error{"manifest media type '" + type + "' is not an image manifest"};
  PulledImage image;
  image.reference = reference;
  image.manifest = sha256Of(*body);
  if (manifest.layers_size() == 0 || static_cast<size_t>(manifest.layers_size()) > kImageLayersMax)
    return Error{"the manifest has " + std::to_string(manifest.layers_size()) + " layers (1 to " +
                 std::to_string(kImageLayersMax) + " accepted)"};
  if (Status st = readLayers(manifest, &image, sizes); !st) return st.error();
  if (!among(kConfigTypes, manifest.config().mediatype()))
    return Error{"config media type '" + manifest.config().mediatype() + "' is not an image config"};
  if (Status st = fetchConfig(session, manifest.config().digest(), manifest.config().size(), &image.exec); !st)
    return st.error();
  return image;
}

Status RegistryClient::fetchConfig(Session& session, const std::string& digestText, int64_t size, ImageExec* exec) {
  Result<Digest> digest = parseDigest(digestText);
  if (!digest) return Error{"config: " + digest.error().message};
  if (size <= 0 || static_cast<uint64_t>(size) > kConfigBytesMax)
    return Error{"config " + digestText + " declares a bad size " + std::to_string(size)};
  Result<HttpAnswer> answer = get(session, "/v2/" + session.repository + "/blobs/" + digestText, "",
                                  static_cast<uint64_t>(size), nullptr);
  if (!answer) return Error{"config " + digestText + ": " + answer.error().message};
  if (answer->status != 200)
    return Error{"config " + digestText + ": registry answered " + std::to_string(answer->status) + shownBody(*answer)};
  if (answer->body.size() != static_cast<uint64_t>(size))
    return Error{"config " + digestText + " has " + std::to_string(answer->body.size()) + " bytes, " +
                 std::to_string(size) + " declared"};
  if (sha256Of(answer->body) != *digest) return Error{"config " + digestText + " does not match its digest"};
  oci::ImageConfig config;
  if (Status st = parseJson(answer->body, &config, "config " + digestText); !st) return st;
  const oci::ExecConfig& c = config.config();
  exec->entrypoint.assign(c.entrypoint().begin(), c.entrypoint().end());
  exec->cmd.assign(c.cmd().begin(), c.cmd().end());
  exec->env.assign(c.env().begin(), c.env().end());
  exec->workingDir = c.workingdir();
  exec->user = c.user();
  return okStatus();
}

// Each layer the store lacks, downloaded once however many pulls want it
// at the same time: the first runs the download, the others wait for its
// outcome.
Status RegistryClient::fetchLayers(Session& session, const std::vector<Digest>& layers,
                                   const std::vector<uint64_t>& sizes, LayerStore& store) {
  for (size_t i = 0; i < layers.size(); ++i) {
    if (store.find(layers[i])) continue;
    std::promise<Status> mine;
    std::shared_future<Status> outcome;
    bool leader = false;
    {
      std::lock_guard lock(flightsMu_);
      auto it = flights_.find(layers[i]);
      if (it == flights_.end()) {
        outcome = mine.get_future().share();
        flights_.emplace(layers[i], outcome);
        leader = true;
      } else {
        outcome = it->second;
      }
    }
    if (leader) {
      Status st = store.find(layers[i]) ? okStatus() : downloadLayer(session, layers[i], sizes[i], store);
      mine.set_value(st);
      std::lock_guard lock(flightsMu_);
      flights_.erase(layers[i]);
    }
    if (Status st = outcome.get(); !st) return st;
  }
  return okStatus();
}

Status RegistryClient::downloadLayer(Session& session, const Digest& digest, uint64_t size, LayerStore& store) {
  std::string path = store.stagingPath() + ".blob";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return Error::fromErrno("layer download " + path);
  ++layerDownloads_;
  BodySink sink = [&](const char* data, size_t n) { return writeAll(fd.get(), std::string_view(data, n), path); };
  Result<HttpAnswer> answer = get(session, "/v2/" + session.repository + "/blobs/" + digest.str(), "", size, &sink);
  fd.reset();
  Status done = okStatus();
  if (!answer) {
    done = Error{"layer " + digest.str() + ": " + answer.error().message};
  } else if (answer->status != 200) {
    done = Error{"layer " + digest.str() + ": registry answered " + std::to_string(answer->status) + shownBody(*answer)};
  } else if (Result<std::string> rootfs = store.insert(digest, path, size); !rootfs) {
    done = rootfs.error();
  }
  ::unlink(path.c_str());
  return done;
}

Result<PulledImage> RegistryClient::pull(const ImageReference& reference, LayerStore& store) {
  Session session;
  session.registry = reference.registry;
  session.repository = reference.repository;
  Result<Url> base = parseUrl("https://" + reference.registry);
  if (!base) return Error{"pulling " + reference.str() + ": " + base.error().message};
  session.base = *base;
  session.base.tls = !allowsPlain(session.base);
  if (!session.base.tls && reference.registry.find(':') == std::string::npos) session.base.port = "80";
  std::vector<uint64_t> sizes;
  Result<PulledImage> image = resolve(session, reference, &sizes);
  if (!image) return Error{"pulling " + reference.str() + ": " + image.error().message};
  if (Status st = fetchLayers(session, image->layers, sizes, store); !st)
    return Error{"pulling " + reference.str() + ": " + st.error().message};
  return image;
}

}  // namespace allot::images
