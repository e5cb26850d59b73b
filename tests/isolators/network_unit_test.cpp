// network/netns without the kernel: the address pools (IPv4 and IPv6) and
// the nftables text.
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
  EXPECT_EQ(addPortsScript(c, {a}, ports),
            "add element ip allot_br ports { 31000-31009 : 10.9.0.5, 31020 : 10.9.0.5 }\n"
            "add element ip allot_br offered { 10.9.0.5 . 31000-31009, 10.9.0.5 . 31020 }\n");
  EXPECT_EQ(deletePortsScript(c, {a}, {}), "");
  std::string table = tableScript(c, {{{a}, ports}});
  EXPECT_NE(table.find("ip saddr 10.9.0.0/16 ip daddr != 10.9.0.0/16 masquerade"), std::string::npos);
  EXPECT_NE(table.find("iifname \"br\" oifname \"br\" drop"), std::string::npos);
  EXPECT_NE(table.find("add element ip allot_br ports { 31000-31009 : 10.9.0.5"), std::string::npos);
  c.allowExecutorTraffic = true;
  EXPECT_EQ(tableScript(c, {}).find("drop"), std::string::npos);
  // Without --network-cidr6 a previous configuration's ip6 table goes.
  EXPECT_NE(table.find("add table ip6 allot_br\ndelete table ip6 allot_br\n"), std::string::npos);
  EXPECT_EQ(table.find("table ip6 allot_br {"), std::string::npos);
}

TEST(Ipv6Cidr, ParsesAndRejectsWithTheReason) {
  auto c = Ipv6Cidr::parse("fd77:1::/64");
  ASSERT_TRUE(c.ok()) << c.error().describe();
  EXPECT_EQ(c->toString(), "fd77:1::/64");
  EXPECT_EQ(c->gateway().toString(), "fd77:1::1");
  auto expectRefused = [](const char* text, const char* why) {
    auto r = Ipv6Cidr::parse(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().message.find(why), std::string::npos) << text << ": " << r.error().message;
  };
  expectRefused("10.77.0.0/16", "IPv4 CIDR");
  expectRefused("fd77::", "not an IPv6 prefix");
  expectRefused("fd77::/", "bad prefix length");
  expectRefused("fd77::/6x", "bad prefix length");
  expectRefused("fd77::/63", "64..120");
  expectRefused("fd77::/121", "64..120");
  expectRefused("fd77::1/64", "host bits");
  expectRefused("fd77::80/120", "host bits");
  expectRefused("::/64", "IPv4-mapped");
  expectRefused("::ffff:0:0/96", "IPv4-mapped");
  expectRefused("fe80::/64", "link-local");
  expectRefused("ff02::/64", "multicast");
  expectRefused("fd77:::/64", "not an IPv6 address");
}

// Reserved in a prefix: the network address (subnet-router anycast), the
// gateway and the highest 128 (RFC 2526).
TEST(Ipv6Cidr, ReservesNetworkGatewayAndTheTop128) {
  auto c = *Ipv6Cidr::parse("fd77::/120");
  EXPECT_EQ(c.lastExecutorOffset(), 127u);
  EXPECT_EQ(c.capacity(), 126u);
  auto v4 = *Ipv4Cidr::parse("10.1.2.0/25");  // executors .2 .. .126
  EXPECT_FALSE(c.executorAddress(v4, *parseIpv4("10.1.2.0")).has_value());
  EXPECT_FALSE(c.executorAddress(v4, *parseIpv4("10.1.2.1")).has_value());
  EXPECT_EQ(c.executorAddress(v4, *parseIpv4("10.1.2.2"))->toString(), "fd77::2");
  EXPECT_EQ(c.executorAddress(v4, *parseIpv4("10.1.2.126"))->toString(), "fd77::7e");
  EXPECT_FALSE(c.executorAddress(*Ipv4Cidr::parse("10.1.2.0/24"), *parseIpv4("10.1.2.128")).has_value());
  EXPECT_FALSE(c.executorAddress(v4, *parseIpv4("10.9.9.9")).has_value());
  EXPECT_TRUE(c.contains(*Ipv6Address::parse("fd77::ff")));
  EXPECT_FALSE(c.contains(*Ipv6Address::parse("fd77::100")));
  auto wide = *Ipv6Cidr::parse("fd77:0:0:5::/64");
  EXPECT_EQ(wide.lastExecutorOffset(), ~uint64_t(0) - 128);
  EXPECT_EQ(wide.executorAddress(*Ipv4Cidr::parse("10.0.0.0/8"), *parseIpv4("10.255.255.254"))->toString(),
            "fd77::5:0:0:ff:fffe");  // RFC 5952: the first of two equal zero runs is "::"
}

