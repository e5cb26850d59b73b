// The registry client against a real docker-registry the test starts (and,
// for what a real registry never does, against FakeRegistry).
#include "images/registry_client.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/worker_pool.h"
#include "images/image_puller.h"
#include "tests/common/test_util.h"
#include "tests/images/fake_registry.h"
#include "tests/images/test_registry.h"

namespace allot::images {
namespace {

namespace fs = std::filesystem;
using testing::FakeRegistry;
using testing::OciLayout;
using testing::readWhole;
using testing::TarBuilder;
using testing::TestRegistry;

constexpr const char* kExec =
    "\"Entrypoint\":[\"/bin/sh\",\"-c\"],\"Cmd\":[\"echo hi\"],\"Env\":[\"A=1\"],\"WorkingDir\":\"/srv\","
    "\"User\":\"1000:1000\"";

class Registry : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::haveProgram("docker-registry") || !testing::haveProgram("skopeo")) return;
    char tmpl[] = "/tmp/allot-registry-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return;
    suiteDir_ = tmpl;
    registry_ = new TestRegistry(suiteDir_ + "/registry");
    if (!registry_->ok()) return;
    OciLayout layout(suiteDir_ + "/layout");
    TarBuilder(suiteDir_ + "/l1.tar")
        .dir("bin/").file("bin/busybox", readWhole("/bin/busybox"), 0755).symlink("bin/sh", "busybox")
        .dir("etc/").file("etc/hello", "lower").close();
    TarBuilder(suiteDir_ + "/l2.tar").dir("etc/").file("etc/.wh.hello", "").file("etc/motd", "upper").close();
    OciLayout::Blob l1 = layout.layer(suiteDir_ + "/l1.tar");
    OciLayout::Blob l2 = layout.layer(suiteDir_ + "/l2.tar");
    layers_ = {l1.digest, l2.digest};
    OciLayout::Blob manifest = layout.manifest({l1, l2}, kExec, nodeArchitecture());
    manifest_ = manifest.digest;
    OciLayout::Blob index = layout.index({{manifest, "linux/" + nodeArchitecture()}, {manifest, "linux/s390x"}});
    layout.tag({{"latest", "application/vnd.oci.image.manifest.v1+json", manifest},
                {"multi", "application/vnd.oci.image.index.v1+json", index}});
    pushed_ = registry_->push(layout, "latest", "test/bb:latest") &&
              registry_->push(layout, "latest", "test/bbdocker:v2", "--format v2s2") &&
              registry_->push(layout, "multi", "test/multi:1", "--all");
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
    if (!suiteDir_.empty()) fs::remove_all(suiteDir_);
  }

  void SetUp() override {
    if (!testing::haveProgram("docker-registry") || !testing::haveProgram("skopeo"))
      GTEST_SKIP() << "needs Debian's docker-registry and skopeo (scripts/allot-dev deps)";
    ASSERT_TRUE(registry_ != nullptr && registry_->ok()) << "docker-registry did not start";
    ASSERT_TRUE(pushed_) << "skopeo could not push: " << readWhole(suiteDir_ + "/registry/skopeo.log");
    char tmpl[] = "/tmp/allot-pull-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    Result<std::unique_ptr<LayerStore>> store = LayerStore::open({.root = dir_ + "/store"});
    ASSERT_TRUE(store) << store.error().describe();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::unique_ptr<RegistryClient> client(RegistryOptions options = {}) {
    Result<std::unique_ptr<RegistryClient>> c = RegistryClient::create(options);
    EXPECT_TRUE(c) << c.error().describe();
    return c ? std::move(*c) : nullptr;
  }

  Result<PulledImage> pull(const std::string& ref, RegistryClient& c) {
    Result<ImageReference> r = parseReference(ref);
    if (!r) return r.error();
    return c.pull(*r, *store_);
  }

  // A one-layer image of its own (so tampering with its blob touches no
  // other test's), pushed as REPO:1; returns its layer's digest.
  static Digest pushOwn(const std::string& repo, const std::string& content) {
    OciLayout layout(suiteDir_ + "/" + repo);
    TarBuilder(suiteDir_ + "/" + repo + ".tar").file("own", content).close();
    OciLayout::Blob l = layout.layer(suiteDir_ + "/" + repo + ".tar");
    layout.tag({{"1", "application/vnd.oci.image.manifest.v1+json", layout.manifest({l}, "", nodeArchitecture())}});
    EXPECT_TRUE(registry_->push(layout, "1", "test/" + repo + ":1"));
    return l.digest;
  }

  size_t stagingEntries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_ + "/store/staging"), fs::directory_iterator()));
  }

  static inline std::string suiteDir_;
  static inline TestRegistry* registry_ = nullptr;
  static inline std::vector<Digest> layers_;
  static inline Digest manifest_;
  static inline bool pushed_ = false;
  std::string dir_;
  std::unique_ptr<LayerStore> store_;
};

