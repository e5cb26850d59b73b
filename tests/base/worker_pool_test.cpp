#include "base/worker_pool.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

namespace allot {
namespace {

using namespace std::chrono_literals;

TEST(WorkerPool, RunsWorkOffTheLoopAndDeliversResultsOnIt) {
  asio::io_context io;
  WorkerPool pool(io, {.threads = 2, .queueMax = 16});
  std::thread::id loop = std::this_thread::get_id();
  std::vector<int> results;
  std::atomic<int> offLoop{0};
  for (int i = 0; i < 8; ++i) {
    Status st = pool.submit<int>(
        [i, loop, &offLoop] {
          if (std::this_thread::get_id() != loop) ++offLoop;
          return i * i;
        },
        [&results, loop](int r) {
          EXPECT_EQ(std::this_thread::get_id(), loop);
          results.push_back(r);
        });
    ASSERT_TRUE(st.ok());
  }
  io.run();  // returns once every result is delivered (the jobs hold work)
  EXPECT_EQ(results.size(), 8u);
  EXPECT_EQ(offLoop.load(), 8);
}

// Niced workers: the job runs that many nice levels below the caller's
// thread, which keeps its own.
TEST(WorkerPool, NicedWorkersRunBelowTheLoopsPriority) {
  asio::io_context io;
  errno = 0;
  int mine = getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  if (mine > 9) GTEST_SKIP() << "this test already runs at nice " << mine;
  WorkerPool pool(io, {.threads = 1, .queueMax = 4, .niceness = 10});
  int seen = -100;
  ASSERT_TRUE(pool.submit<int>([] { return getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))); },
                               [&seen](int n) { seen = n; })
                  .ok());
  io.run();
  EXPECT_EQ(seen, mine + 10);
  EXPECT_EQ(getpriority(PRIO_PROCESS, 0), mine);
}

// SCHED_IDLE is per thread: the caller's thread moves, its process's other
// threads keep their policy.
TEST(WorkerPool, LowerToIdlePolicyMovesOnlyTheCallingThread) {
  int mine = sched_getscheduler(0);
  ASSERT_GE(mine, 0);
  if (mine == SCHED_IDLE) GTEST_SKIP() << "this test already runs under SCHED_IDLE";
  int inThread = -1;
  Status st = okStatus();
  std::thread t([&] {
    st = lowerToIdlePolicy();
    inThread = sched_getscheduler(0);
  });
  t.join();
  ASSERT_TRUE(st.ok()) << st.error().describe();
  EXPECT_EQ(inThread, SCHED_IDLE);
  EXPECT_EQ(sched_getscheduler(0), mine);
}

TEST(WorkerPool, IdlePolicyWorkersRunUnderSchedIdle) {
  int mine = sched_getscheduler(0);
  ASSERT_GE(mine, 0);
  if (mine == SCHED_IDLE) GTEST_SKIP() << "this test already runs under SCHED_IDLE";
  asio::io_context io;
  WorkerPool pool(io, {.threads = 2, .queueMax = 4, .idlePolicy = true});
  std::vector<int> seen;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pool.submit<int>([] { return sched_getscheduler(0); }, [&seen](int p) { seen.push_back(p); }).ok());
  }
  io.run();
  EXPECT_EQ(seen, (std::vector<int>{SCHED_IDLE, SCHED_IDLE}));
  EXPECT_EQ(sched_getscheduler(0), mine);
}

TEST(WorkerPool, RefusesJobsPastItsQueueLimit) {
  asio::io_context io;
  WorkerPool pool(io, {.threads = 1, .queueMax = 2});
  std::atomic<bool> release{false};
  auto block = [&release] {
    while (!release) std::this_thread::sleep_for(1ms);
    return 0;
  };
  ASSERT_TRUE(pool.submit<int>(block, [](int) {}).ok());
  while (pool.running() == 0) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(pool.submit<int>(block, [](int) {}).ok());
  ASSERT_TRUE(pool.submit<int>(block, [](int) {}).ok());
  Status full = pool.submit<int>(block, [](int) {});
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().message.find("2 jobs"), std::string::npos);
  release = true;
  io.run();
  EXPECT_EQ(pool.queued(), 0u);
}

TEST(WorkerPool, DestroyedPoolDropsResultsButWaitsForRunningJobs) {
  asio::io_context io;
  std::atomic<bool> ran{false};
  bool delivered = false;
  {
    WorkerPool pool(io, {.threads = 1, .queueMax = 4});
    ASSERT_TRUE(pool.submit<int>(
                        [&ran] {
                          std::this_thread::sleep_for(20ms);
                          ran = true;
                          return 1;
                        },
                        [&delivered](int) { delivered = true; })
                    .ok());
    while (pool.running() == 0 && !ran) std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(ran);
  io.run_for(10ms);
  EXPECT_FALSE(delivered);
}

}  // namespace
}  // namespace allot
