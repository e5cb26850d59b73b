// Robustness of a real allot-agent against hostile input: the
// test plays the master over the real protocol (a loopback listener the
// agent's --master points at), and hostile_executor plays an executor on
// the agent's socket. Each test sends one offending frame, checks the
// refusal (TASK_ERROR naming the field, an ErrorMessage to the executor, or
// the link closed), then checks that a normal command task still runs to
// TASK_FINISHED on that agent and that the agent is alive.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>

#include "proto/connection.h"
#include "proto/frame.h"
#include "proto/input_limits.h"
#include "proto/resources.h"
#include "tests/agent/cluster.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::Child;
using testing::Cluster;
using testing::envOr;

// Every task id the agent sent an update for, over every link.
std::set<std::string> reportedTasks;

// One accepted agent connection, blocking.
class AgentPeer {
 public:
  explicit AgentPeer(int fd) : fd_(fd) {}
  ~AgentPeer() { ::close(fd_); }

  void send(const wire::Envelope& e) {
    std::string bytes;
    ASSERT_TRUE(appendFrame(e, &bytes).ok());
    sendRaw(bytes);
  }
  void sendRaw(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

  // The first message `match` accepts within `timeout` (others are
  // skipped; heartbeats answered); nullopt on timeout or close.
  std::optional<wire::Envelope> waitFor(const std::function<bool(const wire::Envelope&)>& match,
                                        std::chrono::milliseconds timeout = 30s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    wire::Envelope e;
    while (true) {
      auto got = decoder_.next(&e);
      if (!got.ok()) return std::nullopt;
      if (*got) {
        if (e.has_status_update()) reportedTasks.insert(e.status_update().status().task_id());
        if (e.has_heartbeat()) {
          wire::Envelope ack;
          ack.mutable_heartbeat_ack()->set_sequence(e.heartbeat().sequence());
          send(ack);
        }
        if (match(e)) return e;
        continue;
      }
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
  }
  // True when the agent closed this link within `timeout`.
  bool closedWithin(std::chrono::milliseconds timeout) {
    waitFor([](const wire::Envelope&) { return false; }, timeout);
    return closed_;
  }

 private:
  int fd_;
  bool closed_ = false;
  FrameDecoder decoder_;
};

// The fake master: a loopback listener.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd_, 8) != 0) return;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~Listener() { ::close(fd_); }
  uint16_t port() const { return port_; }

  std::unique_ptr<AgentPeer> accept(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return nullptr;
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    return fd < 0 ? nullptr : std::make_unique<AgentPeer>(fd);
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

bool isUpdate(const wire::Envelope& e, const std::string& taskId, std::function<bool(wire::TaskState)> state) {
  return e.has_status_update() && e.status_update().status().task_id() == taskId &&
         state(e.status_update().status().state());
}

bool terminal(wire::TaskState s) {
  return s == wire::TASK_FINISHED || s == wire::TASK_FAILED || s == wire::TASK_KILLED ||
         s == wire::TASK_LOST || s == wire::TASK_ERROR;
}

class AgentRobustness : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    cluster_ = new Cluster();
    listener_ = new Listener();
  }
  static void TearDownTestSuite() {
    agent_.reset();
    peer_.reset();
    delete listener_;
    delete cluster_;
    cluster_ = nullptr;
    listener_ = nullptr;
  }
  void SetUp() override {
    if (!cluster_->agentBinary()) GTEST_SKIP() << "ALLOT_AGENT not set (allot-agent not built)";
    if (!agent_) {
      std::vector<std::string> args = {cluster_->agentBinary(), "--master",
                                       "127.0.0.1:" + std::to_string(listener_->port()),
                                       "--work-dir", cluster_->workDir(),
                                       "--resources", "cpus:8;mem:8192;disk:1024",
                                       "--status-update-retry", "1", "--executor-idle-timeout", "0.5"};
      agent_ = std::make_unique<Child>(args, cluster_->dir() + "/agent.out", cluster_->dir() + "/agent.err");
      ASSERT_TRUE(acceptAgent()) << agentLog();
    }
    ASSERT_TRUE(peer_) << agentLog();
  }

  static std::string agentLog() { return testing::readAll(cluster_->dir() + "/agent.err"); }

  // The sandbox of executor `executorId` ("" while it has none).
  static std::string executorSandbox(const std::string& executorId) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(cluster_->workDir() + "/sandboxes", ec), end; !ec && it != end;
         it.increment(ec)) {
      // <framework>.<executor>.<ms> (containerName of base/files.h)
      if (it->path().filename().string().find("." + executorId + ".") != std::string::npos) return it->path().string();
    }
    return "";
  }
  // True when the stdout of executor `executorId` holds `text`.
  static bool executorSaid(const std::string& executorId, const std::string& text) {
    std::string sandbox = executorSandbox(executorId);
    return !sandbox.empty() && testing::readAll(sandbox + "/stdout").find(text) != std::string::npos;
  }

  // Accepts the agent's (re)connection and registers it.
  static bool acceptAgent(bool answer = true) {
    peer_ = listener_->accept(20s);
    if (!peer_) return false;
    if (!peer_->waitFor([](const wire::Envelope& e) { return e.has_hello(); })) return false;
    peer_->send(helloEnvelope(wire::ROLE_MASTER, "fake-master"));
    if (!peer_->waitFor([](const wire::Envelope& e) { return e.has_register_agent(); })) return false;
    if (answer) peer_->send(registered());
    return true;
  }

  static wire::Envelope registered(double heartbeatS = 60) {
    wire::Envelope e;
    auto* r = e.mutable_agent_registered();
    r->set_agent_id("fake-agent");
    r->set_master_id("fake-master");
    r->set_agent_secret("fake-secret");
    r->set_heartbeat_interval_s(heartbeatS);
    return e;
  }

  static wire::Envelope runTask(const std::string& taskId, const std::string& shell = "true") {
    wire::Envelope e;
    auto* m = e.mutable_run_task();
    m->mutable_framework()->set_id("robust-fw");
    m->mutable_framework()->set_name("robust");
    auto* t = m->mutable_task();
    t->set_task_id(taskId);
    t->set_agent_id("fake-agent");
    t->mutable_command()->set_shell(shell);
    Resources::parse("cpus:0.1;mem:32")->toWire(t->mutable_resources());
    return e;
  }

  static wire::Envelope hostileExecutorTask(const std::string& taskId, const std::string& mode) {
    wire::Envelope e = runTask(taskId);
    auto* t = e.mutable_run_task()->mutable_task();
    t->clear_command();
    t->mutable_executor()->set_executor_id("hostile-" + taskId);
    t->mutable_executor()->mutable_command()->add_argv(envOr("ALLOT_HOSTILE_EXECUTOR"));
    t->mutable_executor()->mutable_command()->add_argv(mode);
    return e;
  }

  // The terminal update of `taskId`, acknowledged.
  static std::optional<wire::TaskStatus> ending(const std::string& taskId) {
    auto e = peer_->waitFor([&](const wire::Envelope& e) { return isUpdate(e, taskId, terminal); });
    if (!e) return std::nullopt;
    const wire::TaskStatus& s = e->status_update().status();
    wire::Envelope ack;
    ack.mutable_status_acknowledgement()->set_framework_id(s.framework_id());
    ack.mutable_status_acknowledgement()->set_task_id(s.task_id());
    ack.mutable_status_acknowledgement()->set_update_id(s.update_id());
    peer_->send(ack);
    return s;
  }

  // A normal command task still runs to TASK_FINISHED and the agent lives.
  void expectAgentStillWorks() {
    std::string id = "normal-" + std::to_string(++normalTasks_);
    peer_->send(runTask(id));
    auto end = ending(id);
    ASSERT_TRUE(end.has_value()) << "no end for " << id << "\n" << agentLog();
    EXPECT_EQ(end->state(), wire::TASK_FINISHED) << end->message() << "\n" << agentLog();
    EXPECT_EQ(::kill(agent_->pid(), 0), 0) << "agent died:\n" << agentLog();
  }

  static Cluster* cluster_;
  static Listener* listener_;
  static std::unique_ptr<Child> agent_;
  static std::unique_ptr<AgentPeer> peer_;
  static int normalTasks_;
};
Cluster* AgentRobustness::cluster_ = nullptr;
Listener* AgentRobustness::listener_ = nullptr;
std::unique_ptr<Child> AgentRobustness::agent_;
std::unique_ptr<AgentPeer> AgentRobustness::peer_;
int AgentRobustness::normalTasks_ = 0;

