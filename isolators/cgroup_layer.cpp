#include "isolators/cgroup_layer.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>
#include <utility>

#include "base/log.h"
#include "isolators/cgroupfs.h"

namespace allot {
namespace {

using namespace std::chrono_literals;

// Waits for `done` for at most `limit`, checking every few milliseconds:
// the kernel gives no event for "frozen" on v1 or "empty" here.
template <typename F>
bool waitFor(F done, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// A weight on the v2 scale (1..10000) as a cpu hierarchy's file takes it:
// (file name, value): v2 cpu.weight, or v1 cpu.shares (* 1024 / 100,
// systemd's conversion).
std::pair<std::string, std::string> cpuWeightFile(bool v2, int64_t weight) {
  return {v2 ? "/cpu.weight" : "/cpu.shares", std::to_string(v2 ? weight : weight * 1024 / 100)};
}

}  // namespace

CgroupLayer::CgroupLayer(CgroupHost host, std::string root, std::set<std::string> controllers,
                         int64_t rootCpuWeight, int64_t agentCpuWeight)
    : host_(std::move(host)),
      root_(std::move(root)),
      controllers_(std::move(controllers)),
      rootCpuWeight_(rootCpuWeight),
      agentCpuWeight_(agentCpuWeight) {}

CgroupLayer::~CgroupLayer() {
  for (const auto& [h, from] : agentCameFrom_) {
    std::string procs = h + (from == "/" ? "" : from) + "/cgroup.procs";
    if (Status st = fs().writeFile(procs, std::to_string(getpid())); !st) {
      LOG_WARNING("the agent could not go back to its cgroup: " << st.error().describe());
      continue;
    }
    (void)fs().removeDir(h + "/" + root_ + "/" + kAgentLeaf);
  }
  for (const auto& h : hierarchies()) {
    if (h == host_.v2 && host_.rootDelegated) continue;  // the unit's cgroup: systemd removes it
    (void)fs().removeDir(h + "/" + root_);
  }
}

std::vector<std::string> CgroupLayer::hierarchies() const {
  std::set<std::string> out;
  for (const auto& c : controllers_) {
    std::string h = host_.hierarchyOf(c);
    if (!h.empty()) out.insert(h);
    if (c == "cpu" && host_.versionOf("cpu") == CgroupVersion::kV1 && host_.v1.count("cpuacct")) {
      out.insert(host_.v1.at("cpuacct"));
    }
  }
  // Tracking: every container has a cgroup that holds all its processes,
  // whatever isolators run (cgroup2 when mounted: CLONE_INTO_CGROUP and
  // cgroup.kill; else the v1 freezer). With v1 controllers the freezer too:
  // it stops forks while the v1 groups are killed.
  if (!host_.v2.empty()) out.insert(host_.v2);
  bool anyV1 = false;
  for (const auto& c : controllers_) anyV1 |= host_.versionOf(c) == CgroupVersion::kV1;
  if ((anyV1 || host_.v2.empty()) && host_.v1.count("freezer")) out.insert(host_.v1.at("freezer"));
  return {out.begin(), out.end()};
}

Status CgroupLayer::prepareCpuset(const std::string& dir) {
  // A new v1 cpuset starts with no cpus and no memory nodes: nothing could
  // join it. Start from the parent's.
  std::string parent = dir.substr(0, dir.rfind('/'));
  for (const char* file : {"cpuset.cpus", "cpuset.mems"}) {
    auto current = fs().readFile(dir + "/" + file);
    if (current && current->find_first_not_of(" \n") != std::string::npos) continue;
    auto value = fs().readFile(parent + "/" + file);
    if (!value) return value.error();
    if (Status st = fs().writeFile(dir + "/" + file, *value); !st) return st;
  }
  return okStatus();
}

std::string CgroupLayer::agentCgroupIn(const std::string& h) const {
  if (h == host_.v2) return host_.agentV2Cgroup;
  for (const auto& [controller, mount] : host_.v1) {
    auto own = host_.agentV1Cgroups.find(controller);
    if (mount == h && own != host_.agentV1Cgroups.end()) return own->second;
  }
  return "";
}

std::vector<std::string> CgroupLayer::agentHierarchies() const {
  std::set<std::string> out;
  std::string cpu = host_.hierarchyOf("cpu");
  // Another unit's delegated root (the agent runs in its own unit): the
  // agent stays in its unit, where its journal and restarts are.
  bool othersUnit = host_.rootDelegated && cpu == host_.v2 && host_.agentV2Cgroup != "/" + root_;
  if (controllers_.count("cpu") && !othersUnit) out.insert(cpu);
  // Started inside its v2 root (a systemd unit's delegated cgroup): the
  // agent moves to a leaf with or without controllers (processes only in
  // leaves, systemd's delegation rules).
  if (host_.agentV2Cgroup == "/" + root_) out.insert(host_.v2);
  out.erase("");
  return {out.begin(), out.end()};
}

// The root weighs like the node's main workload against the system's other
// top-level groups and processes: CFS splits a group's weight across CPUs by
// where its load is, so a root weighted like its cpus is left with a small
// part of that on the CPU where a latency-sensitive executor runs
// (docs/hog-analysis.md).
Status CgroupLayer::weighRoot() {
  std::string h = host_.hierarchyOf("cpu");
  if (rootCpuWeight_ <= 0 || !controllers_.count("cpu") || h.empty()) return okStatus();
  if (agentCgroupIn(h) == "/" + root_ || (h == host_.v2 && host_.rootDelegated)) {
    LOG_INFO("the cgroup root " << root_ << " is a delegated cgroup of a service manager: its CPU weight "
                                << "is the unit's (systemd: CPUWeight=)");
    return okStatus();
  }
  auto [file, value] = cpuWeightFile(host_.versionOf("cpu") == CgroupVersion::kV2, rootCpuWeight_);
  return fs().writeFile(h + "/" + root_ + file, value);
}

// --cgroups-agent-cpu-weight: the agent's leaf against its sibling
// executors (docs/hog-analysis.md says what a heavy one costs). On v2 the
// leaf has cpu.weight only once the root's subtree_control enables cpu, so
// this runs after that.
Status CgroupLayer::weighAgent() {
  std::string h = host_.hierarchyOf("cpu");
  if (agentCpuWeight_ <= 0 || !controllers_.count("cpu") || h.empty()) return okStatus();
  auto placed = agentHierarchies();
  if (std::find(placed.begin(), placed.end(), h) == placed.end()) return okStatus();  // in its own unit
  auto [file, value] = cpuWeightFile(host_.versionOf("cpu") == CgroupVersion::kV2, agentCpuWeight_);
  return fs().writeFile(h + "/" + root_ + "/" + kAgentLeaf + file, value);
}

Status CgroupLayer::placeAgent() {
  std::string pid = std::to_string(getpid());
  for (const auto& h : agentHierarchies()) {
    std::string leaf = h + "/" + root_ + "/" + kAgentLeaf;
    std::string from = agentCgroupIn(h);
    if (Status st = fs().makeDir(leaf); !st) return st;
    if (Status st = fs().writeFile(leaf + "/cgroup.procs", pid); !st) return st;
    if (!from.empty() && from != "/" + root_) agentCameFrom_[h] = from;
    LOG_INFO("moved the agent into " << leaf);
  }
  return okStatus();
}

// A delegated root of another unit holds that unit's own process (systemd
// keeps a unit's cgroup only while something runs in it: the packaged
// allot-executors.service runs `sleep infinity`). It moves to a leaf.
Status CgroupLayer::moveUnitProcesses() {
  if (!host_.rootDelegated || host_.agentV2Cgroup == "/" + root_) return okStatus();
  std::string root = host_.v2 + "/" + root_;
  auto stray = fs().procs(root);
  if (stray.empty()) return okStatus();
  std::string leaf = root + "/" + kHolderLeaf;
  if (Status st = fs().makeDir(leaf); !st) return st;
  for (pid_t pid : stray) {
    Status st = fs().writeFile(leaf + "/cgroup.procs", std::to_string(pid));
    if (!st && st.error().errnum != ESRCH) return st;
  }
  LOG_INFO("moved " << stray.size() << " process(es) of the unit owning " << root << " into " << leaf);
  return okStatus();
}

Status CgroupLayer::setUp() {
  for (const auto& h : hierarchies()) {
    // A nested --cgroups-root (a/b) is made level by level: its parents
    // may exist in some hierarchies only (an operator's or systemd's).
    std::string dir = h;
    for (size_t from = 0; from <= root_.size();) {
      size_t to = std::min(root_.find('/', from), root_.size());
      if (to > from) {
        dir += "/" + root_.substr(from, to - from);
        if (Status st = fs().makeDir(dir); !st) return st;
        if (host_.v1.count("cpuset") && h == host_.v1.at("cpuset")) {
          if (Status st = prepareCpuset(dir); !st) return st;
        }
      }
      from = to + 1;
    }
  }
  if (Status st = weighRoot(); !st) return st;
  if (Status st = placeAgent(); !st) return st;
  if (Status st = enableV2Controllers(); !st) return st;
  return weighAgent();
}

Status CgroupLayer::enableV2Controllers() {
  if (host_.v2.empty()) return okStatus();
  if (Status st = moveUnitProcesses(); !st) return st;
  std::string enable;
  for (const auto& c : controllers_) {
    if (host_.versionOf(c) == CgroupVersion::kV2) enable += (enable.empty() ? "+" : " +") + c;
  }
  if (enable.empty()) return okStatus();  // tracking only: no controller to enable
  return fs().writeFile(host_.v2 + "/" + root_ + "/cgroup.subtree_control", enable);
}

std::string CgroupLayer::dir(const ContainerId& id, const std::string& controller) const {
  std::string h = host_.hierarchyOf(controller);
  if (h.empty() && host_.v1.count(controller)) h = host_.v1.at(controller);  // cpuacct, freezer
  return h + "/" + root_ + "/" + id.name();
}

Status CgroupLayer::create(const ContainerId& id, ChildSetup* setup) {
  // Every cgroup isolator's prepare() calls this: the directories are made
  // by the first (each mkdir of a v1 cgroup takes the kernel's cgroup_mutex).
  bool made = created_.count(id.name()) > 0;
  for (const auto& h : hierarchies()) {
    std::string dir = h + "/" + root_ + "/" + id.name();
    if (!made) {
      if (Status st = fs().makeDir(dir); !st) return st;
      if (host_.v1.count("cpuset") && h == host_.v1.at("cpuset")) {
        if (Status st = prepareCpuset(dir); !st) return st;
      }
    }
    if (h == host_.v2) {
      auto it = dirFds_.find(id.name());
      if (it == dirFds_.end()) {
        UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (fd.get() < 0) return Error::fromErrno("open " + dir);
        it = dirFds_.emplace(id.name(), std::move(fd)).first;
      }
      setup->cgroupDirFd = it->second.get();
    } else {
      std::string procs = dir + "/cgroup.procs";
      auto& files = setup->cgroupProcsFiles;
      if (std::find(files.begin(), files.end(), procs) == files.end()) files.push_back(procs);
    }
  }
  created_.insert(id.name());
  if (setup) handedToChild_.insert(id.name());
  return okStatus();
}

Status CgroupLayer::join(const ContainerId& id, pid_t pid) {
  dirFds_.erase(id.name());
  // A child the launcher started with create()'s setup joins on its own
  // (born in the v2 directory, writes the v1 cgroup.procs files before
  // exec, and fails its launch otherwise); with Launcher::start() it may
  // not have got there yet, and a write from here would both race it and
  // block the agent's loop (a v1 cgroup.procs write waits for an RCU grace
  // period). So only a container whose directories were not handed to a
  // child (adopted, or made by an older agent) is joined from here.
  if (handedToChild_.count(id.name())) return okStatus();
  for (const auto& h : hierarchies()) {
    std::string dir = h + "/" + root_ + "/" + id.name();
    auto members = fs().procs(dir);
    if (std::find(members.begin(), members.end(), pid) != members.end()) continue;
    Status st = fs().writeFile(dir + "/cgroup.procs", std::to_string(pid));
    if (!st && st.error().errnum != ESRCH) return st;
  }
  return okStatus();
}

Status CgroupLayer::killV2(const std::string& dir) const {
  if (fs().exists(dir + "/cgroup.kill")) {
    if (Status st = fs().writeFile(dir + "/cgroup.kill", "1"); !st) return st;
  } else {
    for (pid_t pid : fs().procs(dir)) (void)fs().signal(pid, SIGKILL);
  }
  if (!waitFor([&] { return fs().procs(dir).empty(); }, 2000ms)) {
    return Error{dir + " still has processes 2 s after the kill"};
  }
  return okStatus();
}

// v1 has no cgroup.kill: freeze the container so nothing forks while we
// kill, kill every member, thaw so the kills are delivered.
Status CgroupLayer::killV1(const std::string& name) const {
  std::string freezer = host_.v1.count("freezer") ? host_.v1.at("freezer") + "/" + root_ + "/" + name : "";
  bool frozen = false;
  if (!freezer.empty() && fs().exists(freezer + "/freezer.state")) {
    frozen = fs().writeFile(freezer + "/freezer.state", "FROZEN").ok() &&
             waitFor([&] {
               auto s = fs().readFile(freezer + "/freezer.state");
               return !s || s->rfind("FROZEN", 0) == 0;
             }, 1000ms);
  }
  for (const auto& h : hierarchies()) {
    for (pid_t pid : fs().procs(h + "/" + root_ + "/" + name)) (void)fs().signal(pid, SIGKILL);
  }
  if (!freezer.empty()) (void)fs().writeFile(freezer + "/freezer.state", "THAWED");
  for (const auto& h : hierarchies()) {
    std::string d = h + "/" + root_ + "/" + name;
    bool empty = waitFor([&] {
      auto members = fs().procs(d);
      for (pid_t pid : members) (void)fs().signal(pid, SIGKILL);  // late forks of an unfrozen group
      return members.empty();
    }, 2000ms);
    if (!empty) return Error{d + " still has processes 2 s after the kill"};
  }
  (void)frozen;
  return okStatus();
}

// rmdir answers EBUSY while the kernel still tears the last members down.
Status CgroupLayer::removeDir(const std::string& dir) const {
  Status st = fs().removeDir(dir);
  for (int attempt = 0; !st && st.error().errnum == EBUSY && attempt < 100; ++attempt) {
    std::this_thread::sleep_for(10ms);
    st = fs().removeDir(dir);
  }
  return st;
}

Status CgroupLayer::destroy(const ContainerId& id) { return destroyByName(id.name()); }

Status CgroupLayer::destroyByName(const std::string& name) {
  dirFds_.erase(name);
  created_.erase(name);
  handedToChild_.erase(name);
  // The agent reaps on its worker pool first (reapJob), and every cgroup
  // isolator's cleanup() comes here after it: nothing left is the common
  // case, answered without a kill or an rmdir.
  std::vector<std::string> left;
  for (const auto& h : hierarchies()) {
    std::string dir = h + "/" + root_ + "/" + name;
    if (fs().exists(dir)) left.push_back(dir);
  }
  if (left.empty()) return okStatus();
  // Never a wait here (the loop runs this): one kill, one rmdir each. A
  // process the kernel has not let go of yet keeps its directory busy; the
  // reap (off the loop) waits for it.
  signalAll(name);
  Status result;
  for (const auto& dir : left) {
    Status st = fs().removeDir(dir);
    if (!st && result) {
      result = Error{dir + " still has processes (" + st.error().describe() + "); the reap must end them first",
                     st.error().errnum};
    }
  }
  return result;
}

void CgroupLayer::signalAll(const std::string& name) const {
  std::string v2dir = host_.v2 + "/" + root_ + "/" + name;
  if (!host_.v2.empty() && fs().exists(v2dir + "/cgroup.kill")) {
    (void)fs().writeFile(v2dir + "/cgroup.kill", "1");
  }
  for (const auto& h : hierarchies()) {
    for (pid_t pid : fs().procs(h + "/" + root_ + "/" + name)) (void)fs().signal(pid, SIGKILL);
  }
}

Status CgroupLayer::reap(const std::string& name) const {
  std::string v2dir = host_.v2 + "/" + root_ + "/" + name;
  bool hasV2 = !host_.v2.empty() && fs().exists(v2dir);
  Status result = hasV2 ? killV2(v2dir) : okStatus();
  if (result) result = killV1(name);
  bool killed = result.ok();
  for (const auto& h : hierarchies()) {
    std::string dir = h + "/" + root_ + "/" + name;
    // Retrying EBUSY is waiting for the kernel to finish a kill that
    // worked; after one that did not, a busy directory stays busy.
    Status st = killed ? removeDir(dir) : fs().removeDir(dir);
    if (!st && result) result = st;
  }
  return result;
}

std::set<std::string> CgroupLayer::existing() const {
  std::set<std::string> out;
  for (const auto& h : hierarchies()) {
    for (const auto& name : fs().subdirs(h + "/" + root_)) {
      if (name != kAgentLeaf && name != kHolderLeaf) out.insert(name);
    }
  }
  return out;
}

std::vector<pid_t> CgroupLayer::processes(const ContainerId& id) const {
  auto hs = hierarchies();
  if (hs.empty()) return {};
  return fs().procs(hs.front() + "/" + root_ + "/" + id.name());
}

}  // namespace allot
