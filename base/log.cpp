#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/check.h"
#include "base/result.h"

namespace allot {
namespace {

LogLevel initialLevel() {
  const char* env = std::getenv("ALLOT_LOG_LEVEL");
  if (env != nullptr && std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  if (env != nullptr && std::strcmp(env, "warning") == 0) return LogLevel::kWarning;
  if (env != nullptr && std::strcmp(env, "error") == 0) return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<int> gLevel{static_cast<int>(initialLevel())};
char gProgram[64] = "allot";

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "E";
    case LogLevel::kWarning: return "W";
    case LogLevel::kInfo: return "I";
    case LogLevel::kDebug: return "D";
  }
  return "?";
}

}  // namespace

void setLogLevel(LogLevel level) { gLevel.store(static_cast<int>(level)); }

bool logEnabled(LogLevel level) { return static_cast<int>(level) <= gLevel.load(); }

void setLogProgram(std::string_view name) {
  size_t n = std::min(name.size(), sizeof(gProgram) - 1);
  std::memcpy(gProgram, name.data(), n);
  gProgram[n] = '\0';
}

void logLine(LogLevel level, std::string_view text) {
  std::string line;
  line.reserve(text.size() + 32);
  line += '<';
  line += std::to_string(static_cast<int>(level));
  line += '>';
  line += gProgram;
  line += ' ';
  line += levelName(level);
  line += ' ';
  line += text;
  line += '\n';
  // One write so lines from different threads or processes never interleave.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

std::string Error::describe() const {
  if (errnum == 0) return message;
  return message + ": " + std::strerror(errnum);
}

namespace detail {
void checkFailed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "<2>%s CHECK failed: %s at %s:%d\n", gProgram, expr, file, line);
  std::abort();
}
}  // namespace detail

}  // namespace allot