std::string big(size_t n) { return std::string(n, 'x'); }

// ---------------------------------------------------------------- from the master: framing

TEST_F(AgentRobustness, FrameAboveTheSizeLimitDropsTheLinkAndTheAgentReconnects) {
  peer_->sendRaw(std::string("\xff\xff\xff\xff", 4));
  EXPECT_TRUE(peer_->closedWithin(10s));
  ASSERT_TRUE(acceptAgent()) << agentLog();
  expectAgentStillWorks();
}

TEST_F(AgentRobustness, UndecodableFrameDropsTheLinkAndTheAgentReconnects) {
  peer_->sendRaw(std::string("\x00\x00\x00\x03\xff\xff\xff", 7));
  EXPECT_TRUE(peer_->closedWithin(10s));
  ASSERT_TRUE(acceptAgent()) << agentLog();
  expectAgentStillWorks();
}

TEST_F(AgentRobustness, HeartbeatIntervalBelowTheLimitIsRefused) {
  // A fresh link whose first AgentRegistered would make the agent heartbeat
  // in a busy loop: refused, the agent waits for a usable one.
  peer_->sendRaw(std::string("\xff\xff\xff\xff", 4));
  ASSERT_TRUE(peer_->closedWithin(10s));
  ASSERT_TRUE(acceptAgent(false)) << agentLog();
  peer_->send(registered(1e-9));
  ASSERT_TRUE(testing::waitFor([] { return agentLog().find("AgentRegistered.heartbeat_interval_s") != std::string::npos; }, 10s))
      << agentLog();
  int heartbeats = 0;
  peer_->waitFor([&](const wire::Envelope& e) { return e.has_heartbeat() && ++heartbeats > 5; }, 1s);
  EXPECT_LE(heartbeats, 1);
  peer_->send(registered());
  expectAgentStillWorks();
}

