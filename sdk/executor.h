// The allot executor library: what an executor author needs to run a
// framework's tasks on an agent (SPEC section 2, the paper's Table 1).
//
// The agent starts the executor with the environment of proto/FORMAT.md
// ("The executor link"). The executor implements Executor (the callbacks)
// and drives an ExecutorDriver (the action sendStatus) on its own Asio
// io_context:
//
//   class MyExecutor : public allot::Executor {
//     void launchTask(ExecutorDriver& d, const wire::TaskInfo& task) override {
//       start(task);
//       d.sendStatus(runningStatus(task));   // task_id + state is enough
//     }
//     void killTask(ExecutorDriver& d, const std::string& taskId, double graceS) override;
//     void shutdown(ExecutorDriver& d, double graceS) override;  // kill all, then d.stop()
//   };
//   auto options = ExecutorOptions::fromEnvironment();   // or an Error
//   ExecutorDriver driver(io, executor, *options);
//   driver.start();
//   io.run();
//
// Guarantees and contract:
// - Status updates are reliable: sendStatus() fills in the ids (framework,
//   executor, a fresh update_id) and keeps the update until the agent
//   acknowledges it; unacknowledged updates are resent after a reconnect.
// - The driver tracks the tasks it was given until their terminal update is
//   sent; they are reported in RegisterExecutor after a reconnect.
// - Connection loss (e.g. the agent restarts): the driver reconnects with
//   backoff to the same endpoint for up to recoveryTimeout; tasks keep
//   running meanwhile. If the agent does not come back in time, shutdown()
//   is called and the executor should end its tasks and exit.
// - quiescent() tells when every task is terminal and every update acked:
//   an executor may exit then without losing an update.
// - Thread: every method and callback on the io_context's thread; callbacks
//   may call any action. The driver must outlive io_context::run().
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/asio.h"
#include "base/clock.h"
#include "base/result.h"
#include "proto/allot.pb.h"

namespace allot {

class ExecutorDriver;

class Executor {
 public:
  virtual ~Executor() = default;

  // The agent accepted the registration (also after a reconnect).
  virtual void registered(ExecutorDriver& driver, const wire::ExecutorRegistered& info) {}
  // The link to the agent dropped; the driver is reconnecting.
  virtual void disconnected(ExecutorDriver& driver) {}
  virtual void launchTask(ExecutorDriver& driver, const wire::TaskInfo& task) = 0;
  // Kill one task: SIGTERM, then SIGKILL after graceS (0: the task's own
  // kill_grace_s or a default). Report TASK_KILLED when it is gone.
  virtual void killTask(ExecutorDriver& driver, const std::string& taskId, double graceS) = 0;
  // Kill every task and exit once their updates are acknowledged (or at once
  // when the agent is gone for good).
  virtual void shutdown(ExecutorDriver& driver, double graceS) = 0;
  // The agent reported a problem, or sent a message that fails validation
  // (proto/validate.h; it is dropped, nothing else sees it). The driver
  // keeps running.
  virtual void error(ExecutorDriver& driver, const std::string& message) {}
};

struct ExecutorOptions {
  std::string endpoint;  // "unix:/path" or "tcp:HOST:PORT"
  std::string agentId;
  std::string frameworkId;
  std::string executorId;
  std::string sandboxDir;
  std::string secret;  // ALLOT_EXECUTOR_SECRET: proves to the agent it launched us
  Duration recoveryTimeout = std::chrono::seconds(60);
  Duration reconnectMin = std::chrono::milliseconds(50);
  Duration reconnectMax = std::chrono::seconds(2);
  // Named limit on updates kept for the agent; sendStatus() fails past it.
  size_t unacknowledgedMax = 100000;

  // Reads the ALLOT_* variables of proto/FORMAT.md; an Error names the
  // missing or malformed one.
  static Result<ExecutorOptions> fromEnvironment();
};

class ExecutorDriver {
 public:
  ExecutorDriver(asio::io_context& io, Executor& executor, ExecutorOptions options);
  ~ExecutorDriver();
  ExecutorDriver(const ExecutorDriver&) = delete;
  ExecutorDriver& operator=(const ExecutorDriver&) = delete;

  // Starts connecting. Fails only on a malformed endpoint.
  Status start();
  // Closes the link (after flushing what is queued) and stops reconnecting.
  void stop();

  // Sends (and keeps until acknowledged) one task status. task_id and state
  // are required; ids, update_id and timestamp are filled in.
  Status sendStatus(wire::TaskStatus status);

  bool connected() const { return registered_; }
  bool stopped() const { return stopped_; }
  // True when no task is live and every update has been acknowledged.
  bool quiescent() const { return tasks_.empty() && unacked_.empty(); }
  size_t liveTasks() const { return tasks_.size(); }
  size_t unacknowledged() const { return unacked_.size(); }
  const ExecutorOptions& options() const { return options_; }

 private:
  void onMessage(const wire::Envelope& e);
  void onClosed(const std::string& reason);
  void armRecoveryTimer();
  void sendRegistration();
  std::string nextUpdateId();

  asio::io_context& io_;
  Executor& executor_;
  ExecutorOptions options_;
  std::unique_ptr<class ReconnectingLink> link_;
  asio::steady_timer recoveryTimer_;
  std::map<std::string, wire::TaskInfo> tasks_;  // live tasks by id
  std::map<std::string, wire::TaskStatus> unacked_;  // by update_id, in id order
  uint64_t updateSequence_ = 0;
  std::string updatePrefix_;
  bool registered_ = false;
  bool registrationSent_ = false;
  bool stopped_ = true;
  bool shutdownCalled_ = false;
};

}  // namespace allot
