#include "base/flags.h"

#include <gtest/gtest.h>

namespace allot {
namespace {

struct Parsed {
  std::string listen = "127.0.0.1:5050";
  int64_t count = 1;
  double ratio = 0.5;
  bool verbose = false;
};

Flags makeFlags(Parsed* p) {
  Flags flags("prog", "test program");
  flags.addString("listen", &p->listen, "address");
  flags.addInt("count", &p->count, "how many");
  flags.addDouble("ratio", &p->ratio, "a ratio");
  flags.addBool("verbose", &p->verbose, "talk more");
  return flags;
}

TEST(Flags, ParsesBothSpellingsAndKeepsDefaults) {
  Parsed p;
  Flags flags = makeFlags(&p);
  const char* argv[] = {"prog", "--listen", "0.0.0.0:1", "--count=7", "--verbose"};
  ASSERT_TRUE(flags.parse(5, argv).ok());
  EXPECT_EQ(p.listen, "0.0.0.0:1");
  EXPECT_EQ(p.count, 7);
  EXPECT_DOUBLE_EQ(p.ratio, 0.5);
  EXPECT_TRUE(p.verbose);
}

TEST(Flags, RejectsUnknownFlagWithItsName) {
  Parsed p;
  Flags flags = makeFlags(&p);
  const char* argv[] = {"prog", "--bogus=1"};
  Status st = flags.parse(2, argv);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("--bogus"), std::string::npos);
}

TEST(Flags, RejectsMalformedNumbersAndMissingValues) {
  Parsed p;
  Flags flags = makeFlags(&p);
  const char* bad[] = {"prog", "--count=12x"};
  EXPECT_FALSE(flags.parse(2, bad).ok());
  const char* nan[] = {"prog", "--ratio=nan"};
  EXPECT_FALSE(flags.parse(2, nan).ok());
  const char* missing[] = {"prog", "--listen"};
  EXPECT_FALSE(flags.parse(2, missing).ok());
  const char* positional[] = {"prog", "extra"};
  EXPECT_FALSE(flags.parse(2, positional).ok());
}

TEST(Flags, HelpIsReportedAndUsageListsEveryFlag) {
  Parsed p;
  Flags flags = makeFlags(&p);
  const char* argv[] = {"prog", "--help"};
  ASSERT_TRUE(flags.parse(2, argv).ok());
  EXPECT_TRUE(flags.helpRequested());
  std::string usage = flags.usage();
  for (const char* name : {"--listen", "--count", "--ratio", "--verbose", "127.0.0.1:5050"}) {
    EXPECT_NE(usage.find(name), std::string::npos) << name;
  }
}

TEST(HostPort, ParsesHostsPortsAndBracketedIpv6) {
  auto a = parseHostPort("127.0.0.1:5050");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 5050);
  auto b = parseHostPort("[::1]:0");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "::1");
  EXPECT_FALSE(parseHostPort("localhost").ok());
  EXPECT_FALSE(parseHostPort("host:65536").ok());
  EXPECT_FALSE(parseHostPort(":80").ok());
  EXPECT_FALSE(parseHostPort("host:").ok());
}

}  // namespace
}  // namespace allot
