// Kept framework identities (master/identity_store.h): the salted hash of a
// secret, the stored form and its refusals, and the --work-dir store.
#include "master/identity_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/asio.h"
#include "tests/common/test_util.h"

namespace allot {
namespace {

namespace fs = std::filesystem;

TEST(IdentityStore, ASecretHashIsSaltedAndMatchesOnlyItsSecret) {
  std::string a = hashSecret("0123456789abcdef0123456789abcdef");
  std::string b = hashSecret("0123456789abcdef0123456789abcdef");
  EXPECT_NE(a, b) << "no salt";
  EXPECT_EQ(a.find("0123456789abcdef0123456789abcdef"), std::string::npos);
  EXPECT_TRUE(secretMatches("0123456789abcdef0123456789abcdef", a));
  EXPECT_TRUE(secretMatches("0123456789abcdef0123456789abcdef", b));
  EXPECT_FALSE(secretMatches("0123456789abcdef0123456789abcdee", a));
  EXPECT_FALSE(secretMatches("", a));
  EXPECT_FALSE(secretMatches("", ""));
  EXPECT_FALSE(secretMatches("x", "sha256:zz:00"));
}

TEST(IdentityStore, AnIdentityRoundTripsThroughItsStoredForm) {
  StoredIdentity id{"CN with spaces=%", hashSecret("s"), std::chrono::milliseconds(1500)};
  std::string text = encodeIdentity(id);
  EXPECT_EQ(text.find("CN with"), std::string::npos) << text;
  auto back = decodeIdentity(text);
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(*back, id);
  StoredIdentity plain{"", hashSecret("s"), {}};
  auto plainBack = decodeIdentity(encodeIdentity(plain));
  ASSERT_TRUE(plainBack);
  EXPECT_EQ(*plainBack, plain);
}

TEST(IdentityStore, AMalformedStoredFormIsRefused) {
  std::string good = encodeIdentity({"alice", hashSecret("s"), std::chrono::seconds(1)});
  EXPECT_TRUE(decodeIdentity(good));
  for (const std::string& bad : std::vector<std::string>{"", "allot-identity 2 principal=a",
                          good.substr(0, good.size() / 2),
                          "allot-identity 1 principal=a secret=plain failover_ms=1",
                          "allot-identity 1 principal=%zz secret=" + hashSecret("s") + " failover_ms=1",
                          "allot-identity 1 principal=a secret=" + hashSecret("s") + " failover_ms=-1",
                          good + " extra=1", std::string(kStoredIdentityBytesMax + 1, 'a')}) {
    EXPECT_FALSE(decodeIdentity(bad)) << bad;
  }
}

TEST(IdentityStore, FrameworkIdsBecomeSafeNamesAndBack) {
  for (std::string id : {"F-0123", "", "..", "a/b", "%41", "x.y"}) {
    std::string key = identityKey(id);
    EXPECT_EQ(key.find('/'), std::string::npos);
    EXPECT_NE(key, ".");
    EXPECT_NE(key, "..");
    auto back = frameworkIdOfKey(key);
    ASSERT_TRUE(back) << key;
    EXPECT_EQ(*back, id);
  }
  EXPECT_FALSE(frameworkIdOfKey("a%2"));
  EXPECT_FALSE(frameworkIdOfKey("a.b"));  // not what identityKey() writes
}

class FileIdentityStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("allot-identities-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Result<StoredIdentities> load() {
    std::optional<Result<StoredIdentities>> got;
    makeFileIdentityStore(io_, dir_.string())->load([&](Result<StoredIdentities> r) { got = std::move(r); });
    EXPECT_FALSE(got.has_value()) << "completed inside load()";
    testing::runUntil(io_, [&] { return got.has_value(); }, std::chrono::seconds(5));
    return got ? std::move(*got) : Result<StoredIdentities>(Error{"no completion"});
  }
  // put() and its answer, which never comes inside the call.
  Status put(IdentityStore& store, const std::string& id, const StoredIdentity& identity) {
    std::optional<Status> got;
    store.put(id, identity, [&](Status st) { got = std::move(st); });
    EXPECT_FALSE(got.has_value()) << "answered inside put()";
    testing::runUntil(io_, [&] { return got.has_value(); }, std::chrono::seconds(5));
    return got.value_or(Status(Error{"no answer"}));
  }

  asio::io_context io_;
  fs::path dir_;
};

TEST_F(FileIdentityStoreTest, WhatIsPutIsLoadedByTheNextMasterAndRemovesStay) {
  auto first = load();  // makes the directory
  ASSERT_TRUE(first) << first.error().describe();
  EXPECT_TRUE(first->empty());
  auto store = makeFileIdentityStore(io_, dir_.string());
  StoredIdentity alice{"alice", hashSecret("a"), std::chrono::seconds(60)};
  EXPECT_TRUE(put(*store, "F-1", alice));
  EXPECT_TRUE(put(*store, "F/2", {"", hashSecret("b"), {}}));
  EXPECT_TRUE(put(*store, "F-3", alice));
  store->remove("F-3");
  store->remove("F-never");
  auto second = load();
  ASSERT_TRUE(second) << second.error().describe();
  EXPECT_EQ(second->size(), 2u);
  EXPECT_EQ(second->at("F-1"), alice);
  EXPECT_TRUE(secretMatches("b", second->at("F/2").secretHash));
}

TEST_F(FileIdentityStoreTest, ACorruptRecordIsSkippedAndTheRestLoaded) {
  ASSERT_TRUE(load());
  EXPECT_TRUE(put(*makeFileIdentityStore(io_, dir_.string()), "F-1", {"alice", hashSecret("a"), {}}));
  std::ofstream(dir_ / "F-2") << "allot-identity 1 principal=bob secret=the-secret-itself failover_ms=0\n";
  std::ofstream(dir_ / "not.an.id") << encodeIdentity({"eve", hashSecret("e"), {}});
  auto got = load();
  ASSERT_TRUE(got) << got.error().describe();
  EXPECT_EQ(got->size(), 1u);
  EXPECT_EQ(got->count("F-1"), 1u);
}

TEST_F(FileIdentityStoreTest, AnUnusableDirectoryFailsLoadAndEveryPutSaysWhy) {
  std::ofstream(dir_) << "a file where the directory should be\n";
  auto got = load();
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().describe().find(dir_.string()), std::string::npos) << got.error().describe();
  Status written = put(*makeFileIdentityStore(io_, dir_.string()), "F-1", {"alice", hashSecret("a"), {}});
  ASSERT_FALSE(written);
  EXPECT_NE(written.error().describe().find("cannot write " + (dir_ / "F-1").string()), std::string::npos)
      << written.error().describe();
  fs::remove(dir_);
  EXPECT_TRUE(load()) << "a store made usable again is read";
}

}  // namespace
}  // namespace allot
