// Helpers every test suite uses: driving an io_context until a condition
// holds (with a deadline, never forever) and reading a whole file.
#pragma once

#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
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
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace allot::testing
