// An executor that sends its agent one offending frame (tests/agent
// agent_robustness_integration_test). The agent launches it like any custom
// executor; it registers with its real ids and secret, waits for its first
// LaunchTask, sends what MODE says and reports what the agent answered as
// the final state of that task, so the test reads the outcome from the
// update the agent forwards:
//   TASK_FINISHED "REFUSED: <ErrorMessage>"   the agent refused the frame
//   TASK_FINISHED "CLOSED"                    the agent closed the link
//   TASK_FAILED   "ACCEPTED"                  no refusal within 20 s
// When the agent closed the link, the report goes over a new connection
// with a proper registration.
//
//   hostile_executor MODE
// Modes: status-message, status-state, foreign-task, unexpected-message,
// oversized-frame, undecodable-frame (after registering); register-tasks,
// unacked-foreign (the registration itself); no-read (after its first
// LaunchTask prints "not reading" to stdout and reads nothing more until the
// agent closes the link, while the test floods it with big tasks; then waits
// for the file `flood-done` in its working directory, the sandbox, which the
// test writes once the agent has taken every task of the flood, so that no
// task of it comes after this executor ended and starts another one).
//
// Plain blocking sockets, so raw bytes that are no frame at all can be sent.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "proto/connection.h"
#include "proto/frame.h"
#include "proto/input_limits.h"

using namespace allot;

namespace {

// How long an offence waits for the agent's answer before it counts as
// accepted: far beyond a loaded machine's delays (a refusal ends the wait
// at once), within the test's 30 s wait for the report.
constexpr std::chrono::milliseconds kAnswerMax{20'000};
// How long no-read keeps not reading when the agent never drops the link,
// and waits for the test's flood-done.
constexpr std::chrono::milliseconds kNoReadMax{25'000};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

class Link {
 public:
  Link() {
    std::string endpoint = env("ALLOT_AGENT_ENDPOINT");
    if (endpoint.rfind("unix:", 0) != 0) return;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string path = endpoint.substr(5);
    if (path.size() >= sizeof addr.sun_path) return;
    std::memcpy(addr.sun_path, path.data(), path.size());
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
    send(helloEnvelope(wire::ROLE_EXECUTOR, "hostile-executor"));
  }
  ~Link() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0 && !closed_; }
  bool closed() const { return closed_; }

  // Waits, reading nothing, until the agent closes its end (POLLRDHUP is
  // raised whatever unread data is queued); false after `timeout`.
  bool waitForHangUp(std::chrono::milliseconds timeout) {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLRDHUP, 0};
    return ::poll(&p, 1, static_cast<int>(timeout.count())) > 0 && (p.revents & (POLLRDHUP | POLLHUP)) != 0;
  }

  void send(const wire::Envelope& e) {
    std::string bytes;
    if (appendFrame(e, &bytes).ok()) sendRaw(bytes);
  }
  void sendRaw(const std::string& bytes) {
    size_t done = 0;
    while (fd_ >= 0 && done < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

  // The next message within `timeout`; nullopt on timeout or close.
  std::optional<wire::Envelope> next(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    wire::Envelope e;
    while (fd_ >= 0 && !closed_) {
      auto got = decoder_.next(&e);
      if (!got.ok()) return std::nullopt;
      if (*got) return e;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[65536];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        return std::nullopt;
      }
      decoder_.append(buf, static_cast<size_t>(n));
    }
    return std::nullopt;
  }

 private:
  int fd_ = -1;
  bool closed_ = false;
  FrameDecoder decoder_;
};

wire::Envelope registration() {
  wire::Envelope e;
  auto* r = e.mutable_register_executor();
  r->set_framework_id(env("ALLOT_FRAMEWORK_ID"));
  r->set_executor_id(env("ALLOT_EXECUTOR_ID"));
  r->set_executor_secret(env("ALLOT_EXECUTOR_SECRET"));
  return e;
}

wire::Envelope status(const std::string& taskId, wire::TaskState state, const std::string& message) {
  wire::Envelope e;
  auto* s = e.mutable_status_update()->mutable_status();
  s->set_task_id(taskId);
  s->set_state(state);
  s->set_message(message);
  return e;
}

wire::Envelope hostileRegistration(const std::string& mode) {
  wire::Envelope reg = registration();
  if (mode == "register-tasks") {
    for (size_t i = 0; i <= limits::kTasksPerExecutorMax; ++i) reg.mutable_register_executor()->add_tasks();
  } else if (mode == "unacked-foreign") {
    for (int i = 0; i < 100; ++i) {
      auto* s = reg.mutable_register_executor()->add_unacknowledged();
      s->set_task_id("not-mine-" + std::to_string(i));
      s->set_state(wire::TASK_FAILED);
      s->set_update_id("forged-" + std::to_string(i));
    }
  }
  return reg;
}

// The offending bytes for a mode played after registering.
std::string offence(const std::string& mode, const std::string& taskId) {
  wire::Envelope e;
  if (mode == "status-message") {
    e = status(taskId, wire::TASK_RUNNING, std::string(limits::kStatusMessageBytesMax + 1, 'x'));
  } else if (mode == "status-state") {
    e = status(taskId, wire::TASK_RUNNING, "");
    e.mutable_status_update()->mutable_status()->set_state(static_cast<wire::TaskState>(999));
  } else if (mode == "foreign-task") {
    e = status("a-task-of-someone-else", wire::TASK_FAILED, "forged");
  } else if (mode == "unexpected-message") {
    e.mutable_accept_offers()->add_offer_ids("o");
  } else if (mode == "oversized-frame") {
    return std::string("\xff\xff\xff\xff", 4);
  } else if (mode == "undecodable-frame") {
    return std::string("\x00\x00\x00\x03\xff\xff\xff", 7);
  } else {
    return "";
  }
  std::string bytes;
  (void)appendFrame(e, &bytes);
  return bytes;
}

// Reads until a refusal, a close or `timeout`: the outcome text. `fatal`:
// the agent said it closes the link.
std::string answerTo(Link& link, std::string* taskId, std::chrono::milliseconds timeout, bool* fatal) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto e = link.next(left);
    if (!e) break;
    if (e->has_launch_task() && taskId->empty()) *taskId = e->launch_task().task().task_id();
    if (e->has_error()) {
      *fatal = e->error().fatal();
      return "REFUSED: " + e->error().message();
    }
  }
  return link.closed() ? "CLOSED" : "ACCEPTED";
}

