// Test helpers: a real allot-master and allot-agent on loopback, and
// allot-execute runs, as child processes. Every process (and every
// executor or task left under the agent's work dir) is killed on teardown.
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/executor_manager.h"
#include "launcher/process_tree.h"
#include "tests/common/wait.h"

namespace allot::testing {

namespace fs = std::filesystem;

inline std::string readAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline const char* envOr(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// A child process with stdout/stderr in files.
class Child {
 public:
  Child() = default;
  Child(const std::vector<std::string>& args, const std::string& out, const std::string& err)
      : out_(out), err_(err) {
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(126);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  Child(Child&& o) noexcept { *this = std::move(o); }
  Child& operator=(Child&& o) noexcept {
    std::swap(pid_, o.pid_);
    out_ = o.out_;
    err_ = o.err_;
    status_ = o.status_;
    return *this;
  }
  ~Child() { kill(SIGKILL); }

  pid_t pid() const { return pid_; }
  std::string out() const { return readAll(out_); }
  std::string err() const { return readAll(err_); }

  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(-pid_, sig);
    if (sig == SIGKILL || sig == SIGTERM) wait(std::chrono::seconds(10));
  }

  // Signals only this process (not its group) and waits for it.
  void killOnly(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    wait(std::chrono::seconds(10));
  }

  // Waits for exit; returns the wait status or -1 on timeout.
  int wait(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        status_ = st;
        return st;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  std::string out_, err_;
  int status_ = -1;
};

// Pids whose working directory is under `dir` (executors and tasks run in
// their sandboxes).
inline std::vector<pid_t> processesUnder(const std::string& dir) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code le;
    auto cwd = fs::read_symlink(e.path() / "cwd", le);
    if (!le && cwd.string().rfind(dir, 0) == 0) out.push_back(std::stoi(name));
  }
  return out;
}

inline std::string procComm(pid_t pid) {
  std::string c = readAll("/proc/" + std::to_string(pid) + "/comm");
  while (!c.empty() && c.back() == '\n') c.pop_back();
  return c;
}

class Cluster {
 public:
  Cluster() {
    master_ = envOr("ALLOT_MASTER");
    agent_ = envOr("ALLOT_AGENT");
    execute_ = envOr("ALLOT_EXECUTE");
    char tmpl[] = "/tmp/allot-agent-it-XXXXXX";
    dir_ = mkdtemp(tmpl);
    // Executors run as --default-user (nobody): they must search the path.
    ::chmod(dir_.c_str(), 0711);
    workDir_ = dir_ + "/work";
  }
  ~Cluster() {
    agentProc_.kill(SIGKILL);
    killExecutors();
    removeAgentCgroups();
    if (!cgroupsRoot_.empty()) removeAgentCgroups(cgroupsRoot_);
    masterProc_.kill(SIGKILL);
    fs::remove_all(dir_);
  }

  std::string missing() const {
    if (!master_) return "ALLOT_MASTER not set (allot-master not built)";
    if (!agent_) return "ALLOT_AGENT not set (allot-agent not built: needs the launcher)";
    if (!execute_) return "ALLOT_EXECUTE not set (allot-execute not built)";
    return "";
  }

  bool startMaster(std::vector<std::string> extra = {}) {
    std::string portFile = dir_ + "/master.port";
    std::vector<std::string> args = {master_, "--listen", "127.0.0.1:0", "--port-file", portFile,
                                     "--agent-timeout", "30", "--offer-timeout", "10"};
    args.insert(args.end(), extra.begin(), extra.end());
    masterProc_ = Child(args, dir_ + "/master.out", dir_ + "/master.err");
    return waitFor([&] {
      std::ifstream in(portFile);
      return static_cast<bool>(in >> port_);
    }, std::chrono::seconds(10));
  }

  std::string masterAddress() const { return "127.0.0.1:" + std::to_string(port_); }

  // Starts the agent and waits until it logs its registration.
  bool startAgent(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {agent_, "--master", masterAddress(), "--work-dir", workDir_,
                                     "--resources", "cpus:8;mem:8192;disk:1024;ports:[31000-31100]",
                                     "--recovery-timeout", "20", "--status-update-retry", "1",
                                     "--executor-idle-timeout", "0.5"};
    args.insert(args.end(), extra.begin(), extra.end());
    ++agentRuns_;
    std::string err = dir_ + "/agent" + std::to_string(agentRuns_) + ".err";
    agentProc_ = Child(args, dir_ + "/agent" + std::to_string(agentRuns_) + ".out", err);
    return waitFor([&] { return readAll(err).find("registered with master") != std::string::npos; },
                   std::chrono::seconds(15));
  }

  std::string masterLog() const { return readAll(dir_ + "/master.err"); }

  std::string agentLog() const {
    return readAll(dir_ + "/agent" + std::to_string(agentRuns_) + ".err");
  }

  Child& agentProcess() { return agentProc_; }
  Child& masterProcess() { return masterProc_; }
  uint16_t masterPort() const { return static_cast<uint16_t>(port_); }

  Child execute(std::vector<std::string> extra) {
    std::vector<std::string> args = {execute_, "--master", masterAddress(), "--timeout", "30"};
    args.insert(args.end(), extra.begin(), extra.end());
    ++executeRuns_;
    std::string base = dir_ + "/execute" + std::to_string(executeRuns_);
    return Child(args, base + ".out", base + ".err");
  }

  std::vector<pid_t> executors() const {
    std::vector<pid_t> out;
    for (pid_t p : processesUnder(workDir_)) {
      if (procComm(p) == "allot-executor") out.push_back(p);
    }
    return out;
  }

  void killExecutors() {
    for (int round = 0; round < 3; ++round) {
      auto pids = processesUnder(workDir_);
      if (pids.empty()) return;
      for (pid_t p : pids) killProcessTree(p);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // The agent's default cgroup root (allot.<work dir with / as .>) and the
  // executors' cgroups in it, emptied by killExecutors(): an agent killed
  // with its executors cannot remove them itself.
  // `root`: the agent's --cgroups-root when one was given.
  void removeAgentCgroups(std::string root = "") const {
    if (root.empty()) root = "allot" + workDir_;
    for (char& c : root) c = c == '/' ? '.' : c;
    for (int round = 0; round < 20; ++round) {
      bool left = false;
      std::error_code ec;
      for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
        fs::path top = h.path() / root;
        std::error_code ec2;
        for (const auto& c : fs::directory_iterator(top, ec2)) {
          if (c.is_directory()) ::rmdir(c.path().c_str());
        }
        left |= ::rmdir(top.c_str()) != 0 && errno != ENOENT;
      }
      if (!left) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the kernel lets go of killed members
    }
  }

  // An agent started with --cgroups-root: its cgroups go with the cluster.
  void setCgroupsRoot(std::string root) { cgroupsRoot_ = std::move(root); }

  const std::string& workDir() const { return workDir_; }
  const std::string& dir() const { return dir_; }
  const char* agentBinary() const { return agent_; }

 private:
  const char* master_ = nullptr;
  const char* agent_ = nullptr;
  const char* execute_ = nullptr;
  std::string dir_, workDir_;
  std::string cgroupsRoot_;
  int port_ = 0;
  int agentRuns_ = 0;
  int executeRuns_ = 0;
  Child masterProc_, agentProc_;
};

}  // namespace allot::testing
