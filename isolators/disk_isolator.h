// disk/du: the `disk` resource (MiB) bounds what an executor's sandbox may
// hold, as Mesos's disk/du isolator does. Every `interval` the sandbox of
// each container is measured by a DiskScan (diskUsage(), isolators/
// disk_usage.h) on the worker pool, never on the loop; at most one scan per
// container is in flight, and a scan stops once it passes the limit. The
// last measurement is reported as ResourceUsage.disk_bytes. A sandbox over
// its limit (or nested too deep to be measured) ends the container once,
// through watch()'s callback, with REASON_DISK_LIMIT and a message naming
// the limit and the usage. A container without a `disk` resource is
// measured but never limited.
//
// Enforcement is periodic: a task can write past its limit for up to one
// interval (plus one scan) before it is stopped. docs/decisions.md says why
// not filesystem project quotas.
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

// The table's factory: needs IsolatorOptions' io and pool and a positive
// diskWatchIntervalS.
Result<std::unique_ptr<Isolator>> makeDiskIsolatorFromOptions(const IsolatorOptions& options);

}  // namespace allot