// ---------------------------------------------------------------- from the master: one test per limit

struct RunTaskCase {
  const char* name;
  std::function<void(wire::TaskInfo&)> spoil;
  const char* field;  // what the TASK_ERROR's message must name
};

class RunTaskLimits : public AgentRobustness, public ::testing::WithParamInterface<RunTaskCase> {};

TEST_P(RunTaskLimits, OffendingRunTaskGetsTaskErrorAndTheAgentKeepsWorking) {
  const RunTaskCase& c = GetParam();
  std::string id = std::string("bad-") + c.name;
  wire::Envelope e = runTask(id);
  c.spoil(*e.mutable_run_task()->mutable_task());
  peer_->send(e);
  auto end = ending(id);
  ASSERT_TRUE(end.has_value()) << "no answer to " << c.name << "\n" << agentLog();
  EXPECT_EQ(end->state(), wire::TASK_ERROR);
  EXPECT_EQ(end->reason(), wire::REASON_INVALID_LAUNCH);
  EXPECT_NE(end->message().find(c.field), std::string::npos) << end->message();
  expectAgentStillWorks();
}

INSTANTIATE_TEST_SUITE_P(
    Agent, RunTaskLimits,
    ::testing::Values(
        RunTaskCase{"TaskDataBytes", [](wire::TaskInfo& t) { t.set_data(big(limits::kTaskDataBytesMax + 1)); },
                    "RunTask.task.data"},
        RunTaskCase{"TaskNameBytes", [](wire::TaskInfo& t) { t.set_name(big(limits::kNameBytesMax + 1)); },
                    "RunTask.task.name"},
        RunTaskCase{"ShellBytes",
                    [](wire::TaskInfo& t) { t.mutable_command()->set_shell(big(limits::kShellBytesMax + 1)); },
                    "RunTask.task.command.shell"},
        RunTaskCase{"ArgvCount",
                    [](wire::TaskInfo& t) {
                      for (size_t i = 0; i <= limits::kArgvCountMax; ++i) t.mutable_command()->add_argv("a");
                    },
                    "RunTask.task.command.argv"},
        RunTaskCase{"EnvironmentCount",
                    [](wire::TaskInfo& t) {
                      auto* env = t.mutable_command()->mutable_environment();
                      for (size_t i = 0; i <= limits::kEnvironmentCountMax; ++i) (*env)["V" + std::to_string(i)] = "1";
                    },
                    "RunTask.task.command.environment"},
        RunTaskCase{"CommandBytes",
                    [](wire::TaskInfo& t) {
                      for (int i = 0; i < 5; ++i) t.mutable_command()->add_argv(big(limits::kCommandBytesMax / 4));
                    },
                    "argv+environment"},
        RunTaskCase{"UserBytes",
                    [](wire::TaskInfo& t) { t.mutable_command()->set_user(big(limits::kUserBytesMax + 1)); },
                    "RunTask.task.command.user"},
        RunTaskCase{"ResourcesPerList",
                    [](wire::TaskInfo& t) {
                      for (size_t i = 0; i <= limits::kResourcesPerListMax; ++i) t.add_resources()->set_name("r" + std::to_string(i));
                    },
                    "RunTask.task.resources"},
        RunTaskCase{"RangesPerResource",
                    [](wire::TaskInfo& t) {
                      auto* r = t.add_resources();
                      r->set_name("ports");
                      for (uint64_t i = 0; i <= limits::kRangesPerResourceMax; ++i) {
                        auto* range = r->add_ranges();
                        range->set_begin(2 * i);
                        range->set_end(2 * i);
                      }
                    },
                    "ranges"},
        RunTaskCase{"ResourceScalarNotFinite",
                    [](wire::TaskInfo& t) { t.mutable_resources(0)->set_scalar(NAN); }, "scalar"},
        RunTaskCase{"ResourceScalarNegative",
                    [](wire::TaskInfo& t) { t.mutable_resources(0)->set_scalar(-4); }, "RunTask.task.resources"},
        RunTaskCase{"KillGrace", [](wire::TaskInfo& t) { t.set_kill_grace_s(INFINITY); }, "RunTask.task.kill_grace_s"},
        RunTaskCase{"MaxDuration", [](wire::TaskInfo& t) { t.set_max_duration_s(-1); }, "RunTask.task.max_duration_s"},
        RunTaskCase{"ExecutorIdBytes",
                    [](wire::TaskInfo& t) { t.mutable_executor()->set_executor_id(big(limits::kIdBytesMax + 1)); },
                    "RunTask.task.executor.executor_id"}),
    [](const ::testing::TestParamInfo<RunTaskCase>& info) { return std::string(info.param.name); });

