// A real registry for tests: Debian's docker-registry (distribution 2.8) on
// a loopback port, fed with images the test writes as OCI layouts and
// pushes with skopeo. Tests that need it skip when either is missing.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "images/digest.h"
#include "images/registry_http.h"
#include "tests/common/test_ports.h"
#include "tests/images/tar_builder.h"

namespace allot::testing {

inline std::string readWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

inline void writeWhole(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

inline bool haveProgram(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

// An OCI image layout on disk (image-spec image-layout.md).
class OciLayout {
 public:
  struct Blob {
    images::Digest digest;
    size_t size = 0;
    std::string json(const std::string& mediaType) const {
      return "{\"mediaType\":\"" + mediaType + "\",\"digest\":\"" + digest.str() + "\",\"size\":" + std::to_string(size) + "}";
    }
  };

  explicit OciLayout(std::string dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_ + "/blobs/sha256");
    writeWhole(dir_ + "/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
  }

  Blob blob(const std::string& bytes) {
    Blob b{images::sha256Of(bytes), bytes.size()};
    writeWhole(dir_ + "/blobs/sha256/" + b.digest.hex, bytes);
    return b;
  }

  // A gzip layer from an uncompressed tar; its DiffID goes to diffIds.
  Blob layer(const std::string& tarPath) {
    diffIds_.push_back(images::sha256Of(readWhole(tarPath)).str());
    std::string gz = tarPath + ".gz";
    if (std::system(("gzip -n -c " + tarPath + " > " + gz).c_str()) != 0) return {};
    return blob(readWhole(gz));
  }

  // A manifest of `layers` with a config carrying `execJson` (the inside
  // of "config": {...}); returns the manifest blob.
  Blob manifest(const std::vector<Blob>& layers, const std::string& execJson,
                const std::string& arch = "amd64") {
    std::string ids;
    for (const std::string& id : diffIds_) ids += (ids.empty() ? "\"" : ",\"") + id + "\"";
    Blob config = blob("{\"architecture\":\"" + arch + "\",\"os\":\"linux\",\"config\":{" + execJson +
                       "},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[" + ids + "]}}");
    std::string list;
    for (const Blob& l : layers)
      list += (list.empty() ? "" : ",") + l.json("application/vnd.oci.image.layer.v1.tar+gzip");
    diffIds_.clear();
    return blob("{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":" +
                config.json("application/vnd.oci.image.config.v1+json") + ",\"layers\":[" + list + "]}");
  }

  // An image index naming `manifests` with their platforms ("os/arch").
  Blob index(const std::vector<std::pair<Blob, std::string>>& manifests) {
    std::string list;
    for (const auto& [m, platform] : manifests) {
      std::string os = platform.substr(0, platform.find('/')), arch = platform.substr(platform.find('/') + 1);
      std::string entry = m.json("application/vnd.oci.image.manifest.v1+json");
      entry.pop_back();
      list += (list.empty() ? "" : ",") + entry + ",\"platform\":{\"os\":\"" + os + "\",\"architecture\":\"" + arch + "\"}}";
    }
    return blob("{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[" + list + "]}");
  }

  // index.json: tag -> (media type, blob).
  void tag(const std::vector<std::tuple<std::string, std::string, Blob>>& tags) {
    std::string list;
    for (const auto& [name, type, b] : tags) {
      std::string entry = b.json(type);
      entry.pop_back();
      list += (list.empty() ? "" : ",") + entry + ",\"annotations\":{\"org.opencontainers.image.ref.name\":\"" + name + "\"}}";
    }
    writeWhole(dir_ + "/index.json", "{\"schemaVersion\":2,\"manifests\":[" + list + "]}");
  }

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::string> diffIds_;
};

class TestRegistry {
 public:
  // Starts docker-registry with its storage under `dir`; ok() says whether it answers.
  explicit TestRegistry(const std::string& dir) : dir_(dir) {
    ReservedPort reserved;
    port_ = reserved.port();
    reserved.release();
    std::filesystem::create_directories(dir_ + "/storage");
    writeWhole(dir_ + "/config.yml", "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
               "storage:\n  filesystem:\n    rootdirectory: " + dir_ + "/storage\n  delete:\n    enabled: true\n"
               "http:\n  addr: 127.0.0.1:" + std::to_string(port_) + "\n  secret: allot-test\n");
    std::string config = dir_ + "/config.yml";
    const char* argv[] = {"docker-registry", "serve", config.c_str(), nullptr};
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    std::string log = dir_ + "/registry.log";
    posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    if (posix_spawnp(&pid_, "docker-registry", &files, nullptr, const_cast<char* const*>(argv), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&files);
    images::Url url{false, "127.0.0.1", std::to_string(port_), "/v2/"};
    for (int i = 0; i < 200 && pid_ > 0 && !ok_; ++i) {
      Result<images::HttpAnswer> a = images::httpGet(url, {}, 4096, nullptr, {.ioTimeout = std::chrono::seconds(1)});
      ok_ = a && a->status == 200;
      if (!ok_) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~TestRegistry() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  bool ok() const { return ok_; }
  std::string registry() const { return "127.0.0.1:" + std::to_string(port_); }

  // skopeo copy of a layout's tag to REPO:TAG here; extra flags e.g. "--format v2s2", "--all".
  bool push(const OciLayout& layout, const std::string& layoutTag, const std::string& repoTag,
            const std::string& flags = "") {
    std::string cmd = "skopeo copy --quiet --insecure-policy --dest-tls-verify=false " + flags + " oci:" + layout.dir() +
                      ":" + layoutTag + " docker://" + registry() + "/" + repoTag + " >" + dir_ + "/skopeo.log 2>&1";
    return std::system(cmd.c_str()) == 0;
  }

  // Where the registry keeps a blob's bytes (to tamper with them).
  std::string blobData(const images::Digest& d) const {
    return dir_ + "/storage/docker/registry/v2/blobs/sha256/" + d.hex.substr(0, 2) + "/" + d.hex + "/data";
  }

 private:
  std::string dir_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
  bool ok_ = false;
};

}  // namespace allot::testing
