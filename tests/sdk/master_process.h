// Test helpers: a real allot-master child process on a free loopback port,
// and a loop runner with a deadline. Used by the SDK integration tests.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/asio.h"
#include "tests/common/test_util.h"

namespace allot::testing {

class MasterProcess {
 public:
  // Starts $ALLOT_MASTER with `flags`; port() is 0 when it did not come up.
  explicit MasterProcess(std::vector<std::string> flags, uint16_t port = 0) {
    const char* binary = std::getenv("ALLOT_MASTER");
    if (!binary) return;
    char tmpl[] = "/tmp/allot-master-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::string portFile = dir_ + "/port";
    std::vector<std::string> args = {binary, "--listen", "127.0.0.1:" + std::to_string(port),
                                     "--port-file", portFile};
    args.insert(args.end(), flags.begin(), flags.end());
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(portFile);
      if (in >> port_) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  ~MasterProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::string dir_;
};

}  // namespace allot::testing
