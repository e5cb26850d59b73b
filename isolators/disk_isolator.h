// disk/du: the `disk` resource (MiB) bounds what an executor's sandbox may
// hold, as Mesos's disk/du isolator does. Each container's sandbox is
// measured by a DiskScan (diskUsage(), isolators/disk_usage.h) on the
// worker pool, never on the loop: first interval/16 after prepare(), then
// as diskScanDelay() says (every `interval` far from the limit, more often
// near it or while it grows fast); at most one scan per container is in
// flight, and a scan stops once it passes the limit. The last measurement
// is reported as ResourceUsage.disk_bytes. A sandbox over its limit (or
// nested too deep to be measured) ends the container once, through
// watch()'s callback, with REASON_DISK_LIMIT and a message naming the
// limit and the usage. A container without a `disk` resource is measured
// every `interval` but never limited.
//
// Enforcement is periodic: a task writing at a steady rate gets past its
// limit by at most what it writes in interval/16 plus one scan; one that
// starts writing fast after a quiet spell, by up to what it writes in the
// delay chosen while it was quiet (at most `interval` x the free fraction
// of its limit) minus that free space. docs/decisions.md says why not
// filesystem project quotas.
//
// Thread: the agent's loop (scans run on the pool and post back to it).
#pragma once

#include <functional>
#include <memory>

#include "base/asio.h"
#include "base/clock.h"
#include "base/result.h"
#include "base/worker_pool.h"
#include "isolators/disk_usage.h"
#include "isolators/isolator.h"

namespace allot {

// Measures one sandbox; runs on a worker (the seam unit tests use to see
// where and how often the scan runs).
using DiskScan = std::function<Result<DiskUsage>(const std::string& sandbox, uint64_t stopAtBytes)>;

// `io` and `pool` must outlive the isolator.
std::unique_ptr<Isolator> makeDiskIsolator(asio::io_context& io, WorkerPool& pool, Duration interval,
                                           DiskScan scan = diskUsage);

// How long after measuring `bytes` in a sandbox limited to `limitBytes`
// (0: no limit) it is measured again, having grown `growthBytesPerS` since
// the measurement before: `interval` x the free fraction of the limit, and
// no longer than that growth needs to fill half of the free space; never
// less than interval / 16, never more than `interval`.
Duration diskScanDelay(Duration interval, uint64_t limitBytes, uint64_t bytes, double growthBytesPerS);

// The table's factory: needs IsolatorOptions' io and pool and a positive
// diskWatchIntervalS.
Result<std::unique_ptr<Isolator>> makeDiskIsolatorFromOptions(const IsolatorOptions& options);

}  // namespace allot
