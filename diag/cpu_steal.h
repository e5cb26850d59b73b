// CpuSteal: the host's steal time per CPU, as a virtual machine's kernel
// accounts it: the time a vCPU was runnable on the host but not running
// (KVM's steal-time area, CONFIG_PARAVIRT_TIME_ACCOUNTING), the 8th value of
// each "cpuN" line of /proc/stat. A guest thread that waits on a stolen vCPU,
// or whose timer interrupt the host delivers late, is late for the host's
// reasons, not the guest's.
//
// Granularity: /proc/stat counts in USER_HZ ticks (10 ms at 100 Hz), so a
// difference of two samples is within one tick of the truth; the kernel
// accounts steal at each scheduler tick and when a CPU leaves idle, so a
// sample can lag by one tick (4 ms at HZ=250). Finer sources exist only in
// debugfs (sched/debug's per-CPU clock - clock_task, ns; 3.5 ms to read on
// this machine against 33 us for /proc/stat): see docs/decisions.md.
//
//   CpuSteal steal;            // opens /proc/stat once
//   CpuSteal::Sample s;
//   if (auto st = steal.read(s); !st) ...;   // one pread, no allocation
//   double ms = s.ticks[cpu] * CpuSteal::tickMs();
//
// Input is the kernel's text: a malformed cpuN line is an Error, never a
// CHECK. Limits: CPUs numbered kCpusMax and above are not kept; only the
// first kReadBytesMax bytes of the file are read (the cpu lines come
// first: ~60 bytes per CPU, 256 CPUs fit).
// Thread: any, one thread per object (the read buffer is a member).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/unique_fd.h"

namespace allot {

class CpuSteal {
 public:
  static constexpr size_t kCpusMax = 256;
  static constexpr size_t kReadBytesMax = 16 * 1024;
  static constexpr uint64_t kUnknown = UINT64_MAX;  // a CPU without a cpuN line (offline)

  struct Sample {
    size_t cpus = 0;                       // highest CPU seen + 1
    std::array<uint64_t, kCpusMax> ticks;  // steal per CPU in USER_HZ ticks, or kUnknown

    // The steal of `cpu` from `before` to this sample in ms; 0 when either
    // does not know the CPU or the count went backwards (CPU hot-plug).
    double stealMsSince(const Sample& before, int cpu) const;
  };

  explicit CpuSteal(std::string path = "/proc/stat");
  CpuSteal(const CpuSteal&) = delete;
  CpuSteal& operator=(const CpuSteal&) = delete;

  // Reads the file (one pread from offset 0 into the member buffer) and
  // parses it into `out`. An Error when the file could not be opened or read,
  // or its text is malformed (parse()).
  Status read(Sample& out);

  // The steal column of every "cpuN" line (the aggregate "cpu" line and
  // every other line are skipped). An Error for a cpuN line with fewer than 8
  // values, a value that is not a decimal number, or text with no cpuN line.
  // A last line cut off without its newline is ignored (the read's limit).
  static Status parse(std::string_view text, Sample& out);

  // One USER_HZ tick in ms (sysconf(_SC_CLK_TCK); 10 on Linux).
  static double tickMs();

 private:
  std::string path_;
  UniqueFd fd_;
  std::array<char, kReadBytesMax> buf_;
};

}  // namespace allot
