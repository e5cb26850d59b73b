// Small helpers the benchmarks share: milliseconds of a steady-clock
// duration, and the p-th percentile of samples (the sample at index
// floor(p * n), so 1.0 is the maximum).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace allot::bench {

inline double ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace allot::bench
