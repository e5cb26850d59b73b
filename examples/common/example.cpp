#include "examples/common/example.h"

#include <cstdlib>
#include <iostream>

#include "base/clock.h"

namespace allot::examples {
namespace {

std::string& programName() {
  static std::string name = "allot-example";
  return name;
}

}  // namespace

void startProgram(const char* name, LogLevel level) {
  programName() = name;
  setLogProgram(name);
  if (!std::getenv("ALLOT_LOG_LEVEL")) setLogLevel(level);
}

int fail(const std::string& message) {
  std::cerr << programName() << ": " << message << "\n";
  return kExitBadInput;
}

int runDriver(asio::io_context& io, SchedulerDriver& driver, const Deadline& deadline) {
  if (auto started = driver.start(); !started) return fail(started.error().describe());
  asio::steady_timer timer(io);
  timer.expires_after(secondsToDuration(deadline.seconds));
  bool passed = false;
  timer.async_wait([&](const boost::system::error_code& ec) {
    if (ec || deadline.met()) return;
    std::cerr << programName() << ": " << deadline.late() << "\n";
    passed = true;
    driver.stop(/*failover=*/false);
    asio::post(io, [&io] { io.stop(); });
  });
  io.run();
  return passed ? kExitDeadline : 0;
}

}  // namespace allot::examples
