#include "proto/resources.h"

#include <gtest/gtest.h>

namespace allot {
namespace {

Resources parsed(const char* text) {
  auto r = Resources::parse(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : Resources{};
}

TEST(Resources, ParsesScalarsAndRanges) {
  Resources r = parsed("cpus:4;mem:4096;disk:10240;ports:[31000-32000]");
  EXPECT_DOUBLE_EQ(r.scalar("cpus"), 4);
  EXPECT_DOUBLE_EQ(r.scalar("mem"), 4096);
  ASSERT_EQ(r.rangeSets().size(), 1u);
  EXPECT_EQ(r.rangeSets()[0].ranges[0], std::make_pair(uint64_t{31000}, uint64_t{32000}));
  EXPECT_EQ(r.toString(), "cpus:4;disk:10240;mem:4096;ports:[31000-32000]");
}

TEST(Resources, FractionsAreExactInMillis) {
  Resources a = parsed("cpus:0.1");
  Resources sum;
  for (int i = 0; i < 10; ++i) sum += a;
  EXPECT_EQ(sum.scalarMillis("cpus"), 1000);
}

TEST(Resources, RejectsMalformedText) {
  for (const char* bad : {"cpus", "cpus:x", "cpus:-1", "cpus:1;cpus:2", "ports:[5-1]",
                          "ports:[1-2", "cpus:inf", ":3", "ports:[a-b]"}) {
    EXPECT_FALSE(Resources::parse(bad).ok()) << bad;
  }
  EXPECT_TRUE(Resources::parse("").ok());
}

TEST(Resources, ContainsAndSubtractRanges) {
  Resources total = parsed("cpus:4;ports:[100-200]");
  Resources want = parsed("cpus:1.5;ports:[150-160]");
  EXPECT_TRUE(total.contains(want));
  Resources left = total - want;
  EXPECT_EQ(left.toString(), "cpus:2.5;ports:[100-149,161-200]");
  EXPECT_FALSE(left.contains(parsed("ports:[155-155]")));
  EXPECT_TRUE((left + want).contains(total));
  EXPECT_FALSE(total.contains(parsed("mem:1")));
}

TEST(Resources, WireRoundTripAndValidation) {
  Resources r = parsed("cpus:2.5;mem:64;ports:[1-3,7-9]");
  ResourceList list;
  r.toWire(&list);
  auto back = Resources::fromWire(list);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == r);

  ResourceList bad;
  bad.Add()->set_scalar(1);  // empty name
  EXPECT_FALSE(Resources::fromWire(bad).ok());
  ResourceList negative;
  wire::Resource* n = negative.Add();
  n->set_name("cpus");
  n->set_scalar(-1);
  EXPECT_FALSE(Resources::fromWire(negative).ok());
}

}  // namespace
}  // namespace allot
