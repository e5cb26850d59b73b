#include "sdk/executor.h"
#include "base/clock.h"
#include "proto/task_state.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/flags.h"
#include "base/log.h"
#include "proto/leader.h"
#include "proto/input_limits.h"
#include "proto/reconnecting_link.h"
#include "proto/validate.h"

namespace allot {
namespace {

Result<std::string> requireEnv(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return Error{std::string("environment variable ") + name + " is not set"};
  return std::string(v);
}

}  // namespace

Result<ExecutorOptions> ExecutorOptions::fromEnvironment() {
  ExecutorOptions o;
  auto endpoint = requireEnv("ALLOT_AGENT_ENDPOINT");
  if (!endpoint) return endpoint.error();
  auto framework = requireEnv("ALLOT_FRAMEWORK_ID");
  if (!framework) return framework.error();
  auto executor = requireEnv("ALLOT_EXECUTOR_ID");
  if (!executor) return executor.error();
  o.endpoint = *endpoint;
  o.frameworkId = *framework;
  o.executorId = *executor;
  if (char* secret = std::getenv("ALLOT_EXECUTOR_SECRET")) {
    o.secret = secret;
    // Scrubbed in place (that memory is what /proc/<pid>/environ shows) and
    // removed, so the tasks this executor starts never inherit it.
    std::memset(secret, 'x', std::strlen(secret));
    ::unsetenv("ALLOT_EXECUTOR_SECRET");
  }
  if (const char* a = std::getenv("ALLOT_AGENT_ID")) o.agentId = a;
  if (const char* s = std::getenv("ALLOT_SANDBOX_DIR")) o.sandboxDir = s;
  if (const char* t = std::getenv("ALLOT_RECOVERY_TIMEOUT_S")) {
    char* end = nullptr;
    double seconds = std::strtod(t, &end);
    if (end == t || *end != '\0' || !(seconds >= 0) || seconds > 86400 * 365) {
      return Error{std::string("ALLOT_RECOVERY_TIMEOUT_S=") + t + ": not a number of seconds"};
    }
    o.recoveryTimeout = secondsToDuration(seconds);
  }
  return o;
}

ExecutorDriver::ExecutorDriver(asio::io_context& io, Executor& executor, ExecutorOptions options)
    : io_(io), executor_(executor), options_(std::move(options)), recoveryTimer_(io) {
  char prefix[64];
  std::snprintf(prefix, sizeof prefix, "%d-%lld-", static_cast<int>(getpid()),
                static_cast<long long>(std::chrono::system_clock::now().time_since_epoch().count()));
  // Bounded so every update id stays within limits::kIdBytesMax.
  updatePrefix_ = options_.executorId.substr(0, 128) + "-" + prefix;
}

ExecutorDriver::~ExecutorDriver() = default;

Status ExecutorDriver::start() {
  auto endpoint = parseEndpoint(options_.endpoint);
  if (!endpoint) return endpoint.error();
  ReconnectingLink::Options lo;
  lo.localRole = wire::ROLE_EXECUTOR;
  lo.localName = options_.executorId;
  lo.peerRole = wire::ROLE_AGENT;
  lo.peerCertRole.clear();  // the agent's executor port is local and plaintext
  lo.backoffMin = options_.reconnectMin;
  lo.backoffMax = options_.reconnectMax;
  ReconnectingLink::Callbacks lc;
  lc.onConnected = [this](const wire::Hello&) { sendRegistration(); };
  lc.onMessage = [this](wire::Envelope& e) { onMessage(e); };
  lc.onDisconnected = [this](const std::string& reason) { onClosed(reason); };
  link_ = std::make_unique<ReconnectingLink>(io_, makeFixedDetector(io_, *endpoint), lo, lc);
  stopped_ = false;
  armRecoveryTimer();
  link_->start();
  return okStatus();
}

void ExecutorDriver::stop() {
  if (stopped_) return;
  stopped_ = true;
  registered_ = false;
  registrationSent_ = false;
  recoveryTimer_.cancel();
  if (link_) link_->stop();
}

// Until the agent registers us again, this bounds how long we wait for it.
void ExecutorDriver::armRecoveryTimer() {
  recoveryTimer_.expires_after(options_.recoveryTimeout);
  recoveryTimer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_ || registered_) return;
    LOG_ERROR("executor: agent at " << options_.endpoint << " did not come back within the "
                                    << "recovery timeout; shutting down");
    stopped_ = true;
    link_->stop();
    if (!shutdownCalled_) {
      shutdownCalled_ = true;
      executor_.shutdown(*this, 0);
    }
  });
}