TEST_F(Registry, PullsAnOciImageWithItsConfigAndWhiteouts) {
  auto c = client();
  Result<PulledImage> image = pull(registry_->registry() + "/test/bb:latest", *c);
  ASSERT_TRUE(image) << image.error().describe();
  EXPECT_EQ(image->layers, layers_);
  EXPECT_EQ(image->manifest, manifest_);
  EXPECT_EQ(image->exec.entrypoint, (std::vector<std::string>{"/bin/sh", "-c"}));
  EXPECT_EQ(image->exec.cmd, std::vector<std::string>{"echo hi"});
  EXPECT_EQ(image->exec.env, std::vector<std::string>{"A=1"});
  EXPECT_EQ(image->exec.workingDir, "/srv");
  EXPECT_EQ(image->exec.user, "1000:1000");
  std::optional<std::string> lower = store_->find(layers_[0]);
  std::optional<std::string> upper = store_->find(layers_[1]);
  ASSERT_TRUE(lower && upper);
  EXPECT_EQ(readWhole(*lower + "/bin/busybox"), readWhole("/bin/busybox"));
  EXPECT_EQ(fs::read_symlink(*lower + "/bin/sh"), "busybox");
  struct stat st;
  ASSERT_EQ(::lstat((*upper + "/etc/hello").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
  EXPECT_EQ(readWhole(*upper + "/etc/motd"), "upper");
  EXPECT_EQ(c->layerDownloads(), 2u);
  Result<PulledImage> again = pull(registry_->registry() + "/test/bb:latest", *c);
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_EQ(c->layerDownloads(), 2u) << "a cached layer was downloaded again";
}

TEST_F(Registry, PullsADockerSchema2Image) {
  auto c = client();
  Result<PulledImage> image = pull(registry_->registry() + "/test/bbdocker:v2", *c);
  ASSERT_TRUE(image) << image.error().describe();
  ASSERT_EQ(image->layers.size(), 2u);
  EXPECT_EQ(image->exec.workingDir, "/srv");
  EXPECT_TRUE(store_->find(image->layers[0]));
}

TEST_F(Registry, PicksTheNodesPlatformFromAnIndex) {
  auto c = client();
  Result<PulledImage> image = pull(registry_->registry() + "/test/multi:1", *c);
  ASSERT_TRUE(image) << image.error().describe();
  EXPECT_EQ(image->manifest, manifest_);
  auto riscv = client({.architecture = "riscv64"});
  Result<PulledImage> none = pull(registry_->registry() + "/test/multi:1", *riscv);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("no manifest for linux/riscv64"), std::string::npos) << none.error().message;
}

TEST_F(Registry, PullsByDigestAndRefusesAnUnknownOne) {
  auto c = client();
  Result<PulledImage> image = pull(registry_->registry() + "/test/bb@" + manifest_.str(), *c);
  ASSERT_TRUE(image) << image.error().describe();
  EXPECT_EQ(image->layers, layers_);
  Result<PulledImage> unknown = pull(registry_->registry() + "/test/bb@sha256:" + std::string(64, '0'), *c);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("not found"), std::string::npos) << unknown.error().message;
}

TEST_F(Registry, ConcurrentPullsDownloadEachLayerOnce) {
  auto c = client();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] { ok += pull(registry_->registry() + "/test/bb:latest", *c).ok(); });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(c->layerDownloads(), 2u);
  EXPECT_EQ(store_->size(), 2u);
}

