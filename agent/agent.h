// Agent: one allot-agent. Owns the stores under <work-dir>/meta, the
// executor manager and the link to the master, and routes between them:
//   master RunTask / KillTask / ShutdownFramework -> ExecutorManager
//   executor and agent updates -> UpdateStore (persisted) -> master
//   master StatusAcknowledgement -> UpdateStore (forgotten)
// Pending updates are resent after every (re)registration and every
// statusRetry until acknowledged. Sandboxes of ended executors older than
// sandboxMaxAge are removed periodically.
//
// The loop's stalls are measured from start() (LoopStallMeter, exported as
// allot_agent_loop_lateness_seconds); a tick 10 ms late or more is
// attributed to the loop section (agent/agent_sections.h) that took the most
// time since the previous tick: allot_agent_loop_late_ticks_total{section}
// and a log line (at most once a second) naming the top three.
//
// Life cycle: Agent a(io, config, launcher, isolators); a.start(); io.run().
// Thread: the io_context thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent_sections.h"
#include "agent/checkpoint.h"
#include "agent/executor_manager.h"
#include "agent/master_link.h"
#include "agent/metrics.h"
#include "agent/status_updates.h"
#include "base/asio.h"
#include "diag/loop_stall_meter.h"
#include "proto/resources.h"

namespace allot {

// Who may read every task's sandbox besides the task's own framework
// principal (agent/files_api.h): the master's ACLs as the last
// AgentRegistered told them; unknown before the first registration.
struct SandboxReaders {
  bool known = false;
  bool aclsFromFile = false;
  std::vector<std::string> operators;  // principals of `operate` rules; "*": any
};

struct AgentConfig {
  std::string master;  // "host:port" or "zk://.../path"
  std::vector<Endpoint> shards;  // non-empty: through these link shards instead
  std::string shardsZk;          // zk://.../path: through the link shards listed there
  std::shared_ptr<ssl::context> tls;  // null: plaintext to the master
  std::string workDir;  // absolute
  std::string hostname;
  Resources resources;
  std::vector<wire::Attribute> attributes;
  Duration statusRetry = std::chrono::seconds(10);
  Duration usageInterval = std::chrono::seconds(10);  // UsageReport to the master
  std::chrono::seconds sandboxMaxAge{7 * 24 * 3600};
  std::string httpAddress;  // "host:port" of the HTTP endpoints; empty: none
  ExecutorManagerOptions executors;  // workDir is filled from workDir
};

class Agent {
 public:
  Agent(asio::io_context& io, AgentConfig config, Launcher& launcher,
        std::vector<std::unique_ptr<Isolator>>& isolators);

  // Loads the stores, binds the executor socket, re-attaches to executors
  // of a previous run and starts connecting to the master.
  Status start();
  void stop();

  const std::string& agentId() const { return agentId_; }
  const ExecutorManager& executors() const { return *manager_; }
  size_t pendingUpdates() const { return updates_.size(); }
  // For the operator endpoints (agent/http_api.h).
  const AgentConfig& config() const { return config_; }
  bool registered() const { return link_->registered(); }
  AgentMetrics& metrics() { return metrics_; }
  const SandboxReaders& sandboxReaders() const { return sandboxReaders_; }
  // Where the HTTP endpoints listen, reported at every (re-)registration.
  void setHttpAddress(std::string address) { config_.httpAddress = std::move(address); }
  // Where the loop's time goes, for handlers outside the agent (HTTP).
  AgentSections& loopSections() { return sections_; }
  // How late the loop ran due work (diag/loop_stall_meter.h), since start().
  const LoopStallMeter::Stats& loopStalls() const { return loopMeter_.stats(); }
  // Called after every (re-)registration with a master (sd_notify READY).
  void setRegisteredHook(std::function<void(const std::string& agentId)> hook) {
    registeredHook_ = std::move(hook);
  }

 private:
  void onUpdate(const wire::TaskStatus& status, std::function<void(Status)> persisted);
  void onRegistered(const wire::AgentRegistered& m);
  void onMasterMessage(wire::Envelope& e);
  void onRefused(const wire::Envelope& e, const Error& why);
  void buildRegistration(wire::RegisterAgent* r);
  void addUnacknowledgedEndings(wire::RegisterAgent* r);
  void resendPending();
  void scheduleRetry();
  void scheduleGc();
  void scheduleUsage();
  void loopTicked(double lateS);

  asio::io_context& io_;
  AgentConfig config_;
  std::string agentId_;
  std::string agentSecret_;  // from AgentRegistered, checkpointed beside the id
  UpdateStore updates_;
  CheckpointStore checkpoints_;
  std::unique_ptr<ExecutorManager> manager_;
  std::unique_ptr<MasterLink> link_;
  asio::steady_timer retryTimer_;
  asio::steady_timer gcTimer_;
  asio::steady_timer usageTimer_;
  AgentMetrics metrics_;
  AgentSections sections_;
  LoopStallMeter loopMeter_;
  std::chrono::steady_clock::time_point lastLateLog_;
  std::function<void(const std::string&)> registeredHook_;
  SandboxReaders sandboxReaders_;
};

}  // namespace allot