void ExecutorDriver::sendRegistration() {
  wire::Envelope e;
  auto* r = e.mutable_register_executor();
  r->set_executor_secret(options_.secret);
  r->set_framework_id(options_.frameworkId);
  r->set_executor_id(options_.executorId);
  for (const auto& [id, task] : tasks_) *r->add_tasks() = task;
  for (const auto& [id, status] : unacked_) *r->add_unacknowledged() = status;
  (void)link_->send(e);
  // From here on updates may follow on this link: the agent reads them after
  // the registration.
  registrationSent_ = true;
}

void ExecutorDriver::onMessage(const wire::Envelope& e) {
  if (Status valid = validateFromAgentToExecutor(e); !valid) {
    LOG_WARNING("executor: refused a message from the agent: " << valid.error().describe());
    return executor_.error(*this, "refused a message from the agent: " + valid.error().describe());
  }
  switch (e.body_case()) {
    case wire::Envelope::kExecutorRegistered: {
      registered_ = true;
      recoveryTimer_.cancel();
      link_->registered();
      if (!e.executor_registered().agent_id().empty()) {
        options_.agentId = e.executor_registered().agent_id();
      }
      executor_.registered(*this, e.executor_registered());
      // Updates sent before this registration went with RegisterExecutor.
      return;
    }
    case wire::Envelope::kLaunchTask: {
      const wire::TaskInfo& task = e.launch_task().task();
      if (!tasks_.count(task.task_id()) && tasks_.size() >= limits::kTasksPerExecutorMax) {
        wire::TaskStatus s;
        s.set_task_id(task.task_id());
        s.set_state(wire::TASK_ERROR);
        s.set_message("the executor runs its limit of " + std::to_string(limits::kTasksPerExecutorMax) + " tasks");
        (void)sendStatus(std::move(s));
        return;
      }
      tasks_[task.task_id()] = task;
      return executor_.launchTask(*this, task);
    }
    case wire::Envelope::kKillTask:
      return executor_.killTask(*this, e.kill_task().task_id(), e.kill_task().grace_s());
    case wire::Envelope::kStatusAcknowledgement:
      unacked_.erase(e.status_acknowledgement().update_id());
      return;
    case wire::Envelope::kShutdownExecutor:
      shutdownCalled_ = true;
      return executor_.shutdown(*this, e.shutdown_executor().grace_s());
    case wire::Envelope::kError:
      LOG_ERROR("executor: agent reports: " << e.error().message());
      return executor_.error(*this, e.error().message());
    default:
      LOG_DEBUG("executor: ignoring message field " << e.body_case());
  }
}

void ExecutorDriver::onClosed(const std::string& reason) {
  bool was = registered_;
  registered_ = false;
  registrationSent_ = false;
  if (stopped_) return;
  LOG_WARNING("executor: link to agent closed (" << reason << "); reconnecting for up to "
                                                 << std::chrono::duration<double>(options_.recoveryTimeout).count()
                                                 << " s");
  armRecoveryTimer();
  if (was) executor_.disconnected(*this);
}

std::string ExecutorDriver::nextUpdateId() {
  char seq[24];
  std::snprintf(seq, sizeof seq, "%012llu", static_cast<unsigned long long>(++updateSequence_));
  return updatePrefix_ + seq;
}

Status ExecutorDriver::sendStatus(wire::TaskStatus status) {
  if (status.task_id().empty()) return Error{"sendStatus: task_id is empty"};
  if (unacked_.size() >= options_.unacknowledgedMax) {
    return Error{"sendStatus: " + std::to_string(unacked_.size()) +
                 " updates wait for the agent's acknowledgement (limit reached)"};
  }
  status.set_framework_id(options_.frameworkId);
  status.set_executor_id(options_.executorId);
  status.set_agent_id(options_.agentId);
  status.set_update_id(nextUpdateId());
  if (status.timestamp_s() == 0) status.set_timestamp_s(wallClockSeconds());
  // What the agent would refuse is refused here, where the caller learns it.
  if (Status valid = validateTaskStatus(status, "sendStatus"); !valid) return valid;
  if (isTerminal(status.state())) tasks_.erase(status.task_id());
  auto& kept = unacked_[status.update_id()] = std::move(status);
  if (!registrationSent_ || !link_ || !link_->connected()) return okStatus();  // resent on reconnect
  wire::Envelope e;
  *e.mutable_status_update()->mutable_status() = kept;
  return link_->send(e);
}

}  // namespace allot
