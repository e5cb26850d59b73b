// The agent's ImageService (agent/image_service.h) against a real
// docker-registry: a pull asked for while the store is being evicted waits
// for the eviction, so the layers it finds are still there when its
// executor holds them.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "agent/image_service.h"
#include "tests/common/test_util.h"
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
    auto service = ImageService::create(io_, {.workDir = dir_ + "/agent", .cacheBytesMax = 1});
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

  asio::io_context io_;
  std::string dir_, layer_;
  std::unique_ptr<TestRegistry> registry_;
  std::unique_ptr<ImageService> service_;
};

// Each round: a pull whose image is dropped at once (its layer unused, so
// the eviction after it removes it), and another pull asked for right
// then, while that eviction may run. The second must wait and bring the
// layer back, held, every time.
TEST_F(ImageServiceTest, APullDuringAnEvictionWaitsAndHoldsItsLayers) {
  std::string ref = registry_->registry() + "/test/bb:1";
  for (int round = 0; round < 10; ++round) {
    std::optional<Result<ContainerImage>> second;
    bool first = false;
    service_->pull(ref, [&](Result<ContainerImage> image) {
      ASSERT_TRUE(image) << image.error().describe();
      first = true;
      // After this callback the service starts its eviction; this pull
      // is asked for before the loop turns.
      asio::post(io_, [&] { service_->pull(ref, [&](Result<ContainerImage> again) { second = std::move(again); }); });
    });
    ASSERT_TRUE(runUntil(io_, [&] { return second.has_value(); }, 30s)) << "round " << round;
    ASSERT_TRUE(first);
    ASSERT_TRUE(*second) << "round " << round << ": " << second->error().describe();
    EXPECT_NE(layerInode(), 0u) << "round " << round << ": the held layer is not in the store";
    second.reset();  // drops the hold: the next round's eviction takes it
  }
}

}  // namespace
}  // namespace allot::testing