TEST_F(Registry, ThePullerJoinsPullsOfOneImageAndAnswersOnTheLoop) {
  auto c = client();
  asio::io_context io;
  WorkerPool pool(io, {.threads = 2, .queueMax = 16});
  ImagePuller puller(pool, *c, *store_);
  int answered = 0, failed = 0;
  std::thread::id loop = std::this_thread::get_id();
  for (int i = 0; i < 20; ++i)
    puller.pull(registry_->registry() + "/test/bb:latest", [&](const Result<PulledImage>& r) {
      EXPECT_EQ(std::this_thread::get_id(), loop);
      ++(r ? answered : failed);
    });
  puller.pull("no-registry:1", [&](const Result<PulledImage>& r) { failed += !r; });
  EXPECT_EQ(failed, 1) << "a bad reference is answered at once";
  EXPECT_EQ(puller.inFlight(), 1u);
  ASSERT_TRUE(testing::runUntil(io, [&] { return answered == 20; }, std::chrono::seconds(30)));
  EXPECT_EQ(c->layerDownloads(), 2u);
  EXPECT_EQ(puller.inFlight(), 0u);
}

// A layer blob past Beast's default body limit (8 MB): the header's
// Content-Length must not be checked against it before the client's own.
TEST_F(Registry, PullsALayerLargerThanEightMegabytes) {
  std::mt19937_64 random(7);
  std::string content(9 << 20, '\0');
  for (size_t i = 0; i + 8 <= content.size(); i += 8) {
    uint64_t v = random();
    std::memcpy(&content[i], &v, 8);
  }
  Digest layer = pushOwn("big", content);
  auto c = client();
  Result<PulledImage> image = pull(registry_->registry() + "/test/big:1", *c);
  ASSERT_TRUE(image) << image.error().describe();
  std::optional<std::string> root = store_->find(layer);
  ASSERT_TRUE(root);
  EXPECT_EQ(fs::file_size(*root + "/own"), content.size());
}

TEST_F(Registry, AnUnreachableRegistryFailsClearly) {
  testing::ReservedPort closed;  // bound, never listening: connections are refused
  auto c = client();
  Result<PulledImage> image = pull("127.0.0.1:" + std::to_string(closed.port()) + "/test/bb:latest", *c);
  ASSERT_FALSE(image);
  EXPECT_NE(image.error().message.find("connect"), std::string::npos) << image.error().message;
}

TEST_F(Registry, RefusesABlobThatDoesNotMatchItsDigest) {
  Digest layer = pushOwn("tampered", "genuine content");
  std::string data = readWhole(registry_->blobData(layer));
  data[data.size() / 2] ^= 0x55;  // same size, other bytes
  testing::writeWhole(registry_->blobData(layer), data);
  auto c = client();
  Result<PulledImage> image = pull(registry_->registry() + "/test/tampered:1", *c);
  ASSERT_FALSE(image);
  EXPECT_NE(image.error().message.find("does not match its digest"), std::string::npos) << image.error().message;
  EXPECT_FALSE(store_->find(layer));
  EXPECT_EQ(stagingEntries(), 0u);
}

TEST_F(Registry, RefusesALayerFarLargerThanDeclared) {
  Digest layer = pushOwn("swollen", "small");
  testing::writeWhole(registry_->blobData(layer), std::string(4u << 20, 'x'));
  auto c = client();
  Result<PulledImage> image = pull(registry_->registry() + "/test/swollen:1", *c);
  ASSERT_FALSE(image);
  EXPECT_NE(image.error().message.find("larger than"), std::string::npos) << image.error().message;
  EXPECT_EQ(store_->size(), 0u);
  EXPECT_EQ(stagingEntries(), 0u);
}

