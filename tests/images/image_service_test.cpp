// The agent's ImageService (agent/image_service.h) against a real
// docker-registry: a pull asked for while the store is being evicted waits
// for the eviction, so the layers it finds are still there when its
// executor holds them. Its pool is a ManualPool, so that the jobs run in
// the order that would lose the layer.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "agent/image_service.h"
#include "tests/common/test_util.h"
#include "tests/images/manual_pool.h"
#include "tests/images/tar_builder.h"
#include "tests/images/test_registry.h"

namespace allot::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class ImageServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!haveProgram("docker-registry") || !haveProgram("skopeo")) GTEST_SKIP() << "needs docker-registry and skopeo";
    char tmpl[] = "/tmp/allot-image-service-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    registry_ = std::make_unique<TestRegistry>(dir_ + "/registry");
    ASSERT_TRUE(registry_->ok());
    OciLayout layout(dir_ + "/layout");
    TarBuilder(dir_ + "/l.tar").dir("bin/").file("bin/busybox", readWhole("/bin/busybox"), 0755).close();
    OciLayout::Blob layer = layout.layer(dir_ + "/l.tar");
    layer_ = layer.digest.hex;
    layout.tag({{"1", "application/vnd.oci.image.manifest.v1+json",
                 layout.manifest({layer}, "", images::nodeArchitecture())}});
    ASSERT_TRUE(registry_->push(layout, "1", "test/bb:1"));
    fs::create_directories(dir_ + "/agent");  // the agent's work dir exists before its images
    // A cap of one byte: every layer nobody holds goes at the next eviction.
    auto pool = std::make_unique<ManualPool>(io_);
    pool_ = pool.get();
    auto service = ImageService::create(io_, {.workDir = dir_ + "/agent", .cacheBytesMax = 1}, std::move(pool));
    ASSERT_TRUE(service) << service.error().describe();
    service_ = std::move(*service);
  }
  void TearDown() override {
    service_.reset();
    registry_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  ino_t layerInode() {
    struct stat st{};
    return ::stat((dir_ + "/agent/images/layers/" + layer_ + "/rootfs").c_str(), &st) == 0 ? st.st_ino : 0;
  }

  // Runs the pool's jobs (newest first) and the loop until `done`.
  bool drive(const std::function<bool()>& done) {
    for (int round = 0; round < 100 && !done(); ++round) {
      pool_->runNewestFirst();
      io_.restart();
      io_.poll();
    }
    return done();
  }

  asio::io_context io_;
  ManualPool* pool_ = nullptr;  // the service's
  std::string dir_, layer_;
  std::unique_ptr<TestRegistry> registry_;
  std::unique_ptr<ImageService> service_;
};

// A pull whose image is dropped at once (its layer unused, so the eviction
// queued after it removes it), then a second pull asked for before that
// eviction runs. Were the second pull run at once, the worst order (it
// finds the layer, then the eviction removes it, then the loop holds it)
// would lose the layer: the pool runs the newest job first to take it.
TEST_F(ImageServiceTest, APullAskedForDuringAnEvictionWaitsAndHoldsItsLayers) {
  std::string ref = registry_->registry() + "/test/bb:1";
  bool first = false;
  service_->pull(ref, [&](Result<ContainerImage> image) {
    ASSERT_TRUE(image) << image.error().describe();
    first = true;  // the image goes: its layer is nobody's
  });
  ASSERT_TRUE(drive([&] { return first; }));
  ASSERT_EQ(pool_->waiting(), 1u) << "the eviction after the first pull";
  std::optional<Result<ContainerImage>> second;
  service_->pull(ref, [&](Result<ContainerImage> again) { second = std::move(again); });
  ASSERT_TRUE(drive([&] { return second.has_value(); }));
  ASSERT_TRUE(*second) << second->error().describe();
  EXPECT_NE(layerInode(), 0u) << "the held layer is not in the store";
  second.reset();
  service_->pull(ref, [](Result<ContainerImage>) {});
  EXPECT_TRUE(drive([&] { return pool_->waiting() == 0 && layerInode() == 0; }))
      << "once nobody holds it, the next eviction takes the layer";
}

}  // namespace
}  // namespace allot::testing
