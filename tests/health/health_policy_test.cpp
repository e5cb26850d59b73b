// The health-check rule (sdk/health_check.h HealthPolicy) on a hand-moved
// clock, the protocol's limits on a check, and allot-execute's health and
// restart flags (sdk/health_flags.h).
#include <gtest/gtest.h>

#include "sdk/health_flags.h"
#include "proto/input_limits.h"
#include "proto/validate.h"
#include "sdk/health_check.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using Action = HealthPolicy::Action;

HealthCheckSettings settings(Duration grace, uint32_t failures) {
  wire::HealthCheck check;
  check.set_grace_period_s(std::chrono::duration<double>(grace).count());
  check.set_consecutive_failures(failures);
  return HealthCheckSettings::of(check);
}

TEST(HealthPolicy, AbsentFieldsTakeMesosDefaults) {
  HealthCheckSettings s = HealthCheckSettings::of(wire::HealthCheck());
  EXPECT_EQ(s.delay, 15s);
  EXPECT_EQ(s.interval, 10s);
  EXPECT_EQ(s.timeout, 20s);
  EXPECT_EQ(s.grace, 10s);
  EXPECT_EQ(s.failuresMax, 3u);
  wire::HealthCheck zero;
  zero.set_delay_s(0);
  zero.set_timeout_s(0);
  EXPECT_EQ(HealthCheckSettings::of(zero).delay, 0s);
  EXPECT_EQ(HealthCheckSettings::of(zero).timeout, 0s);
}

TEST(HealthPolicy, KillsAtTheThresholdNotBefore) {
  FakeClock clock;
  HealthPolicy p(settings(0s, 3), clock.now());
  EXPECT_EQ(p.record(true, clock.now()), Action::kReport);
  EXPECT_EQ(p.healthy(), true);
  EXPECT_EQ(p.record(true, clock.now()), Action::kNone);  // no news
  EXPECT_EQ(p.record(false, clock.now()), Action::kReport);
  EXPECT_EQ(p.healthy(), false);
  EXPECT_EQ(p.record(false, clock.now()), Action::kNone);
  EXPECT_EQ(p.record(false, clock.now()), Action::kKill);
}

TEST(HealthPolicy, ASuccessResetsTheCount) {
  FakeClock clock;
  HealthPolicy p(settings(0s, 2), clock.now());
  EXPECT_EQ(p.record(false, clock.now()), Action::kReport);
  EXPECT_EQ(p.record(true, clock.now()), Action::kReport);
  EXPECT_EQ(p.record(false, clock.now()), Action::kReport);
  EXPECT_EQ(p.consecutiveFailures(), 1u);
  EXPECT_EQ(p.record(false, clock.now()), Action::kKill);
}

TEST(HealthPolicy, FailuresWithinTheGracePeriodDoNotCount) {
  FakeClock clock;
  HealthPolicy p(settings(10s, 1), clock.now());
  clock.advance(9s);
  EXPECT_EQ(p.record(false, clock.now()), Action::kNone);
  EXPECT_FALSE(p.healthy().has_value());
  clock.advance(1s);
  EXPECT_EQ(p.record(false, clock.now()), Action::kKill);
}

TEST(HealthPolicy, TheFirstSuccessEndsTheGracePeriod) {
  FakeClock clock;
  HealthPolicy p(settings(60s, 2), clock.now());
  EXPECT_EQ(p.record(true, clock.now()), Action::kReport);
  clock.advance(1s);
  EXPECT_EQ(p.record(false, clock.now()), Action::kReport);
  EXPECT_EQ(p.record(false, clock.now()), Action::kKill);
}

// Every check's timers share one grid, so that checks due within a step
// start together; none starts early, none a step late.
TEST(HealthTimerGrid, NeverEarlyAndLessThanAStepLate) {
  const Duration step = kHealthTimerSlack;
  TimePoint onGrid(std::chrono::hours(1));
  EXPECT_EQ(onHealthTimerGrid(onGrid, step), onGrid);
  for (Duration past : {Duration(1), Duration(step / 3), Duration(step - Duration(1))}) {
    TimePoint t = onHealthTimerGrid(onGrid + past, step);
    EXPECT_EQ(t, onGrid + step) << past.count();
  }
  TimePoint early = onHealthTimerGrid(onGrid + 1ns, step);
  TimePoint late = onHealthTimerGrid(onGrid + step - 1ns, step);
  EXPECT_EQ(early, late) << "due within one step: one wakeup";
  EXPECT_EQ(onHealthTimerGrid(onGrid + step + 1ns, step), onGrid + 2 * step);
}