// What docker-registry never does, from the scripted server.
class ScriptedRegistry : public Registry {
 protected:
  // Serves test/bb from the scripted server: its manifest, config and
  // layers as the real registry has them.
  void mirror(FakeRegistry& fake) {
    auto c = client();
    std::string base = "/v2/test/bb/";
    Url real{false, "127.0.0.1", registry_->registry().substr(10), ""};
    auto fetch = [&](const std::string& path, const std::string& accept) {
      real.target = path;
      Result<HttpAnswer> a = httpGet(real, {{"Accept", accept}}, 64u << 20, nullptr, {});
      EXPECT_TRUE(a && a->status == 200) << path;
      return a ? *a : HttpAnswer{};
    };
    HttpAnswer m = fetch(base + "manifests/latest", "application/vnd.oci.image.manifest.v1+json");
    fake.set(base + "manifests/latest", {200, m.contentType, m.body});
    oci_manifest_ = m.body;
    for (const Digest& d : layers_) fake.set(base + "blobs/" + d.str(), {200, "application/octet-stream", fetch(base + "blobs/" + d.str(), "").body});
    size_t at = m.body.find("\"config\"");
    size_t digest = m.body.find("sha256:", at);
    std::string config = m.body.substr(digest, 71);
    fake.set(base + "blobs/" + config, {200, "application/octet-stream", fetch(base + "blobs/" + config, "").body});
  }
  std::string oci_manifest_;
};

TEST_F(ScriptedRegistry, GivesUpOnARegistryThatStallsMidBlob) {
  FakeRegistry fake;
  mirror(fake);
  FakeRegistry::Answer stalling{200, "application/octet-stream", std::string(1000, 'x')};
  stalling.stallAfter = 100;
  fake.set("/v2/test/bb/blobs/" + layers_[0].str(), stalling);
  auto c = client({.ioTimeout = std::chrono::milliseconds(300)});
  Result<PulledImage> image = pull(fake.registry() + "/test/bb:latest", *c);
  ASSERT_FALSE(image);
  EXPECT_NE(image.error().message.find("timed out"), std::string::npos) << image.error().message;
  EXPECT_EQ(store_->size(), 0u);
  EXPECT_EQ(stagingEntries(), 0u);
}

TEST_F(ScriptedRegistry, RefusesAManifestLargerThanTheCapOrItsIndexSays) {
  FakeRegistry fake;
  fake.set("/v2/test/bb/manifests/huge", {200, "application/vnd.oci.image.manifest.v1+json",
                                          std::string(kManifestBytesMax + 1, ' ')});
  auto c = client();
  Result<PulledImage> huge = pull(fake.registry() + "/test/bb:huge", *c);
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().message.find("larger than"), std::string::npos) << huge.error().message;

  mirror(fake);
  Digest real = sha256Of(oci_manifest_);
  std::string index = "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[{"
                      "\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" + real.str() +
                      "\",\"size\":10,\"platform\":{\"os\":\"linux\",\"architecture\":\"" + nodeArchitecture() + "\"}}]}";
  fake.set("/v2/test/bb/manifests/lying", {200, "application/vnd.oci.image.index.v1+json", index});
  fake.set("/v2/test/bb/manifests/" + real.str(), {200, "application/vnd.oci.image.manifest.v1+json", oci_manifest_});
  Result<PulledImage> lying = pull(fake.registry() + "/test/bb:lying", *c);
  ASSERT_FALSE(lying);
  EXPECT_NE(lying.error().message.find("10 declared"), std::string::npos) << lying.error().message;
}

TEST_F(ScriptedRegistry, FetchesABearerTokenWithTheCredentialsFile) {
  FakeRegistry fake;
  mirror(fake);
  fake.requireBearer("/token", "dXNlcjpzZWNyZXQ=" /* user:secret */, "tok123");
  auto anonymous = client();
  Result<PulledImage> refused = pull(fake.registry() + "/test/bb:latest", *anonymous);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("token realm answered 401"), std::string::npos) << refused.error().message;
  testing::writeWhole(dir_ + "/creds", "# registry user password\n" + fake.registry() + " user secret\n");
  auto c = client({.credentialsFile = dir_ + "/creds"});
  Result<PulledImage> image = pull(fake.registry() + "/test/bb:latest", *c);
  ASSERT_TRUE(image) << image.error().describe();
  EXPECT_EQ(image->layers, layers_);
}

}  // namespace
}  // namespace allot::images
