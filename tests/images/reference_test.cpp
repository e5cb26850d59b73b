#include "images/reference.h"

#include <string>

#include <gtest/gtest.h>

#include "images/digest.h"

namespace allot::images {
namespace {

const std::string kHex(64, 'a');

TEST(Digest, AcceptsSha256OfSixtyFourLowerHex) {
  Result<Digest> d = parseDigest("sha256:" + kHex);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->str(), "sha256:" + kHex);
}

TEST(Digest, RefusesOtherAlgorithmsLengthsAndPathCharacters) {
  EXPECT_FALSE(parseDigest("sha512:" + kHex));
  EXPECT_FALSE(parseDigest("sha256:" + kHex.substr(1)));
  EXPECT_FALSE(parseDigest("sha256:" + kHex + "a"));
  EXPECT_FALSE(parseDigest("sha256:" + std::string(61, 'a') + "/.."));
  EXPECT_FALSE(parseDigest("sha256:" + std::string(63, 'a') + "A"));
  EXPECT_FALSE(parseDigest(""));
}

TEST(Sha256, MatchesTheKnownVector) {
  EXPECT_EQ(sha256Of("abc").hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 split;
  split.update("a", 1);
  split.update("bc", 2);
  EXPECT_EQ(split.finish(), sha256Of("abc"));
}

TEST(Reference, ParsesRegistryNameAndTag) {
  Result<ImageReference> r = parseReference("127.0.0.1:5000/test/bb:1.0");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->registry, "127.0.0.1:5000");
  EXPECT_EQ(r->repository, "test/bb");
  EXPECT_EQ(r->tag, "1.0");
  EXPECT_FALSE(r->digest);
  EXPECT_EQ(r->manifestRef(), "1.0");
  EXPECT_EQ(r->str(), "127.0.0.1:5000/test/bb:1.0");
}

TEST(Reference, DefaultsToLatestAndPrefersTheDigest) {
  Result<ImageReference> plain = parseReference("registry.example/app");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->tag, "latest");
  Result<ImageReference> pinned = parseReference("localhost/app:1@sha256:" + kHex);
  ASSERT_TRUE(pinned) << pinned.error().describe();
  EXPECT_EQ(pinned->tag, "1");
  EXPECT_EQ(pinned->manifestRef(), "sha256:" + kHex);
  Result<ImageReference> digestOnly = parseReference("[::1]:5000/a/b@sha256:" + kHex);
  ASSERT_TRUE(digestOnly) << digestOnly.error().describe();
  EXPECT_EQ(digestOnly->tag, "");
  EXPECT_EQ(digestOnly->registry, "[::1]:5000");
}

TEST(Reference, RefusesMissingRegistryAndBadNames) {
  Result<ImageReference> bare = parseReference("busybox:1.36");
  ASSERT_FALSE(bare);
  EXPECT_NE(bare.error().message.find("names no registry"), std::string::npos);
  EXPECT_FALSE(parseReference("reg.example/UPPER:1"));
  EXPECT_FALSE(parseReference("reg.example/a/../b:1"));
  EXPECT_FALSE(parseReference("reg.example/a:-tag"));
  EXPECT_FALSE(parseReference("reg.example/a:" + std::string(129, 't')));
  EXPECT_FALSE(parseReference("reg.example:port/a:1"));
  EXPECT_FALSE(parseReference("reg.example/a@sha256:zz"));
  EXPECT_FALSE(parseReference("reg.example/"));
  EXPECT_FALSE(parseReference(std::string(600, 'a')));
}

}  // namespace
}  // namespace allot::images
