#include "agent/resources_detect.h"

#include <sched.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

namespace allot {
namespace {

Result<double> memTotalMib() {
  std::ifstream in("/proc/meminfo");
  if (!in) return Error::fromErrno("open /proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return static_cast<double>(kib) / 1024;
  }
  return Error{"/proc/meminfo has no MemTotal line"};
}

}  // namespace

Result<NodeFacts> readNodeFacts(const std::string& workDir) {
  NodeFacts facts;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return Error::fromErrno("sched_getaffinity");
  facts.cpus = CPU_COUNT(&set);
  auto mem = memTotalMib();
  if (!mem) return mem.error();
  facts.memTotalMib = *mem;
  struct statvfs vfs {};
  if (statvfs(workDir.c_str(), &vfs) != 0) return Error::fromErrno("statvfs " + workDir);
  facts.diskAvailableMib = static_cast<double>(vfs.f_bavail) * vfs.f_frsize / (1024.0 * 1024.0);
  return facts;
}

Result<Resources> agentResources(std::string_view flagText, const NodeFacts& facts) {
  Resources total;
  if (!flagText.empty()) {
    auto parsed = Resources::parse(flagText);
    if (!parsed) return Error{"--resources: " + parsed.error().describe()};
    total = *parsed;
  }
  auto named = [&](std::string_view name) {
    for (const auto& s : total.scalars()) {
      if (s.name == name) return true;
    }
    return false;
  };
  if (!named("cpus")) total.setScalar("cpus", std::max(1, facts.cpus));
  if (!named("mem")) {
    double reserve = std::max(kMemReserveMinMib, facts.memTotalMib * kMemReserveFraction);
    double mem = facts.memTotalMib > 2 * reserve ? facts.memTotalMib - reserve : facts.memTotalMib / 2;
    total.setScalar("mem", std::floor(mem));
  }
  if (!named("disk")) {
    total.setScalar("disk", std::floor(facts.diskAvailableMib * (1 - kDiskReserveFraction)));
  }
  if (total.scalar("cpus") <= 0 || total.scalar("mem") <= 0) {
    return Error{"--resources: the agent needs positive cpus and mem, got " + total.toString()};
  }
  return total;
}

Result<std::vector<wire::Attribute>> parseAttributes(std::string_view text) {
  std::vector<wire::Attribute> out;
  std::set<std::string> seen;
  std::string item;
  std::istringstream in{std::string(text)};
  while (std::getline(in, item, ';')) {
    if (item.empty()) continue;
    auto colon = item.find(':');
    if (colon == std::string::npos || colon == 0) {
      return Error{"--attributes: entry '" + item + "' is not name:value"};
    }
    wire::Attribute a;
    a.set_name(item.substr(0, colon));
    a.set_value(item.substr(colon + 1));
    if (!seen.insert(a.name()).second) return Error{"--attributes: '" + a.name() + "' given twice"};
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace allot