// Refusals the agent cannot answer with a task update: logged, nothing else.
struct SilentCase {
  const char* name;
  std::function<void(wire::Envelope&)> build;
  const char* field;  // what the agent's log line must name
};

class SilentLimits : public AgentRobustness, public ::testing::WithParamInterface<SilentCase> {};

TEST_P(SilentLimits, OffendingMessageIsRefusedAndTheAgentKeepsWorking) {
  const SilentCase& c = GetParam();
  wire::Envelope e;
  c.build(e);
  peer_->send(e);
  ASSERT_TRUE(testing::waitFor([&] { return agentLog().find(std::string("refused a message from the master: ") + c.field) != std::string::npos; }, 10s))
      << agentLog();
  expectAgentStillWorks();
}

INSTANTIATE_TEST_SUITE_P(
    Agent, SilentLimits,
    ::testing::Values(
        SilentCase{"TaskIdBytes", [](wire::Envelope& e) { e = AgentRobustness::runTask(big(limits::kIdBytesMax + 1)); },
                   "RunTask.task.task_id"},
        SilentCase{"TaskIdEmpty", [](wire::Envelope& e) { e = AgentRobustness::runTask(""); }, "RunTask.task.task_id"},
        SilentCase{"FrameworkIdBytes",
                   [](wire::Envelope& e) {
                     e = AgentRobustness::runTask("x");
                     e.mutable_run_task()->mutable_framework()->set_id(big(limits::kIdBytesMax + 1));
                   },
                   "RunTask.framework.id"},
        SilentCase{"KillGraceNotFinite",
                   [](wire::Envelope& e) {
                     e.mutable_kill_task()->set_framework_id("robust-fw");
                     e.mutable_kill_task()->set_task_id("t");
                     e.mutable_kill_task()->set_grace_s(NAN);
                   },
                   "KillTask.grace_s"},
        // Used to abort the agent: the TASK_LOST it answered with had no
        // framework id, which the update store CHECKs.
        SilentCase{"KillTaskWithoutFrameworkId",
                   [](wire::Envelope& e) { e.mutable_kill_task()->set_task_id("t"); },
                   "KillTask.framework_id: empty"},
        SilentCase{"AcknowledgementIdBytes",
                   [](wire::Envelope& e) { e.mutable_status_acknowledgement()->set_update_id(big(limits::kIdBytesMax + 1)); },
                   "StatusAcknowledgement.update_id"},
        SilentCase{"ShutdownFrameworkIdBytes",
                   [](wire::Envelope& e) { e.mutable_shutdown_framework()->set_framework_id(big(limits::kIdBytesMax + 1)); },
                   "ShutdownFramework.framework_id"},
        SilentCase{"ErrorMessageBytes",
                   [](wire::Envelope& e) { e.mutable_error()->set_message(big(limits::kErrorMessageBytesMax + 1)); },
                   "ErrorMessage.message"},
        SilentCase{"UnexpectedMessage",
                   [](wire::Envelope& e) { e.mutable_accept_offers()->add_offer_ids("o"); },
                   "unexpected message from the master"}),
    [](const ::testing::TestParamInfo<SilentCase>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------- from an executor: one test per limit

struct ExecutorCase {
  const char* mode;   // hostile_executor's
  const char* field;  // what the outcome must contain
};

class ExecutorLimits : public AgentRobustness, public ::testing::WithParamInterface<ExecutorCase> {};

TEST_P(ExecutorLimits, OffendingExecutorFrameIsRefusedAndTheAgentKeepsWorking) {
  if (!envOr("ALLOT_HOSTILE_EXECUTOR")) GTEST_SKIP() << "ALLOT_HOSTILE_EXECUTOR not set";
  const ExecutorCase& c = GetParam();
  std::string id = std::string("hostile-") + c.mode;
  peer_->send(hostileExecutorTask(id, c.mode));
  auto end = ending(id);
  ASSERT_TRUE(end.has_value()) << "no end for " << id << "\n" << agentLog();
  EXPECT_EQ(end->state(), wire::TASK_FINISHED) << end->message() << "\n" << agentLog();
  EXPECT_NE(end->message().find(c.field), std::string::npos) << end->message();
  expectAgentStillWorks();
  // Nothing an executor invents reaches the master.
  EXPECT_FALSE(reportedTasks.count("a-task-of-someone-else"));
  EXPECT_FALSE(reportedTasks.count("not-mine-0"));
}

INSTANTIATE_TEST_SUITE_P(
    Agent, ExecutorLimits,
    ::testing::Values(ExecutorCase{"status-message", "REFUSED: refused: StatusUpdate.status.message: 4097 bytes"},
                      ExecutorCase{"status-state", "REFUSED: refused: StatusUpdate.status.state"},
                      ExecutorCase{"foreign-task", "REFUSED: refused: status update for task a-task-of-someone-else"},
                      ExecutorCase{"unexpected-message", "REFUSED: refused: unexpected message from an executor"},
                      ExecutorCase{"register-tasks", "REFUSED: refused: RegisterExecutor.tasks: 10001 entries"},
                      ExecutorCase{"unacked-foreign", "REFUSED: refused: 100 unacknowledged updates of tasks"},
                      ExecutorCase{"oversized-frame", "CLOSED"},
                      ExecutorCase{"undecodable-frame", "CLOSED"}),
    [](const ::testing::TestParamInfo<ExecutorCase>& info) {
      std::string n = info.param.mode;
      for (char& ch : n) ch = ch == '-' ? '_' : ch;
      return n;
    });

// An executor that stops reading while the agent has tasks for it: past
// kExecutorQueuedBytesMax of unsent LaunchTasks the agent drops that link
// (and only it); every task still gets a terminal update.
TEST_F(AgentRobustness, ExecutorThatStopsReadingLosesItsLinkNotTheAgent) {
  if (!envOr("ALLOT_HOSTILE_EXECUTOR")) GTEST_SKIP() << "ALLOT_HOSTILE_EXECUTOR not set";
  wire::Envelope first = hostileExecutorTask("no-read", "no-read");
  peer_->send(first);
  // Registered, given its first task, and no longer reading: every task
  // sent from now on goes to its link (not to the queue of a registration
  // still to come) and stays in the agent's send queue.
  ASSERT_TRUE(testing::waitFor([] { return executorSaid("hostile-no-read", "not reading"); }, 30s)) << agentLog();
  size_t flood = limits::kExecutorQueuedBytesMax / limits::kTaskDataBytesMax + 4;
  for (size_t i = 0; i < flood; ++i) {
    wire::Envelope e = first;
    e.mutable_run_task()->mutable_task()->set_task_id("flood-" + std::to_string(i));
    e.mutable_run_task()->mutable_task()->set_data(std::string(limits::kTaskDataBytesMax, 'd'));
    peer_->send(e);
  }
  // The agent handles the master's messages in order: once a later task has
  // an answer, every task of the flood is the executor's. Only then may it
  // end (tasks that came after would start a new executor).
  peer_->send(runTask("after-the-flood"));
  ASSERT_TRUE(ending("after-the-flood").has_value()) << agentLog();
  std::ofstream(executorSandbox("hostile-no-read") + "/flood-done") << "go\n";
  auto end = ending("no-read");
  ASSERT_TRUE(end.has_value()) << agentLog();
  EXPECT_EQ(end->message(), "CLOSED") << agentLog();
  for (size_t i = 0; i < flood; ++i) {
    EXPECT_TRUE(ending("flood-" + std::to_string(i)).has_value()) << "flood-" << i << " was forgotten";
  }
  expectAgentStillWorks();
}

}  // namespace
}  // namespace allot