// Waits until `path` exists; false after `timeout`.
bool waitForFile(const char* path, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (::access(path, F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    ::usleep(10'000);
  }
  return true;
}

// Waits for the first LaunchTask on `link`.
bool waitForTask(Link& link, std::string* taskId) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (taskId->empty() && std::chrono::steady_clock::now() < deadline) {
    auto e = link.next(std::chrono::seconds(1));
    if (!e && link.closed()) return false;
    if (e && e->has_launch_task()) *taskId = e->launch_task().task().task_id();
  }
  return !taskId->empty();
}

void report(Link& link, const std::string& taskId, const std::string& outcome) {
  bool refused = outcome != "ACCEPTED";
  link.send(status(taskId, refused ? wire::TASK_FINISHED : wire::TASK_FAILED, outcome));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    auto e = link.next(std::chrono::seconds(1));
    if (e && e->has_status_acknowledgement()) return;
    if (!e && link.closed()) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: hostile_executor MODE\n");
    return 2;
  }
  std::string mode = argv[1];
  bool atRegistration = mode.rfind("register-", 0) == 0 || mode == "unacked-foreign";
  std::string taskId;
  std::string outcome;
  bool fatal = false;
  auto link = std::make_unique<Link>();
  if (!link->ok()) {
    std::fprintf(stderr, "hostile-executor: cannot connect to %s\n", env("ALLOT_AGENT_ENDPOINT").c_str());
    return 3;
  }
  if (atRegistration) {
    link->send(hostileRegistration(mode));
    outcome = answerTo(*link, &taskId, kAnswerMax, &fatal);
  } else if (mode == "no-read") {
    link->send(registration());
    if (!waitForTask(*link, &taskId)) return 4;
    std::printf("not reading\n");
    std::fflush(stdout);
    if (!link->waitForHangUp(kNoReadMax)) std::printf("the agent kept the link for %lld s\n",
                                                      static_cast<long long>(kNoReadMax.count() / 1000));
    if (!waitForFile("flood-done", kNoReadMax)) std::printf("no flood-done from the test\n");
    outcome = answerTo(*link, &taskId, kAnswerMax, &fatal);
  } else {
    link->send(registration());
    if (!waitForTask(*link, &taskId)) return 4;
    link->sendRaw(offence(mode, taskId));
    outcome = answerTo(*link, &taskId, kAnswerMax, &fatal);
  }
  std::printf("%s: %s\n", mode.c_str(), outcome.c_str());
  std::fflush(stdout);
  if (!link->ok() || fatal) {
    // Back on a new link as an executor does: reporting the task it runs.
    link = std::make_unique<Link>();
    wire::Envelope again = registration();
    if (!taskId.empty()) again.mutable_register_executor()->add_tasks()->set_task_id(taskId);
    link->send(again);
  }
  if (!waitForTask(*link, &taskId)) return 5;
  report(*link, taskId, outcome);
  return 0;
}
