#include "cli/task_output.h"

#include <cstdlib>
#include <thread>

namespace allot {

namespace {

// The agent ends a follow answer at least every 30 s; longer is a dead agent.
constexpr auto kFollowAnswerMax = std::chrono::seconds(60);

uint64_t number(const std::string& text) { return text.empty() ? 0 : std::strtoull(text.c_str(), nullptr, 10); }

Status followOnce(const TaskOutput& where, OutputPosition* pos,
                  const std::function<void(std::string_view)>& out, FollowFailure* failure) {
  std::string target = "/files/follow?" + taskOutputQuery(where) + "&offset=" + std::to_string(pos->offset);
  if (!pos->file.empty()) target += "&file=" + http::encodeQueryValue(pos->file);
  uint64_t got = 0;
  auto r = http::fetchStreamed(where.agent, target, kFollowAnswerMax, where.tls, [&](std::string_view chunk) {
    out(chunk);
    got += chunk.size();
    return true;
  });
  *failure = FollowFailure::kUnreachable;
  if (!r) return r.error();
  if (r->status == 503) {  // the agent serves its limit of follows
    std::this_thread::sleep_for(std::chrono::seconds(1));
    *failure = FollowFailure::kNone;
    return okStatus();
  }
  if (r->status != 200) {
    *failure = r->status == 404 ? FollowFailure::kNotFound : FollowFailure::kRefused;
    std::string body = r->body;
    while (!body.empty() && body.back() == '\n') body.pop_back();
    return Error{"agent answered " + std::to_string(r->status) + ": " + body};
  }
  *failure = FollowFailure::kNone;
  pos->file = r->header("X-Allot-File");
  pos->offset = number(r->header("X-Allot-Offset")) + got;
  return okStatus();
}

}  // namespace

std::string taskOutputQuery(const TaskOutput& where) {
  return "framework=" + http::encodeQueryValue(where.framework) + "&task=" + http::encodeQueryValue(where.task) +
         "&stream=" + (where.stderrStream ? "stderr" : "stdout");
}

Status followTaskOutput(const TaskOutput& where, OutputPosition* position,
                        const std::function<bool()>& taskEnded,
                        const std::function<void(std::string_view)>& out, FollowFailure* failure) {
  for (;;) {
    bool ended = taskEnded();
    if (Status st = followOnce(where, position, out, failure); !st) {
      // A task that ended may be forgotten by its agent: nothing more comes.
      if (ended && *failure == FollowFailure::kNotFound) return okStatus();
      return st;
    }
    if (ended) return okStatus();
  }
}

void LinePrefixer::feed(std::string_view bytes) {
  size_t start = 0;
  while (start < bytes.size()) {
    size_t nl = bytes.find('\n', start);
    if (nl == std::string_view::npos) {
      partial_.append(bytes.substr(start));
      if (partial_.size() >= kLineBytesMax) flush();
      return;
    }
    partial_.append(bytes.substr(start, nl - start));
    print_(prefix_ + partial_ + "\n");
    partial_.clear();
    start = nl + 1;
  }
}

void LinePrefixer::flush() {
  if (partial_.empty()) return;
  print_(prefix_ + partial_ + "\n");
  partial_.clear();
}

}  // namespace allot
