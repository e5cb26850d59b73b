// Test fixtures for the zk suite: a real ZooKeeper server (Debian's
// `zookeeper` package, run with `java` directly) or a three-server ensemble
// on loopback, each with its own data dir, ports (tests/common/test_ports.h)
// and a short tickTime;
// and Child, a process started by the test (an allot-master) with its stderr
// in a file.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/test_ports.h"
#include "tests/common/test_util.h"

namespace allot::testing {

// A child process; SIGKILLed and reaped by the destructor if still running.
class Child {
 public:
  Child() = default;
  Child(const std::vector<std::string>& args, const std::string& logPath) : log_(logPath) {
    pid_ = fork();
    if (pid_ == 0) {
      FILE* out = std::fopen(logPath.c_str(), "a");
      if (out) {
        dup2(fileno(out), 1);
        dup2(fileno(out), 2);
      }
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  Child(Child&& other) noexcept { *this = std::move(other); }
  Child& operator=(Child&& other) noexcept {
    std::swap(pid_, other.pid_);
    std::swap(log_, other.log_);
    std::swap(status_, other.status_);
    return *this;
  }
  ~Child() { signal(SIGKILL); }

  pid_t pid() const { return pid_; }
  bool running() {
    poll();
    return pid_ > 0;
  }
  // Sends `sig` and, for SIGKILL, reaps at once.
  void signal(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    if (sig == SIGKILL) {
      waitpid(pid_, &status_, 0);
      pid_ = -1;
    }
  }
  // Waits up to `limit` for the exit; returns the exit status (or -1).
  int waitExit(std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (pid_ > 0) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  std::string log() const { return readFile(log_); }

 private:
  void poll() {
    if (pid_ > 0 && waitpid(pid_, &status_, WNOHANG) == pid_) pid_ = -1;
  }
  pid_t pid_ = -1;
  std::string log_;
  int status_ = 0;
};

class ZooKeeperCluster {
 public:
  // Why the suite cannot run here ("" when it can).
  static std::string missing() {
    for (const char* f : {"/usr/bin/java", "/usr/share/java/zookeeper.jar",
                          "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"}) {
      if (!std::filesystem::exists(f))
        return std::string(f) + " is missing: install Debian's zookeeper package (scripts/allot-dev deps)";
    }
    return "";
  }

  explicit ZooKeeperCluster(int servers, int tickMs = 200) : tickMs_(tickMs) {
    char tmpl[] = "/tmp/allot-zk-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    ports_.resize(servers);
    children_.resize(servers);
    pickPorts();
  }
  ~ZooKeeperCluster() {
    children_.clear();
    std::filesystem::remove_all(dir_);
  }

  // Starts every server and waits until each serves (a quorum for three).
  // The ports were free when picked; a server that exits before it serves
  // (another test took one of its ports meanwhile: ZooKeeper exits when a
  // bind fails) makes the whole ensemble start again on fresh ports.
  bool start(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
      if (attempt > 0) {
        for (auto& c : children_) c.signal(SIGKILL);
        pickPorts();
      }
      for (size_t i = 0; i < children_.size(); ++i) launch(i);
      bool exited = false, served = true;
      for (size_t i = 0; i < children_.size() && served && !exited; ++i) {
        served = waitServing(i, limit);
        exited = !served && !running(i);
      }
      if (served) return true;
      if (!exited) return false;
    }
    return false;
  }
  void launch(size_t i) {
    std::string d = dir_ + "/" + std::to_string(i);
    std::string cp = d + ":/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:"
                         "/usr/share/java/log4j-1.2.jar";
    children_[i] = Child({"/usr/bin/java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                          "-cp", cp, "-Dlog4j.configuration=file:" + d + "/log4j.properties",
                          "org.apache.zookeeper.server.quorum.QuorumPeerMain", d + "/zoo.cfg"},
                         d + "/out.log");
  }
  void kill(size_t i) { children_[i].signal(SIGKILL); }
  bool running(size_t i) { return children_[i].running(); }

  // True once server i serves: `srvr` on its port answers with a Mode
  // (standalone, leader or follower) and `conf` with its own data dir (not
  // another test's server on a port taken meanwhile). False when it exits
  // or `limit` passes.
  bool waitServing(size_t i, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    std::string mine = "dataDir=" + dir_ + "/" + std::to_string(i) + "/data";
    while (std::chrono::steady_clock::now() < deadline && running(i)) {
      if (fourLetters(i, "srvr").find("Mode: ") != std::string::npos &&
          fourLetters(i, "conf").find(mine) != std::string::npos)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::string connectString() const {
    std::string out;
    for (const auto& p : ports_) out += (out.empty() ? "" : ",") + ("127.0.0.1:" + std::to_string(p[0]));
    return out;
  }
  std::string url(const std::string& path) const { return "zk://" + connectString() + path; }
  std::string log(size_t i) const { return readFile(dir_ + "/" + std::to_string(i) + "/out.log"); }

 private:
  static constexpr int kStartAttempts = 5;

  // Fresh ports (all held until all are picked: no two alike) and configs.
  void pickPorts() {
    std::vector<std::unique_ptr<ReservedPort>> held;
    auto next = [&] {
      held.push_back(std::make_unique<ReservedPort>());
      return held.back()->port();
    };
    for (auto& p : ports_) p = {next(), next(), next()};
    for (size_t i = 0; i < ports_.size(); ++i) writeConfig(i);
  }

  void writeConfig(size_t i) {
    std::string d = dir_ + "/" + std::to_string(i);
    std::filesystem::remove_all(d + "/data");  // a failed start's
    std::filesystem::create_directories(d + "/data");
    std::ofstream cfg(d + "/zoo.cfg");
    cfg << "tickTime=" << tickMs_ << "\ninitLimit=10\nsyncLimit=5\n"
        << "dataDir=" << d << "/data\nclientPort=" << ports_[i][0]
        << "\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
        << "4lw.commands.whitelist=srvr,conf,ruok\nforceSync=no\n";
    if (ports_.size() > 1) {
      for (size_t j = 0; j < ports_.size(); ++j)
        cfg << "server." << j + 1 << "=127.0.0.1:" << ports_[j][1] << ":" << ports_[j][2] << "\n";
      std::ofstream(d + "/data/myid") << i + 1 << "\n";
    }
    std::ofstream(d + "/log4j.properties")
        << "log4j.rootLogger=WARN, F\nlog4j.appender.F=org.apache.log4j.FileAppender\n"
        << "log4j.appender.F.File=" << d << "/zk.log\n"
        << "log4j.appender.F.layout=org.apache.log4j.PatternLayout\n"
        << "log4j.appender.F.layout.ConversionPattern=%d %p %c{1}: %m%n\n";
  }

  // The answer to a four-letter command on server i's client port.
  std::string fourLetters(size_t i, const char command[5]) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(ports_[i][0]);
    std::string reply;
    timeval timeout{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        write(fd, command, 4) == 4) {
      char buffer[1024];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof buffer)) > 0) reply.append(buffer, n);
    }
    close(fd);
    return reply;
  }

  int tickMs_;
  std::string dir_;
  std::vector<std::array<uint16_t, 3>> ports_;
  std::vector<Child> children_;
};

}  // namespace allot::testing