std::string refusal(const wire::HealthCheck& check) {
  wire::TaskInfo t;
  t.set_task_id("t");
  *t.mutable_health_check() = check;
  auto st = validateTaskInfo(t, "task");
  return st.ok() ? "ok" : st.error().describe();
}

TEST(HealthValidation, ChecksNameTheFieldOverItsLimit) {
  wire::HealthCheck http;
  http.set_type(wire::HealthCheck::HTTP);
  http.set_port(8080);
  http.set_path("/ready");
  EXPECT_EQ(refusal(http), "ok");
  auto bad = http;
  bad.set_path("/a b\r\nHost: x");
  EXPECT_NE(refusal(bad).find("task.health_check.path"), std::string::npos) << refusal(bad);
  bad = http;
  bad.set_port(0);
  EXPECT_NE(refusal(bad).find("task.health_check.port"), std::string::npos);
  bad = http;
  bad.set_interval_s(0.01);
  EXPECT_NE(refusal(bad).find("task.health_check.interval_s"), std::string::npos);
  bad = http;
  bad.set_delay_s(-1);
  EXPECT_NE(refusal(bad).find("task.health_check.delay_s"), std::string::npos);
  bad = http;
  bad.set_consecutive_failures(0);
  EXPECT_NE(refusal(bad).find("task.health_check.consecutive_failures"), std::string::npos);
  bad = http;
  bad.set_path(std::string(limits::kHealthCheckPathBytesMax, '/'));
  EXPECT_EQ(refusal(bad), "ok");
  bad.set_path(std::string(limits::kHealthCheckPathBytesMax + 1, '/'));
  EXPECT_NE(refusal(bad).find("bytes (limit"), std::string::npos);
  wire::HealthCheck command;
  command.set_type(wire::HealthCheck::COMMAND);
  EXPECT_NE(refusal(command).find("task.health_check.command"), std::string::npos);
  command.mutable_command()->set_shell("true");
  EXPECT_EQ(refusal(command), "ok");
  wire::HealthCheck unknown;
  unknown.set_type(static_cast<wire::HealthCheck::Type>(9));
  EXPECT_NE(refusal(unknown).find("task.health_check.type"), std::string::npos);
}

TEST(ExecuteHealthFlags, HttpPortAndPath) {
  HealthFlags f;
  f.http = "8080/healthz";
  f.intervalS = 1;
  f.failures = 2;
  auto check = healthCheckOf(f);
  ASSERT_TRUE(check.ok()) << check.error().describe();
  ASSERT_TRUE(check->has_value());
  EXPECT_EQ((*check)->type(), wire::HealthCheck::HTTP);
  EXPECT_EQ((*check)->port(), 8080u);
  EXPECT_EQ((*check)->path(), "/healthz");
  EXPECT_EQ((*check)->interval_s(), 1);
  EXPECT_EQ((*check)->consecutive_failures(), 2u);
  EXPECT_FALSE((*check)->has_delay_s());
}

TEST(ExecuteHealthFlags, RefusesConflictsAndStrayTimings) {
  HealthFlags both;
  both.command = "true";
  both.tcp = 80;
  EXPECT_FALSE(healthCheckOf(both).ok());
  HealthFlags stray;
  stray.intervalS = 1;
  EXPECT_FALSE(healthCheckOf(stray).ok());
  HealthFlags badPort;
  badPort.http = "http://x";
  EXPECT_FALSE(healthCheckOf(badPort).ok());
  HealthFlags tooFast;
  tooFast.tcp = 80;
  tooFast.intervalS = 0.001;
  EXPECT_FALSE(healthCheckOf(tooFast).ok());
  EXPECT_FALSE(healthCheckOf(HealthFlags{}).value().has_value());
}

TEST(ExecuteRestart, PolicyAndBackoff) {
  RestartFlags f;
  f.mode = "on-failure";
  f.maxRestarts = 2;
  auto p = RestartPolicy::of(f);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->restarts(wire::TASK_FAILED, 0));
  EXPECT_TRUE(p->restarts(wire::TASK_KILLED, 1));
  EXPECT_FALSE(p->restarts(wire::TASK_FAILED, 2));
  EXPECT_FALSE(p->restarts(wire::TASK_FINISHED, 0));
  f.mode = "always";
  f.maxRestarts = -1;
  EXPECT_TRUE(RestartPolicy::of(f)->restarts(wire::TASK_FINISHED, 1000));
  f.mode = "sometimes";
  EXPECT_FALSE(RestartPolicy::of(f).ok());
  EXPECT_EQ(RestartPolicy::backoff(1), kRestartBackoffMin);
  EXPECT_EQ(RestartPolicy::backoff(2), 2 * kRestartBackoffMin);
  EXPECT_EQ(RestartPolicy::backoff(40), kRestartBackoffMax);
}

}  // namespace
}  // namespace allot
