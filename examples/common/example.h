// What the example frameworks share around their schedulers: the start of
// main (the program's name in log lines and error messages, warnings and
// worse unless ALLOT_LOG_LEVEL asks for more) and running the driver with a
// deadline.
#pragma once

#include <functional>
#include <string>

#include "base/asio.h"
#include "base/log.h"
#include "sdk/scheduler.h"

namespace allot::examples {

// The exit codes the examples share.
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitDeadline = 124;

// Names the program in log lines and in fail()'s messages; logs `level` and
// worse unless the environment sets ALLOT_LOG_LEVEL. Call first in main.
void startProgram(const char* name, LogLevel level = LogLevel::kWarning);

// Prints "<program>: <message>" on stderr; returns kExitBadInput.
int fail(const std::string& message);

// A job's deadline: once `seconds` have passed and `met()` is still false,
// `late()` is printed and the run ends.
struct Deadline {
  double seconds = 0;
  std::function<bool()> met;
  std::function<std::string()> late;
};

// Starts `driver` and runs `io` until it stops. Returns kExitDeadline when
// the deadline passed first (the driver is stopped without failover, so the
// job's tasks end), fail()'s code when the driver does not start, else 0.
int runDriver(asio::io_context& io, SchedulerDriver& driver, const Deadline& deadline);

}  // namespace allot::examples
