// Helpers every test suite uses: driving an io_context until a condition
// holds (with a deadline, never forever), reading a whole file or a port
// number a daemon wrote, counting this process's children by state.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>

#include "base/asio.h"

namespace allot::testing {

// Runs the loop in 5 ms slices until `done` holds or `limit` passes;
// returns done().
inline bool runUntil(asio::io_context& io, const std::function<bool()>& done,
                     std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(5));
  }
  return done();
}

inline void runFor(asio::io_context& io, std::chrono::milliseconds span) {
  runUntil(io, [] { return false; }, span);
}

// The whole file ("" when it cannot be read).
inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  try {
    return std::string(std::istreambuf_iterator<char>(in), {});
  } catch (const std::ios_base::failure&) {
    return "";  // e.g. /proc/<pid>/stat of a process that ended meanwhile (ESRCH)
  }
}

// The port number a daemon wrote to `file` (0 when there is none).
inline uint16_t readPort(const std::string& file) {
  uint16_t port = 0;
  std::ifstream in(file);
  in >> port;
  return port;
}

// Children of this process in `state` ("Z" for zombies, "" for any), from
// /proc.
inline int childrenInState(const std::string& state) {
  int count = 0;
  std::string self = std::to_string(getpid());
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = readFile(entry.path().string() + "/stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 > stat.size()) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string processState, ppid;
    rest >> processState >> ppid;
    if (ppid == self && (state.empty() || processState == state)) ++count;
  }
  return count;
}

}  // namespace allot::testing
