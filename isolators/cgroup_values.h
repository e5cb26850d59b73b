// cgroup_values: how an executor's resources become cgroup file values, on
// v1 and v2. Pure functions (unit-tested without a kernel); the choices and
// their reasons are in docs/decisions.md ("Isolators").
//
//   cpu weight   v1 cpu.shares = cpus * 1024, clamped to [2, 262144]
//                v2 cpu.weight = cpus * 100,  clamped to [1, 10000]
//                (the same proportions: 1 cpu = the kernel's default weight;
//                v2 is written natively, no shares->weight formula involved)
//   cpu cap      quota = cpus * period (period 100 ms), at least 1 ms
//   memory       bytes = mem (MiB) * 2^20, at least kMinMemoryBytes
//   pids         --cgroups-pids-max, else 1024 per started cpu, in [256, 32768]
//   blkio weight --cgroups-blkio-weight, else cpus * 100; v1 [10, 1000],
//                v2 [1, 10000]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace allot {

constexpr int64_t kCfsPeriodUs = 100000;
constexpr int64_t kMinCfsQuotaUs = 1000;
constexpr int64_t kMinMemoryBytes = 4LL << 20;
constexpr int64_t kPidsPerCpu = 1024;
constexpr int64_t kMinPids = 256;
constexpr int64_t kMaxPids = 32768;

int64_t cpuShares(double cpus);
int64_t cpuWeight(double cpus);
// Quota in microseconds per kCfsPeriodUs; -1 (no cap) when cpus <= 0.
int64_t cfsQuotaUs(double cpus);
// -1 (no limit) when mem <= 0.
int64_t memoryBytes(double memMiB);
int64_t pidsMax(double cpus, int64_t configured);
int64_t blkioWeightV1(double cpus, int64_t configured);
int64_t ioWeightV2(double cpus, int64_t configured);

// One device's throttles from --cgroups-blkio-limits; 0 means "no limit".
struct DeviceLimit {
  std::string device;  // "MAJ:MIN"
  int64_t rbps = 0, wbps = 0, riops = 0, wiops = 0;
};
// Parses "MAJ:MIN rbps=N wbps=N riops=N wiops=N[; MAJ:MIN ...]" (any subset
// of keys). Errors name the bad entry.
Result<std::vector<DeviceLimit>> parseDeviceLimits(const std::string& text);
// The v2 io.max line: "MAJ:MIN rbps=N wbps=max ...".
std::string ioMaxLine(const DeviceLimit& limit);

}  // namespace allot
