// OfferBook: indexes, expiry and the accept rules (master/offer_book.h).
#include "master/offer_book.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace allot {
namespace {

TimePoint at(int seconds) { return TimePoint{} + std::chrono::seconds(seconds); }

Resources res(const char* text) { return *Resources::parse(text); }

OfferRecord offer(const char* framework, const char* agent, const char* resources, int expiry = 30) {
  return OfferRecord{framework, agent, res(resources), at(expiry)};
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(OfferBook, IndexesEveryOutstandingOfferByFrameworkAndAgent) {
  OfferBook book;
  book.add("O-1", offer("F-1", "A-1", "cpus:1"));
  book.add("O-2", offer("F-1", "A-2", "cpus:1"));
  book.add("O-3", offer("F-2", "A-1", "cpus:1"));
  EXPECT_EQ(sorted(book.ofFramework("F-1")), (std::vector<std::string>{"O-1", "O-2"}));
  EXPECT_EQ(sorted(book.ofAgent("A-1")), (std::vector<std::string>{"O-1", "O-3"}));
  auto removed = book.remove("O-1");
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->agentId, "A-1");
  EXPECT_FALSE(book.remove("O-1"));
  EXPECT_EQ(book.ofFramework("F-1"), std::vector<std::string>{"O-2"});
  EXPECT_EQ(book.ofAgent("A-1"), std::vector<std::string>{"O-3"});
  book.remove("O-2");
  book.remove("O-3");
  EXPECT_EQ(book.size(), 0u);
  EXPECT_EQ(book.countOfFramework("F-1"), 0u);
  EXPECT_EQ(book.countOfAgent("A-1"), 0u);
}

TEST(OfferBook, ExpiredOffersComeOutOnceAndOnlyWhileOutstanding) {
  OfferBook book;
  book.add("O-1", offer("F-1", "A-1", "cpus:1", 10));
  book.add("O-2", offer("F-1", "A-1", "cpus:1", 20));
  book.add("O-3", offer("F-1", "A-1", "cpus:1", 30));
  book.remove("O-2");
  EXPECT_TRUE(book.takeExpired(at(9)).empty());
  EXPECT_EQ(book.takeExpired(at(20)), std::vector<std::string>{"O-1"});
  EXPECT_TRUE(book.takeExpired(at(20)).empty());  // still outstanding until removed
  EXPECT_EQ(book.takeExpired(at(40)), std::vector<std::string>{"O-3"});
}

TEST(OfferBook, AcceptSpendsOwnOutstandingOffersOnOneAgent) {
  OfferBook book;
  book.add("O-1", offer("F-1", "A-1", "cpus:1;mem:100"));
  book.add("O-2", offer("F-1", "A-1", "cpus:2"));
  auto ok = book.checkAccept("F-1", {"O-1", "O-2"});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->agentId, "A-1");
  EXPECT_EQ(ok->offered, res("cpus:3;mem:100"));
  EXPECT_EQ(book.size(), 2u);  // checking changes nothing
}

TEST(OfferBook, AcceptRefusesEveryBrokenRule) {
  OfferBook book;
  book.add("O-1", offer("F-1", "A-1", "cpus:1"));
  book.add("O-2", offer("F-1", "A-2", "cpus:1"));
  book.add("O-3", offer("F-2", "A-1", "cpus:1"));
  auto refused = [&](std::vector<std::string> ids) {
    auto r = book.checkAccept("F-1", ids);
    return r ? std::string("accepted") : r.error().message;
  };
  EXPECT_EQ(refused({}), "no offer ids");
  EXPECT_EQ(refused({"O-9"}), "offer O-9 is unknown, was rescinded or belongs to another framework");
  EXPECT_EQ(refused({"O-1", "O-3"}),
            "offer O-3 is unknown, was rescinded or belongs to another framework");
  EXPECT_EQ(refused({"O-1", "O-1"}), "offer O-1 is named more than once");
  EXPECT_EQ(refused({"O-1", "O-2"}), "offers span more than one agent");
  book.remove("O-1");
  EXPECT_EQ(refused({"O-1"}), "offer O-1 is unknown, was rescinded or belongs to another framework");
}

TEST(OfferBook, ARefusedAcceptReleasesOnlyTheSendersOwnOffersOnce) {
  OfferBook book;
  book.add("O-1", offer("F-1", "A-1", "cpus:1"));
  book.add("O-2", offer("F-1", "A-2", "cpus:1"));
  book.add("O-3", offer("F-2", "A-1", "cpus:1"));
  EXPECT_EQ(book.ownOffers("F-1", {"O-1", "O-3", "O-9", "O-1", "O-2"}),
            (std::vector<std::string>{"O-1", "O-2"}));
}

}  // namespace
}  // namespace allot
