#include "diag/loop_sections.h"

#include <algorithm>
#include <cstdio>

namespace allot {

double LoopSections::Taken::totalMs() const {
  uint64_t ns = 0;
  for (const auto& [name, spent] : sections) ns += spent.ns;
  return static_cast<double>(ns) / 1e6;
}

std::string LoopSections::Taken::describe(size_t max) const {
  if (sections.empty()) return "nothing timed";
  std::string out;
  for (size_t i = 0; i < sections.size() && i < max; ++i) {
    const auto& [name, s] = sections[i];
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%s %.1f ms (%llu run%s, longest %.1f ms)", i ? ", " : "",
                  name.c_str(), static_cast<double>(s.ns) / 1e6, static_cast<unsigned long long>(s.count),
                  s.count == 1 ? "" : "s", static_cast<double>(s.longestNs) / 1e6);
    out += buf;
  }
  return out;
}

LoopSections::Taken LoopSections::take() {
  Taken out;
  for (size_t i = 0; i < spent_.size(); ++i) {
    if (spent_[i].count > 0) out.sections.emplace_back(names_[i], spent_[i]);
  }
  std::sort(out.sections.begin(), out.sections.end(),
            [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  reset();
  return out;
}

void LoopSections::Runs::add(uint64_t runNs) {
  ++count;
  ns += runNs;
  longestNs = std::max(longestNs, runNs);
  size_t b = 0;
  while (b < std::size(kRunBucketsMs) && static_cast<double>(runNs) > kRunBucketsMs[b] * 1e6) ++b;
  ++buckets[b];
}

void LoopSections::reset() { std::fill(spent_.begin(), spent_.end(), Spent{}); }

}  // namespace allot
