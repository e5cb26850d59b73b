// Following a task's output through its agent's files API
// (agent/files_api.h), for allotctl logs -f and allot-execute --follow.
//
// A follow is a series of answers: the agent ends one at a rotation, when
// the task ended (after its last bytes), or after a while; the next resumes
// where the last one stopped (the file's identity and offset), so nothing
// is printed twice or skipped across rotations. It stops after the answer
// that follows `taskEnded()` turning true.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/flags.h"
#include "base/result.h"
#include "http/client.h"

namespace allot {

struct TaskOutput {
  HostPort agent;
  http::ClientTls tls;  // serverRole "agent" with TLS
  std::string framework, task;
  bool stderrStream = false;
};

// The query naming the task's stream.
std::string taskOutputQuery(const TaskOutput& where);

// Where a follow resumes.
struct OutputPosition {
  std::string file;  // X-Allot-File; empty: whatever the path names
  uint64_t offset = 0;
};

// Why a follow stopped early: the agent refused (403), forgot the task
// (404), or could not be reached.
enum class FollowFailure { kNone, kUnreachable, kRefused, kNotFound };

Status followTaskOutput(const TaskOutput& where, OutputPosition* position,
                        const std::function<bool()>& taskEnded,
                        const std::function<void(std::string_view)>& out, FollowFailure* failure);

// Splits a byte stream into lines, each printed with a prefix; the bytes
// after the last newline wait for the next feed (or flush()).
class LinePrefixer {
 public:
  LinePrefixer(std::string prefix, std::function<void(const std::string&)> print)
      : prefix_(std::move(prefix)), print_(std::move(print)) {}
  void feed(std::string_view bytes);
  void flush();

 private:
  // A line longer than this is printed in pieces.
  static constexpr size_t kLineBytesMax = 64 * 1024;
  std::string prefix_, partial_;
  std::function<void(const std::string&)> print_;
};

}  // namespace allot
