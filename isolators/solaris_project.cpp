#include "isolators/solaris_project.h"

#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "base/log.h"
#include "isolators/cgroup_values.h"

extern char** environ;

namespace allot {
namespace {

constexpr const char* kPrefix = "allot.";

struct Controls {
  int64_t cpuShares = 1;
  int64_t maxLwps = kMinPids;
  int64_t maxRssBytes = 0;  // 0: no cap (no mem resource)
  bool operator==(const Controls&) const = default;
};

Controls controlsOf(const Resources& limits, int64_t pidsConfigured) {
  Controls c;
  c.cpuShares = std::clamp<int64_t>(std::llround(limits.scalar("cpus") * 100), 1, 65535);
  c.maxLwps = pidsMax(limits.scalar("cpus"), pidsConfigured);
  c.maxRssBytes = static_cast<int64_t>(limits.scalar("mem") * 1024 * 1024);
  return c;
}

std::vector<std::string> controlFlags(const Controls& c) {
  std::vector<std::string> out = {
      "-K", "project.cpu-shares=(privileged," + std::to_string(c.cpuShares) + ",none)",
      "-K", "project.max-lwps=(privileged," + std::to_string(c.maxLwps) + ",deny)"};
  if (c.maxRssBytes > 0) {
    out.push_back("-K");
    out.push_back("rcap.max-rss=" + std::to_string(c.maxRssBytes));
  }
  return out;
}

class SolarisProjectIsolator : public Isolator {
 public:
  SolarisProjectIsolator(std::unique_ptr<SolarisPlatform> platform, int64_t pids)
      : platform_(std::move(platform)), pidsConfigured_(pids) {}

  std::string_view name() const override { return "solaris/project"; }

  Status recover(const std::vector<KnownContainer>& known) override {
    std::set<std::string> keep;
    for (const auto& k : known) keep.insert(solarisProjectName(k.id));
    auto all = platform_->projects();
    if (!all) return all.error();
    for (const auto& p : *all) {
      if (p.rfind(kPrefix, 0) != 0) continue;
      if (keep.count(p)) {
        made_[p] = Controls{};  // re-written by the next update()
        continue;
      }
      LOG_INFO("solaris/project: removing project " << p << " of a gone executor");
      if (auto st = remove(p); !st) LOG_WARNING("solaris/project: " << st.error().describe());
    }
    return okStatus();
  }

  Status prepare(const ContainerId& id, const ContainerConfig& config, ChildSetup*) override {
    std::string project = solarisProjectName(id);
    Controls c = controlsOf(config.limits, pidsConfigured_);
    std::vector<std::string> argv = {"/usr/sbin/projadd", "-c", "allot executor " + id.name()};
    for (auto& f : controlFlags(c)) argv.push_back(std::move(f));
    argv.push_back(project);
    if (auto st = platform_->run(argv); !st) return st;
    made_[project] = c;
    return okStatus();
  }

  Status isolate(const ContainerId& id, pid_t pid) override {
    return platform_->run({"/usr/bin/newtask", "-p", solarisProjectName(id), "-c", std::to_string(pid)});
  }

  Status watch(const ContainerId&, std::function<void(const Limitation&)>) override { return okStatus(); }

  Status update(const ContainerId& id, const Resources& limits) override {
    std::string project = solarisProjectName(id);
    auto it = made_.find(project);
    if (it == made_.end()) return okStatus();
    Controls c = controlsOf(limits, pidsConfigured_);
    if (c == it->second) return okStatus();
    std::vector<std::string> argv = {"/usr/sbin/projmod", "-s"};
    for (auto& f : controlFlags(c)) argv.push_back(std::move(f));
    argv.push_back(project);
    if (auto st = platform_->run(argv); !st) return st;
    // projmod changes the database; the running project takes new values
    // through prctl (rcapd re-reads rcap.max-rss on its own).
    for (const auto& [control, value] : {std::pair<std::string, int64_t>{"project.cpu-shares", c.cpuShares},
                                         {"project.max-lwps", c.maxLwps}}) {
      if (auto st = platform_->run({"/usr/bin/prctl", "-n", control, "-r", "-v", std::to_string(value), "-i",
                                    "project", project});
          !st) {
        return st;
      }
    }
    it->second = c;
    return okStatus();
  }

  Status usage(const ContainerId&, wire::ResourceUsage*) override { return okStatus(); }

  Status cleanup(const ContainerId& id) override {
    std::string project = solarisProjectName(id);
    if (!made_.count(project)) return okStatus();
    made_.erase(project);
    return remove(project);
  }

 private:
  Status remove(const std::string& project) {
    // pkill exits 1 when nothing matched: the project is already empty.
    (void)platform_->run({"/usr/bin/pkill", "-9", "-J", project});
    return platform_->run({"/usr/sbin/projdel", project});
  }

  std::unique_ptr<SolarisPlatform> platform_;
  int64_t pidsConfigured_;
  std::map<std::string, Controls> made_;  // projects of live executors
};

class HostSolarisPlatform : public SolarisPlatform {
 public:
  std::string whyNoProjects() const override {
    utsname u{};
    uname(&u);
    std::string sys = u.sysname;
    if (sys == "SunOS" && access("/usr/sbin/projadd", X_OK) == 0 && access("/usr/bin/newtask", X_OK) == 0) {
      return "";
    }
    return "solaris/project needs Solaris projects (SunOS with projadd, newtask and prctl); this host is " + sys +
           " " + u.release + ", which has none: use the cgroups/* isolators here";
  }

  // Only reached on SunOS, where the agent's Linux launcher does not run
  // either; waitpid on the one child is the whole supervision.
  Status run(const std::vector<std::string>& argv) override {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    if (int err = posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ); err != 0) {
      return Error{"starting " + argv[0], err};
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return Error::fromErrno("waiting for " + argv[0]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return Error{argv[0] + " " + (argv.size() > 1 ? argv.back() : "") + " failed (status " +
                   std::to_string(status) + ")"};
    }
    return okStatus();
  }

  Result<std::vector<std::string>> projects() override {
    std::ifstream in("/etc/project");
    if (!in) return Error::fromErrno("reading /etc/project");
    std::vector<std::string> out;
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      out.push_back(line.substr(0, line.find(':')));
    }
    return out;
  }
};

}  // namespace

std::string solarisProjectName(const ContainerId& id) {
  // Project names allow letters, digits, '_', '-', '.'; the container name
  // may also hold '%' and '~'. Spelled injectively: '_' -> "__",
  // '%' -> "_p", '~' -> "_t".
  std::string out = kPrefix;
  for (char ch : id.name()) {
    if (ch == '_') out += "__";
    else if (ch == '%') out += "_p";
    else if (ch == '~') out += "_t";
    else out += ch;
  }
  return out;
}

std::unique_ptr<SolarisPlatform> makeHostSolarisPlatform() { return std::make_unique<HostSolarisPlatform>(); }

Result<std::unique_ptr<Isolator>> makeSolarisProjectIsolator(std::unique_ptr<SolarisPlatform> platform,
                                                             int64_t pidsMaxConfigured) {
  if (std::string why = platform->whyNoProjects(); !why.empty()) return Error{why};
  return std::unique_ptr<Isolator>(new SolarisProjectIsolator(std::move(platform), pidsMaxConfigured));
}

}  // namespace allot
