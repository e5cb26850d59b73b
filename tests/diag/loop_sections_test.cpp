// LoopSections: sums by section since the last take(), most time first.
// Only lower bounds on time are checked (a sleep lasts at least as long).
#include <gtest/gtest.h>

#include <thread>

#include "diag/loop_sections.h"

namespace allot {
namespace {

using namespace std::chrono_literals;

TEST(LoopSections, TakeSumsEachSectionMostTimeFirstAndResets) {
  LoopSections sections({"fast", "slow", "unused"});
  for (int i = 0; i < 3; ++i) auto timed = sections.time(0);
  {
    auto timed = sections.time(1);
    std::this_thread::sleep_for(3ms);
  }
  LoopSections::Taken taken = sections.take();
  ASSERT_EQ(taken.sections.size(), 2u) << "a section that never ran is left out";
  EXPECT_EQ(taken.sections[0].first, "slow");
  EXPECT_EQ(taken.sections[0].second.count, 1u);
  EXPECT_GE(taken.sections[0].second.ns, 3'000'000u);
  EXPECT_EQ(taken.sections[0].second.longestNs, taken.sections[0].second.ns);
  EXPECT_EQ(taken.sections[1].first, "fast");
  EXPECT_EQ(taken.sections[1].second.count, 3u);
  EXPECT_GE(taken.totalMs(), 3.0);
  EXPECT_EQ(taken.describe(1).rfind("slow ", 0), 0u) << taken.describe(1);
  EXPECT_EQ(taken.describe(1).find("fast"), std::string::npos) << taken.describe(1);
  EXPECT_TRUE(sections.take().sections.empty()) << "take() starts the next interval from zero";
  EXPECT_EQ(sections.take().describe(), "nothing timed");
}

TEST(LoopSections, ResetForgetsAndUnknownOrNullOwnersTimeNothing) {
  LoopSections sections({"a"});
  { auto timed = sections.time(0); }
  sections.reset();
  { auto timed = sections.time(7); }
  { LoopSections::Timer timed(nullptr, 0); }
  EXPECT_TRUE(sections.take().sections.empty());
}

// Exclusive nesting: the handler is charged only for what its nested call
// did not take, so the call that blocked is the biggest section; inclusive
// (the default) charges the handler for both.
TEST(LoopSections, ExclusiveNestingChargesTheInnerSectionOnly) {
  for (auto nesting : {LoopSections::Nesting::kExclusive, LoopSections::Nesting::kInclusive}) {
    LoopSections sections({"handler", "kernel call"}, nesting);
    {
      auto handler = sections.time(0);
      {
        auto call = sections.time(1);
        std::this_thread::sleep_for(20ms);
      }
    }
    { auto again = sections.time(1); }
    LoopSections::Taken taken = sections.take();
    ASSERT_EQ(taken.sections.size(), 2u);
    const LoopSections::Spent* handler = nullptr;
    const LoopSections::Spent* call = nullptr;
    for (const auto& [name, spent] : taken.sections) (name == "handler" ? handler : call) = &spent;
    ASSERT_TRUE(handler && call);
    EXPECT_GE(call->ns, 20'000'000u);
    EXPECT_EQ(call->count, 2u);
    if (nesting == LoopSections::Nesting::kExclusive) {
      EXPECT_EQ(taken.sections[0].first, "kernel call") << taken.describe();
      EXPECT_LT(handler->ns, call->ns) << "the handler's own part only: " << taken.describe();
    } else {
      EXPECT_GE(handler->ns, call->longestNs) << "the handler includes its call: " << taken.describe();
    }
  }
}

// The run histogram: each run in the bucket of its own (exclusive) time,
// kept across take() and reset(), bounds inclusive.
TEST(LoopSections, RunsFallInTheirBucketsAndOutliveTake) {
  LoopSections::Runs runs;
  runs.add(0);                  // <= 0.05 ms
  runs.add(5'000'000);          // exactly 5 ms: the 5 ms bucket
  runs.add(5'000'001);          // just past it: the 7.5 ms bucket
  runs.add(1'000'000'000);      // 1 s: past the last bound
  auto bucketOf = [](double ms) {
    size_t b = 0;
    while (LoopSections::kRunBucketsMs[b] != ms) ++b;
    return b;
  };
  EXPECT_EQ(runs.buckets[0], 1u);
  EXPECT_EQ(runs.buckets[bucketOf(5)], 1u);
  EXPECT_EQ(runs.buckets[bucketOf(7.5)], 1u);
  EXPECT_EQ(runs.buckets[LoopSections::kRunBuckets - 1], 1u);
  EXPECT_EQ(runs.count, 4u);
  EXPECT_EQ(runs.longestNs, 1'000'000'000u);
  EXPECT_EQ(runs.ns, 1'010'000'001u);

  LoopSections sections({"handler", "kernel call"}, LoopSections::Nesting::kExclusive);
  {
    auto handler = sections.time(0);
    auto call = sections.time(1);
    std::this_thread::sleep_for(6ms);
  }
  (void)sections.take();
  sections.reset();
  const auto& call = sections.runs()[1];
  EXPECT_EQ(call.count, 1u) << "take() and reset() leave the histogram";
  EXPECT_GE(call.longestNs, 6'000'000u);
  uint64_t over5 = 0;
  for (size_t b = bucketOf(5) + 1; b < LoopSections::kRunBuckets; ++b) over5 += call.buckets[b];
  EXPECT_EQ(over5, 1u);
  EXPECT_EQ(sections.runs()[0].count, 1u);
  EXPECT_LT(sections.runs()[0].longestNs, call.longestNs) << "the handler's own part only";
}

// The hook runs once per outermost section, never for a nested one (a
// resting stall meter's wake(): one call per handler).
TEST(LoopSections, OnOutermostStartRunsOncePerOutermostSection) {
  LoopSections s({"handler", "call"}, LoopSections::Nesting::kExclusive);
  int calls = 0;
  s.onOutermostStart([&] { ++calls; });
  {
    auto outer = s.time(0);
    auto inner = s.time(1);
  }
  EXPECT_EQ(calls, 1);
  { auto again = s.time(1); }
  EXPECT_EQ(calls, 2);
  { LoopSections::Timer none(nullptr, 0); }
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace allot