TEST(Ipv6Cidr, DualStackNeedsAnIpv6AddressForEveryIpv4One) {
  auto c = *Ipv6Cidr::parse("fd77::/120");
  EXPECT_FALSE(dualStackMismatch(*Ipv4Cidr::parse("10.1.2.0/25"), c).has_value());
  auto why = dualStackMismatch(*Ipv4Cidr::parse("10.1.2.0/24"), c);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "fd77::/120 has room for 126 executors, 10.1.2.0/24 for 253: every executor needs one address of each");
  EXPECT_FALSE(dualStackMismatch(*Ipv4Cidr::parse("10.0.0.0/8"), *Ipv6Cidr::parse("fd77::/96")).has_value());
}

TEST(Ipv6Address, RoundTripsThroughTextAndBytes) {
  auto a = *Ipv6Address::parse("2001:db8::1:2");
  EXPECT_EQ(a.toString(), "2001:db8::1:2");
  uint8_t bytes[16];
  a.toBytes(bytes);
  EXPECT_EQ(bytes[0], 0x20);
  EXPECT_EQ(bytes[15], 0x02);
  EXPECT_EQ(Ipv6Address::fromBytes(bytes), a);
  EXPECT_FALSE(Ipv6Address::parse("10.0.0.1").ok());
}

TEST(NetworkRules, DualStackAddsAnIp6TableAndIpv6Elements) {
  NetworkRulesConfig c{"allot_br", "br", *Ipv4Cidr::parse("10.9.0.0/16"), false, *Ipv6Cidr::parse("fd09::/64")};
  PortRanges ports;
  ports.push_back({31000, 31000});
  ExecutorAddresses a{*parseIpv4("10.9.0.5"), *Ipv6Address::parse("fd09::5")};
  EXPECT_EQ(addPortsScript(c, a, ports),
            "add element ip allot_br ports { 31000 : 10.9.0.5 }\n"
            "add element ip allot_br offered { 10.9.0.5 . 31000 }\n"
            "add element ip6 allot_br ports { 31000 : fd09::5 }\n"
            "add element ip6 allot_br offered { fd09::5 . 31000 }\n");
  // An address outside today's prefix (a recovered executor's) gets no ip6 elements.
  ExecutorAddresses stale{a.v4, *Ipv6Address::parse("fd10::5")};
  EXPECT_EQ(addPortsScript(c, stale, ports).find("ip6"), std::string::npos);
  std::string table = tableScript(c, {{a, ports}});
  EXPECT_NE(table.find("table ip6 allot_br {"), std::string::npos);
  EXPECT_NE(table.find("map ports { type inet_service : ipv6_addr; flags interval; }"), std::string::npos);
  EXPECT_NE(table.find("dnat ip6 to th dport map @ports"), std::string::npos);
  EXPECT_NE(table.find("ip6 saddr fd09::/64 ip6 daddr != fd09::/64 masquerade"), std::string::npos);
  EXPECT_NE(table.find("ip6 daddr . th dport @offered accept"), std::string::npos);
  EXPECT_NE(table.find("add element ip6 allot_br ports { 31000 : fd09::5 }"), std::string::npos);
  EXPECT_EQ(dropTableScript(c),
            "add table ip allot_br\ndelete table ip allot_br\nadd table ip6 allot_br\ndelete table ip6 allot_br\n");
}

}  // namespace
}  // namespace allot
