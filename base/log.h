// Logging to stderr in the form journald understands: each line starts with a
// syslog priority prefix "<N>" (sd-daemon(3)), so `journalctl -p err` works
// when the daemons run under systemd, and plain terminals still read well.
//
//   LOG_INFO("agent " << id << " registered");
//
// Thread: safe to call from any thread (one write(2) per line).
#pragma once

#include <sstream>
#include <string_view>

namespace allot {

enum class LogLevel { kError = 3, kWarning = 4, kInfo = 6, kDebug = 7 };

// Lines below this level are dropped. Default kInfo; ALLOT_LOG_LEVEL=debug
// in the environment lowers it.
void setLogLevel(LogLevel level);
bool logEnabled(LogLevel level);

// Sets the short program name printed on each line ("allot-master").
void setLogProgram(std::string_view name);

void logLine(LogLevel level, std::string_view text);

}  // namespace allot

#define ALLOT_LOG(level, expr)                      \
  do {                                              \
    if (::allot::logEnabled(level)) {               \
      std::ostringstream allotLogStream_;           \
      allotLogStream_ << expr;                      \
      ::allot::logLine(level, allotLogStream_.str()); \
    }                                               \
  } while (0)

#define LOG_ERROR(expr) ALLOT_LOG(::allot::LogLevel::kError, expr)
#define LOG_WARNING(expr) ALLOT_LOG(::allot::LogLevel::kWarning, expr)
#define LOG_INFO(expr) ALLOT_LOG(::allot::LogLevel::kInfo, expr)
#define LOG_DEBUG(expr) ALLOT_LOG(::allot::LogLevel::kDebug, expr)
