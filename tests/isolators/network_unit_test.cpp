// network/netns without the kernel: the address pool and the nftables text.
#include <gtest/gtest.h>

#include <set>

#include "isolators/network_pool.h"
#include "isolators/network_rules.h"

namespace allot {
namespace {

TEST(Ipv4Cidr, ParsesAndRejects) {
  auto c = Ipv4Cidr::parse("10.77.0.0/16");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ipv4ToString(c->gateway()), "10.77.0.1");
  EXPECT_EQ(ipv4ToString(c->broadcast()), "10.77.255.255");
  EXPECT_FALSE(Ipv4Cidr::parse("10.77.0.1/16").ok());  // host bits
  EXPECT_FALSE(Ipv4Cidr::parse("10.77.0.0/30").ok());  // no room
  EXPECT_FALSE(Ipv4Cidr::parse("10.77.0.0").ok());
  EXPECT_FALSE(Ipv4Cidr::parse("10.77.0.0/x").ok());
  EXPECT_FALSE(Ipv4Cidr::parse("300.0.0.0/8").ok());
}

TEST(AddressPool, HandsOutEveryHostAddressOnceThenRefuses) {
  AddressPool pool(*Ipv4Cidr::parse("10.1.2.0/29"));  // .2 .. .6
  EXPECT_EQ(pool.capacity(), 5u);
  std::set<std::string> got;
  for (int i = 0; i < 5; ++i) {
    auto a = pool.allocate();
    ASSERT_TRUE(a.ok());
    got.insert(ipv4ToString(*a));
  }
  EXPECT_EQ(got, (std::set<std::string>{"10.1.2.2", "10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.2.6"}));
  EXPECT_FALSE(pool.allocate().ok());
  pool.release(*parseIpv4("10.1.2.4"));
  EXPECT_EQ(ipv4ToString(*pool.allocate()), "10.1.2.4");
}

TEST(AddressPool, ReleasedAddressIsNotReusedAtOnceAndClaimsAreChecked) {
  AddressPool pool(*Ipv4Cidr::parse("10.1.0.0/24"));
  uint32_t first = *pool.allocate();
  pool.release(first);
  EXPECT_NE(*pool.allocate(), first);
  EXPECT_FALSE(pool.claim(*parseIpv4("10.1.0.1")));    // gateway
  EXPECT_FALSE(pool.claim(*parseIpv4("10.1.0.255")));  // broadcast
  EXPECT_FALSE(pool.claim(*parseIpv4("10.2.0.9")));    // outside
  EXPECT_TRUE(pool.claim(*parseIpv4("10.1.0.9")));
  EXPECT_FALSE(pool.claim(*parseIpv4("10.1.0.9")));  // twice
}

TEST(NetworkRules, ElementsNameTheExecutorAndItsPortRanges) {
  NetworkRulesConfig c{"allot_br", "br", *Ipv4Cidr::parse("10.9.0.0/16"), false};
  PortRanges ports;
  ports.push_back({31000, 31009});
  ports.push_back({31020, 31020});
  uint32_t a = *parseIpv4("10.9.0.5");
  EXPECT_EQ(addPortsScript(c, a, ports),
            "add element ip allot_br ports { 31000-31009 : 10.9.0.5, 31020 : 10.9.0.5 }\n"
            "add element ip allot_br offered { 10.9.0.5 . 31000-31009, 10.9.0.5 . 31020 }\n");
  EXPECT_EQ(deletePortsScript(c, a, {}), "");
  std::string table = tableScript(c, {{a, ports}});
  EXPECT_NE(table.find("ip saddr 10.9.0.0/16 ip daddr != 10.9.0.0/16 masquerade"), std::string::npos);
  EXPECT_NE(table.find("iifname \"br\" oifname \"br\" drop"), std::string::npos);
  EXPECT_NE(table.find("add element ip allot_br ports { 31000-31009 : 10.9.0.5"), std::string::npos);
  c.allowExecutorTraffic = true;
  EXPECT_EQ(tableScript(c, {}).find("drop"), std::string::npos);
}

}  // namespace
}  // namespace allot
