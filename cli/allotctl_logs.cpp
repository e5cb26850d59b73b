#include "cli/allotctl_logs.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "base/flags.h"
#include "cli/task_output.h"
#include "proto/state.pb.h"
#include "proto/task_state.h"

namespace allot {

namespace {

// One read's largest answer (agent/sandbox_files.h kReadBytesMax).
constexpr uint64_t kReadBytes = 1024 * 1024;

struct Located {
  std::string framework;
  HostPort agent;
  bool terminal = false;
};


// Finds the task (and its agent's HTTP address) in the master's /state.
Result<Located> locate(const CtlCall& master, const LogsRequest& req, CtlExit* code) {
  *code = CtlExit::kUnreachable;
  auto r = master("GET", "/state");
  if (!r) return r.error();
  if (r->status != 200) return Error{"master answered " + std::to_string(r->status) + " to /state"};
  state::State st;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(r->body, &st, parse).ok()) {
    return Error{"the master's /state is not a State"};
  }
  *code = CtlExit::kNotFound;
  const state::TaskView* found = nullptr;
  auto consider = [&](const state::TaskView& t) {
    if (t.task_id() != req.task || (!req.framework.empty() && t.framework_id() != req.framework)) return;
    found = &t;  // a later (completed) entry is the same task's newer state
  };
  for (const auto& t : st.master().tasks()) consider(t);
  if (!found) for (const auto& t : st.master().completed_tasks()) consider(t);
  if (!found) return Error{"no task " + req.task + (req.framework.empty() ? "" : " of framework " + req.framework)};
  for (const auto& a : st.master().agents()) {
    if (a.id() != found->agent_id()) continue;
    if (a.http_address().empty()) {
      return Error{"agent " + a.id() + " serves no HTTP endpoint (--http-listen): its files cannot be read"};
    }
    auto hp = parseHostPort(a.http_address());
    if (!hp) return Error{"agent " + a.id() + " reports HTTP address " + a.http_address() + ": " + hp.error().describe()};
    return Located{found->framework_id(), *hp, isTerminal(found->state())};
  }
  return Error{"task " + req.task + "'s agent " + found->agent_id() + " is not known to the master"};
}

Result<http::ClientResponse> agentGet(const LogsRequest& req, const TaskOutput& where, const std::string& target,
                                      CtlExit* code) {
  auto r = http::fetch(where.agent, "GET", target, "",
                       std::chrono::milliseconds(static_cast<int64_t>(req.timeoutS * 1000)), req.agentTls);
  *code = CtlExit::kUnreachable;
  if (!r) return r.error();
  if (r->status == 200) return r;
  std::string body = r->body;
  while (!body.empty() && body.back() == '\n') body.pop_back();
  *code = r->status == 404 ? CtlExit::kNotFound : CtlExit::kRefused;
  return Error{"agent answered " + std::to_string(r->status) + ": " + body};
}

uint64_t number(const std::string& text) { return text.empty() ? 0 : std::strtoull(text.c_str(), nullptr, 10); }

// The last n lines of text (a last line without '\n' counts).
std::string_view lastLines(std::string_view text, size_t n) {
  if (n == 0) return {};
  size_t start = text.size();
  if (start > 0 && text[start - 1] == '\n') --start;  // the final newline ends the last line
  for (size_t lines = 0; lines < n; ++lines) {
    size_t nl = start == 0 ? std::string_view::npos : text.rfind('\n', start - 1);
    if (nl == std::string_view::npos) return text;  // fewer lines than n
    start = nl;
  }
  return text.substr(start + 1);
}

void emit(std::string_view bytes) {
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  std::fflush(stdout);
}

// Prints the file (or its last lines) to its current end.
Result<OutputPosition> printExisting(const LogsRequest& req, const TaskOutput& where, CtlExit* code) {
  std::string base = "/files/read?" + taskOutputQuery(where);
  if (req.tail >= 0) {
    uint64_t want = std::min<uint64_t>(static_cast<uint64_t>(req.tail) * kTailLineBytes, kReadBytes);
    auto r = agentGet(req, where, base + "&tail=" + std::to_string(std::max<uint64_t>(want, 1)), code);
    if (!r) return r.error();
    emit(lastLines(r->body, static_cast<size_t>(req.tail)));
    return OutputPosition{r->header("X-Allot-File"), number(r->header("X-Allot-Offset")) + r->body.size()};
  }
  OutputPosition pos;
  for (;;) {
    auto r = agentGet(req, where, base + "&offset=" + std::to_string(pos.offset) + "&length=" + std::to_string(kReadBytes), code);
    if (!r) return r.error();
    emit(r->body);
    pos.file = r->header("X-Allot-File");
    pos.offset += r->body.size();
    if (r->body.empty() || pos.offset >= number(r->header("X-Allot-Size"))) return pos;
  }
}

}  // namespace

bool parseLogsArgs(const std::vector<std::string>& args, LogsRequest* request) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "-f") {
      request->follow = true;
    } else if (request->task.empty()) {
      request->task = args[i];
    } else {
      std::cerr << "allotctl: logs takes one TASK (and -f)\n";
      return false;
    }
  }
  if (request->task.empty()) {
    std::cerr << "allotctl: logs takes one TASK\n";
    return false;
  }
  return true;
}

CtlExit runLogs(const CtlCall& master, const LogsRequest& req) {
  CtlExit code = CtlExit::kOk;
  auto fail = [&](const Error& e) {
    std::cerr << "allotctl: " << e.describe() << "\n";
    return code;
  };
  auto at = locate(master, req, &code);
  if (!at) return fail(at.error());
  TaskOutput where{at->agent, req.agentTls, at->framework, req.task, req.stderrStream};
  auto pos = printExisting(req, where, &code);
  if (!pos) return fail(pos.error());
  if (!req.follow) return CtlExit::kOk;
  // After each answer the master says whether the task ended.
  bool ended = at->terminal;
  Error lookup{""};
  auto taskEnded = [&] {
    if (ended) return true;
    auto now = locate(master, req, &code);
    if (!now) {
      lookup = now.error();
      return ended = true;  // one last answer, then the error
    }
    return ended = now->terminal;
  };
  FollowFailure failure = FollowFailure::kNone;
  Status st = followTaskOutput(where, &*pos, taskEnded, emit, &failure);
  if (!st) {
    code = failure == FollowFailure::kNotFound ? CtlExit::kNotFound
           : failure == FollowFailure::kRefused ? CtlExit::kRefused
                                                : CtlExit::kUnreachable;
    return fail(st.error());
  }
  if (!lookup.message.empty()) return fail(lookup);
  return CtlExit::kOk;
}

}  // namespace allot
