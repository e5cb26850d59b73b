// One failover_bench worker process: a slice of the emulated agents and
// frameworks, each a real protocol peer on the production ReconnectingLink
// (jittered exponential backoff, leader-change spread, epoch fencing; the
// agent's defaults), all fed by one SharedDetector (one ZooKeeper session
// per worker).
//
// Agents re-register with their id, secret and every task they run (as
// RUNNING), keep each status update until the master forwards its
// acknowledgement, and resend the unacknowledged ones after every
// registration and every --status-retry (as agent/agent.cpp does).
// Frameworks re-register with their id and secret, acknowledge every
// update, and suppress offers once their tasks run; framework 0 is the
// probe that keeps declining offers (it measures "offers flow again").
//
// Each framework but the probe launches one long-lived task plus one task
// per kill round ("<framework>-r<k>"); the driver's "finish <k>" line on
// stdin makes the agents end round k's tasks (TASK_FINISHED) right at the
// kill, so those terminal updates are in flight across the failover. After
// the round recovered, "reconcile <k>" makes every framework reconcile with
// the new leader: explicitly (the tasks it believes run) and implicitly
// (every task the master knows), each answer checked against the truth.
//
// Events on stdout, one line each, times in CLOCK_MONOTONIC nanoseconds
// (steady_clock: comparable across processes):
//   A <t> <0|1>       every agent of this worker registered (1) or not (0)
//   F <t> <0|1>       the same for its frameworks
//   D <t> <port> <diag>  this worker's detector reports the leader at port
//   G <t> <port> <diag>  every link has been told of the leader at port
//   H <t> <port> <diag>  the first link handshaken with the master at port
//   R <t> <port> <diag>  the first agent registration answered by the master at port
//   S <t> <port> <diag>  the same for the first framework
//                     <diag> = "<lost> <cpu_ns> <wait_ns>": links lost since the
//                     latest K, and the loop thread's time on a CPU and waiting
//                     for one (/proc/thread-self/schedstat, ns since it started)
//   K <t> <k> <cpu_ns> <wait_ns>  "finish <k>" received (right before the signal)
//   E <t> <k>         the first link lost after it
//   O <t> <port>      the probe's first offer from the master at port
//   U <t> <n>         tasks reported RUNNING so far (set-up)
//   T <t> <k>         a framework received round k's TASK_FINISHED (once per task)
//   L <t> <task>      a framework received TASK_LOST
//   C <t> <n>         a framework's explicit reconciliation confirmed all its
//                     n running tasks RUNNING (after the driver's "reconcile <k>")
//   W <t> <task>:<state>  a reconciliation answer that is not the task's true
//                     state (RUNNING for the long task and rounds after k,
//                     FINISHED for rounds up to k)
#pragma once

#include <cstdint>
#include <string>

namespace allot {

struct WorkerSettings {
  std::string zk;
  int64_t workerIndex = 0;
  int64_t workers = 1;
  int64_t agents = 0;       // in the whole bench; this worker takes every workers-th
  int64_t frameworks = 0;   // the same
  int64_t rounds = 0;       // kill rounds: one finishing task per framework each
  double statusRetryS = 10;
  double startSpreadS = 2;  // links start over this many seconds at set-up
  int64_t fanoutChunk = 32;    // links told of a new leader per handler (0: all at once) ...
  int64_t fanoutEqualPasses = 4;  // ... in the first this many handlers, then doubling
};

// Runs until stdin closes (the driver exited); returns the exit code.
int runWorker(const WorkerSettings& settings);

}  // namespace allot
