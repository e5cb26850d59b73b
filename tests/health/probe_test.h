// A health probe's test: the test's loop, and one attempt of a probe run on
// it to its verdict (sdk/health_check.h).
#pragma once

#include <optional>

#include <gtest/gtest.h>

#include "base/asio.h"
#include "sdk/health_check.h"
#include "tests/common/test_util.h"

namespace allot {

class ProbeTest : public ::testing::Test {
 protected:
  // One attempt of `probe`, run to its verdict (a failed one after 5 s).
  HealthVerdict attempt(HealthProbe& probe) {
    std::optional<HealthVerdict> verdict;
    probe.start([&](HealthVerdict v) { verdict = std::move(v); });
    EXPECT_TRUE(testing::runUntil(io_, [&] { return verdict.has_value(); }, std::chrono::seconds(5)))
        << "no verdict";
    return verdict.value_or(HealthVerdict{false, "none"});
  }
  asio::io_context io_;
};

}  // namespace allot
