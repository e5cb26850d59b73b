#include "images/layer_store.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/images/tar_builder.h"

namespace allot::images {
namespace {

namespace fs = std::filesystem;
using testing::TarBuilder;

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

class Store : public ::testing::Test {
 protected:
  struct Blob {
    std::string path;
    Digest digest;
    uint64_t size;
  };

  void SetUp() override {
    char tmpl[] = "/tmp/allot-store-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
  }
  void TearDown() override { fs::remove_all(tmp_); }

  std::unique_ptr<LayerStore> open(uint64_t bytesMax = 0) {
    Result<std::unique_ptr<LayerStore>> store = LayerStore::open({.root = tmp_ + "/store", .bytesMax = bytesMax});
    EXPECT_TRUE(store) << store.error().describe();
    return store ? std::move(*store) : nullptr;
  }

  // A one-file layer blob named `name` holding `content`.
  Blob layer(const std::string& name, const std::string& content) {
    std::string path = tmp_ + "/" + name + ".tar";
    TarBuilder(path).file(name, content).close();
    std::string bytes = readAll(path);
    return {path, sha256Of(bytes), bytes.size()};
  }

  size_t entries(const std::string& dir) {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
  }

  std::string tmp_;
};

TEST_F(Store, InsertsAVerifiedLayerAndFindsIt) {
  auto store = open();
  Blob b = layer("hello", "world");
  Result<std::string> rootfs = store->insert(b.digest, b.path, b.size);
  ASSERT_TRUE(rootfs) << rootfs.error().describe();
  EXPECT_EQ(*rootfs, tmp_ + "/store/layers/" + b.digest.hex + "/rootfs");
  EXPECT_EQ(readAll(*rootfs + "/hello"), "world");
  EXPECT_EQ(store->find(b.digest), *rootfs);
  EXPECT_EQ(store->bytes(), 5u);
  Result<std::string> again = store->insert(b.digest, b.path, b.size);
  ASSERT_TRUE(again);
  EXPECT_EQ(store->size(), 1u);
}

TEST_F(Store, RefusesABlobWhoseDigestOrSizeDoesNotMatch) {
  auto store = open();
  Blob b = layer("a", "content");
  Blob other = layer("b", "other");
  Result<std::string> wrongDigest = store->insert(other.digest, b.path, b.size);
  ASSERT_FALSE(wrongDigest);
  EXPECT_NE(wrongDigest.error().message.find("does not match its digest"), std::string::npos);
  Result<std::string> larger = store->insert(b.digest, b.path, b.size - 1);
  ASSERT_FALSE(larger);
  EXPECT_NE(larger.error().message.find("larger than its declared"), std::string::npos);
  Result<std::string> shorter = store->insert(b.digest, b.path, b.size + 1);
  ASSERT_FALSE(shorter);
  EXPECT_EQ(store->size(), 0u);
  EXPECT_EQ(entries(tmp_ + "/store/layers"), 0u);
  EXPECT_EQ(entries(tmp_ + "/store/staging"), 0u);
}

TEST_F(Store, AHostileLayerLeavesNothingBehind) {
  auto store = open();
  std::string path = tmp_ + "/hostile.tar";
  TarBuilder(path).file("ok", "fine").symlink("esc", "../../..").file("esc/pwned", "x").close();
  std::string bytes = readAll(path);
  Result<std::string> r = store->insert(sha256Of(bytes), path, bytes.size());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("goes through the symlink 'esc'"), std::string::npos) << r.error().message;
  EXPECT_EQ(entries(tmp_ + "/store/layers"), 0u);
  EXPECT_EQ(entries(tmp_ + "/store/staging"), 0u);
  EXPECT_FALSE(fs::exists(tmp_ + "/pwned"));
  EXPECT_FALSE(fs::exists(tmp_ + "/store/pwned"));
}

TEST_F(Store, KeepsLayersAcrossARestartAndClearsStaging) {
  Blob b = layer("kept", "across");
  {
    auto store = open();
    ASSERT_TRUE(store->insert(b.digest, b.path, b.size));
  }
  fs::create_directories(tmp_ + "/store/staging/123.4/rootfs");  // an unpack cut short
  fs::create_directories(tmp_ + "/store/layers/" + std::string(64, 'b') + "/rootfs");  // no size file
  auto store = open();
  EXPECT_EQ(store->size(), 1u);
  EXPECT_EQ(store->bytes(), 6u);
  std::optional<std::string> rootfs = store->find(b.digest);
  ASSERT_TRUE(rootfs);
  EXPECT_EQ(readAll(*rootfs + "/kept"), "across");
  EXPECT_EQ(entries(tmp_ + "/store/staging"), 0u);
  EXPECT_EQ(entries(tmp_ + "/store/layers"), 1u);
}

TEST_F(Store, EvictsTheLeastRecentlyUsedLayersNobodyHolds) {
  auto store = open(25);
  Blob a = layer("a", "0123456789"), b = layer("b", "0123456789"), c = layer("c", "0123456789");
  for (const Blob* blob : {&a, &b, &c}) ASSERT_TRUE(store->insert(blob->digest, blob->path, blob->size));
  ASSERT_TRUE(store->acquire(a.digest));  // a running executor holds the oldest
  EXPECT_EQ(store->evict(), std::vector<Digest>{b.digest});
  EXPECT_FALSE(store->find(b.digest));
  EXPECT_FALSE(fs::exists(tmp_ + "/store/layers/" + b.digest.hex));
  EXPECT_EQ(store->bytes(), 20u);
  EXPECT_TRUE(store->evict().empty());

  store->release(a.digest);
  ASSERT_TRUE(store->find(c.digest));  // c is now the most recently used
  Blob d = layer("d", "0123456789");
  ASSERT_TRUE(store->insert(d.digest, d.path, d.size));
  EXPECT_EQ(store->evict(), std::vector<Digest>{a.digest});
  EXPECT_TRUE(store->find(c.digest));
  EXPECT_TRUE(store->find(d.digest));
  EXPECT_EQ(entries(tmp_ + "/store/staging"), 0u);
}

TEST_F(Store, NeverEvictsWhatIsHeldEvenOverTheCap) {
  auto store = open(5);
  Blob a = layer("a", "0123456789");
  ASSERT_TRUE(store->insert(a.digest, a.path, a.size));
  ASSERT_TRUE(store->acquire(a.digest));
  EXPECT_TRUE(store->evict().empty());
  EXPECT_TRUE(store->find(a.digest));
  store->release(a.digest);
  EXPECT_EQ(store->evict(), std::vector<Digest>{a.digest});
}

}  // namespace
}  // namespace allot::images
