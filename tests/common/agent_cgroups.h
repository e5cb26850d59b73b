// Teardown of an agent's cgroup subtree. An agent keeps its tracking root
// (and the cgroups of executors it did not reap) when it stops, by design:
// executors outlive an agent restart. A test that started an agent removes
// that subtree itself once the agent and its executors are gone:
//
//   EXPECT_EQ(removeAgentCgroupTree(defaultAgentCgroupsRoot(workDir)), "");
//
// Thread: the test's.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace allot::testing {

// The agent's --cgroups-root when none is given and it does not run under
// systemd (agent/main.cpp defaultCgroupsRoot): "allot" and the work dir's
// parts, '.'-joined ("/tmp/x/work" -> "allot.tmp.x.work"). Plain names
// only (letters, digits, '-', '_', '.'): what tests make with mkdtemp.
inline std::string defaultAgentCgroupsRoot(const std::string& workDir) {
  std::filesystem::path abs = std::filesystem::absolute(workDir).lexically_normal();
  std::string out = "allot";
  for (const auto& part : abs.relative_path()) {
    if (!part.empty()) out += "." + part.string();
  }
  return out;
}

namespace agent_cgroups_detail {

inline std::vector<pid_t> members(const std::filesystem::path& dir) {
  std::vector<pid_t> out;
  std::ifstream in(dir / "cgroup.procs");
  for (pid_t p; in >> p;) out.push_back(p);
  return out;
}

// Directories under `top` (itself last), children before their parents.
inline std::vector<std::filesystem::path> postOrder(const std::filesystem::path& top) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(top, ec)) return out;
  for (std::filesystem::recursive_directory_iterator it(top, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_directory(ec)) out.push_back(it->path());
  }
  // A directory's descendants follow it in pre-order: reversed, they come first.
  std::vector<std::filesystem::path> reversed(out.rbegin(), out.rend());
  reversed.push_back(top);
  return reversed;
}

}  // namespace agent_cgroups_detail

// Removes /sys/fs/cgroup/<hierarchy>/<root> in every hierarchy (v1
// controllers and the cgroup2 mount), children first. A process still
// inside belongs to the test (an executor its agent left): it is killed
// and the removal retried for up to ~2 s while the kernel lets it go.
// Returns "" when nothing is left, else what is left and why.
inline std::string removeAgentCgroupTree(const std::string& root) {
  namespace fs = std::filesystem;
  if (root.empty() || root.find("..") != std::string::npos || root.front() == '/') {
    return "refusing to remove cgroup root '" + root + "'";
  }
  std::string left;
  for (int round = 0; round < 40; ++round) {
    left.clear();
    std::error_code ec;
    for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
      for (const fs::path& dir : agent_cgroups_detail::postOrder(h.path() / root)) {
        std::vector<pid_t> pids = agent_cgroups_detail::members(dir);
        for (pid_t p : pids) ::kill(p, SIGKILL);
        if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) continue;
        left += dir.string() + " (" + std::strerror(errno) + ", " + std::to_string(pids.size()) +
                " processes inside)\n";
      }
    }
    if (left.empty()) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return left;
}

}  // namespace allot::testing
