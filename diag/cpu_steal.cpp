#include "diag/cpu_steal.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

namespace allot {

namespace {

constexpr size_t kStealColumn = 8;  // user nice system idle iowait irq softirq steal

// Skips spaces, then one decimal number; false when there is none.
bool nextNumber(std::string_view& rest, uint64_t& value) {
  size_t i = 0;
  while (i < rest.size() && rest[i] == ' ') ++i;
  auto [end, ec] = std::from_chars(rest.data() + i, rest.data() + rest.size(), value);
  if (ec != std::errc() || end == rest.data() + i) return false;
  if (end != rest.data() + rest.size() && *end != ' ') return false;  // "12x"
  rest.remove_prefix(static_cast<size_t>(end - rest.data()));
  return true;
}

}  // namespace

double CpuSteal::Sample::stealMsSince(const Sample& before, int cpu) const {
  if (cpu < 0 || static_cast<size_t>(cpu) >= cpus || static_cast<size_t>(cpu) >= before.cpus) return 0;
  uint64_t now = ticks[static_cast<size_t>(cpu)], then = before.ticks[static_cast<size_t>(cpu)];
  if (now == kUnknown || then == kUnknown || now < then) return 0;
  return static_cast<double>(now - then) * tickMs();
}

CpuSteal::CpuSteal(std::string path) : path_(std::move(path)) {
  fd_ = UniqueFd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
}

Status CpuSteal::read(Sample& out) {
  if (!fd_) return Error::fromErrno("open " + path_);
  ssize_t n = ::pread(fd_.get(), buf_.data(), buf_.size(), 0);
  if (n < 0) return Error::fromErrno("read " + path_);
  if (auto st = parse(std::string_view(buf_.data(), static_cast<size_t>(n)), out); !st) {
    return Error{path_ + ": " + st.error().message};
  }
  return okStatus();
}

Status CpuSteal::parse(std::string_view text, Sample& out) {
  out.cpus = 0;
  out.ticks.fill(kUnknown);
  bool any = false;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    if (eol == std::string_view::npos) break;  // cut off by the read's limit
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9') continue;
    std::string_view rest = line.substr(3);
    uint64_t cpu = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), cpu);
    if (ec != std::errc() || end == rest.data() + rest.size() || *end != ' ') {
      return Error{"malformed cpu line \"" + std::string(line.substr(0, 40)) + "\""};
    }
    rest.remove_prefix(static_cast<size_t>(end - rest.data()));
    uint64_t value = 0;
    for (size_t column = 1; column <= kStealColumn; ++column) {
      if (!nextNumber(rest, value)) {
        return Error{"cpu" + std::to_string(cpu) + ": no steal column (value " + std::to_string(column) +
                     " missing or not a number)"};
      }
    }
    any = true;
    if (cpu >= kCpusMax) continue;
    out.ticks[cpu] = value;
    if (cpu + 1 > out.cpus) out.cpus = cpu + 1;
  }
  if (!any) return Error{"no cpuN line"};
  return okStatus();
}

double CpuSteal::tickMs() {
  static const double ms = [] {
    long hz = ::sysconf(_SC_CLK_TCK);
    return hz > 0 ? 1000.0 / static_cast<double>(hz) : 10.0;
  }();
  return ms;
}

}  // namespace allot
