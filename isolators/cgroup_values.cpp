#include "isolators/cgroup_values.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace allot {

int64_t cpuShares(double cpus) { return std::clamp<int64_t>(std::llround(cpus * 1024), 2, 262144); }

int64_t cpuWeight(double cpus) { return std::clamp<int64_t>(std::llround(cpus * 100), 1, 10000); }

int64_t cfsQuotaUs(double cpus) {
  if (cpus <= 0) return -1;
  return std::max<int64_t>(kMinCfsQuotaUs, std::llround(cpus * kCfsPeriodUs));
}

int64_t memoryBytes(double memMiB) {
  if (memMiB <= 0) return -1;
  return std::max<int64_t>(kMinMemoryBytes, std::llround(memMiB * 1048576.0));
}

int64_t pidsMax(double cpus, int64_t configured) {
  if (configured > 0) return configured;
  int64_t started = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(cpus)));
  return std::clamp<int64_t>(started * kPidsPerCpu, kMinPids, kMaxPids);
}

int64_t blkioWeightV1(double cpus, int64_t configured) {
  return std::clamp<int64_t>(configured > 0 ? configured : std::llround(cpus * 100), 10, 1000);
}

int64_t ioWeightV2(double cpus, int64_t configured) {
  return std::clamp<int64_t>(configured > 0 ? configured : std::llround(cpus * 100), 1, 10000);
}

namespace {

Result<DeviceLimit> parseOne(const std::string& entry) {
  std::istringstream in(entry);
  DeviceLimit limit;
  in >> limit.device;
  unsigned major = 0, minor = 0;
  char colon = 0, extra = 0;
  std::istringstream dev(limit.device);
  if (!(dev >> major >> colon >> minor) || colon != ':' || (dev >> extra)) {
    return Error{"blkio limit '" + entry + "': the device must be MAJ:MIN"};
  }
  std::string kv;
  bool any = false;
  while (in >> kv) {
    auto eq = kv.find('=');
    std::string key = kv.substr(0, eq);
    int64_t* target = key == "rbps" ? &limit.rbps : key == "wbps" ? &limit.wbps
                    : key == "riops" ? &limit.riops : key == "wiops" ? &limit.wiops : nullptr;
    if (eq == std::string::npos || !target) {
      return Error{"blkio limit '" + entry + "': '" + kv + "' is not rbps=, wbps=, riops= or wiops="};
    }
    std::string value = kv.substr(eq + 1);
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos || value.size() > 18) {
      return Error{"blkio limit '" + entry + "': '" + value + "' is not a non-negative integer"};
    }
    *target = std::stoll(value);
    any = true;
  }
  if (!any) return Error{"blkio limit '" + entry + "': no rbps=, wbps=, riops= or wiops="};
  return limit;
}

}  // namespace

Result<std::vector<DeviceLimit>> parseDeviceLimits(const std::string& text) {
  std::vector<DeviceLimit> out;
  std::istringstream in(text);
  std::string entry;
  while (std::getline(in, entry, ';')) {
    if (entry.find_first_not_of(" \t") == std::string::npos) continue;
    auto one = parseOne(entry);
    if (!one) return one.error();
    out.push_back(*one);
  }
  return out;
}

std::string ioMaxLine(const DeviceLimit& l) {
  auto v = [](int64_t x) { return x > 0 ? std::to_string(x) : std::string("max"); };
  return l.device + " rbps=" + v(l.rbps) + " wbps=" + v(l.wbps) + " riops=" + v(l.riops) +
         " wiops=" + v(l.wiops);
}

}  // namespace allot
