#include "agent/agent.h"

#include <sys/stat.h>
#include "proto/task_state.h"

#include <filesystem>
#include <map>
#include <set>

#include "agent/gc.h"
#include "base/log.h"
#include "proto/input_limits.h"
#include "proto/resources.h"

namespace allot {
namespace {

// What validateFromMaster leaves to Resources::fromWire: names, duplicates,
// signs, magnitudes and ranges of the task's and its executor's resources.
Status checkResources(const wire::TaskInfo& task) {
  if (auto r = Resources::fromWire(task.resources()); !r) {
    return Error{"RunTask.task.resources: " + r.error().describe()};
  }
  if (auto r = Resources::fromWire(task.executor().resources()); !r) {
    return Error{"RunTask.task.executor.resources: " + r.error().describe()};
  }
  return okStatus();
}

}  // namespace

// The stall meter's period while the loop is idle (diag/loop_stall_meter.h:
// resting); its 5 ms tick cost the idle agent 1.1 % of a core.
constexpr std::chrono::milliseconds kLoopMeterIdlePeriod{100};

Agent::Agent(asio::io_context& io, AgentConfig config, Launcher& launcher,
             std::vector<std::unique_ptr<Isolator>>& isolators)
    : io_(io),
      config_(std::move(config)),
      updates_(config_.workDir + "/meta/updates", kUpdatesPerFrameworkMax, &io),
      checkpoints_(config_.workDir + "/meta"),
      retryTimer_(io),
      gcTimer_(io),
      usageTimer_(io),
      sections_(isolators),
      loopMeter_(io, LoopStallMeterOptions{.idlePeriod = kLoopMeterIdlePeriod},
                 [this](double lateS) { loopTicked(lateS); }) {
  config_.executors.workDir = config_.workDir;
  manager_ = std::make_unique<ExecutorManager>(
      io, launcher, isolators, checkpoints_, config_.executors,
      ExecutorManager::Callbacks{[this](const wire::TaskStatus& s, std::function<void(Status)> done) {
        onUpdate(s, std::move(done));
      }});
  MasterLink::Options lo;
  lo.master = config_.master;
  lo.shards = config_.shards;
  lo.shardsZk = config_.shardsZk;
  lo.shardKey = config_.hostname + ":" + config_.workDir;
  lo.tls = config_.tls;
  lo.name = "allot-agent " + config_.hostname;
  MasterLink::Callbacks lc;
  lc.buildRegistration = [this](wire::RegisterAgent* r) { buildRegistration(r); };
  lc.onRegistered = [this](const wire::AgentRegistered& m) { onRegistered(m); };
  lc.onMessage = [this](wire::Envelope& e) { onMasterMessage(e); };
  lc.onRefused = [this](const wire::Envelope& e, const Error& why) { onRefused(e, why); };
  link_ = std::make_unique<MasterLink>(io, lo, lc);
  manager_->setLoopSections(&sections_);
  // Each handler the agent times wakes a resting stall meter.
  sections_.sections().onOutermostStart([this] { loopMeter_.wake(); });
  metrics_.loop().exportSections(&sections_.sections());
  updates_.timeResultsAs(&sections_.sections(), static_cast<LoopSections::Id>(AgentSection::kUpdateFiles));
}

void Agent::loopTicked(double lateS) {
  auto taken = metrics_.loop().meterTicked(loopMeter_, lateS, sections_.sections());
  if (!taken) return;
  auto now = std::chrono::steady_clock::now();
  if (now - lastLateLog_ < std::chrono::seconds(1)) return;
  lastLateLog_ = now;
  const char* untimed = loopMeter_.lastSplit().untimedCause(lateS * 1000);
  LOG_WARNING("loop tick " << lateS * 1000 << " ms late; timed since the previous tick: " << taken->describe()
                           << (taken->sections.empty() ? std::string(" (") + untimed + ")" : ""));
}

Status Agent::start() {
  std::error_code ec;
  std::filesystem::create_directories(config_.workDir + "/sandboxes", ec);
  if (ec) return Error{"create " + config_.workDir + "/sandboxes: " + ec.message()};
  if (auto st = checkpoints_.init(); !st) return st;
  // Executors may search the work dir and the sandboxes dir but list neither
  // (no other framework's sandbox names); the agent's records stay its own.
  for (auto [dir, mode] : {std::pair{config_.workDir, 0711}, {config_.workDir + "/sandboxes", 0711},
                           {config_.workDir + "/meta", 0700}}) {
    if (::chmod(dir.c_str(), static_cast<mode_t>(mode)) != 0) return Error::fromErrno("chmod " + dir);
  }
  if (auto st = updates_.load(); !st) return st;
  auto id = checkpoints_.loadAgentId();
  if (!id) return id.error();
  agentId_ = *id;
  auto secret = checkpoints_.loadAgentSecret();
  if (!secret) return secret.error();
  agentSecret_ = *secret;
  manager_->setAgentId(agentId_);
  if (auto st = manager_->listen(); !st) return st;
  auto recovered = checkpoints_.loadExecutors();
  if (!recovered.empty() || updates_.size() > 0) {
    LOG_INFO("recovering " << recovered.size() << " executors and " << updates_.size()
                           << " unacknowledged updates from " << config_.workDir << "/meta");
  }
  manager_->recover(std::move(recovered));
  if (auto st = link_->start(); !st) return st;
  loopMeter_.start();
  scheduleRetry();
  scheduleGc();
  scheduleUsage();
  return okStatus();
}

void Agent::stop() {
  link_->stop();
  retryTimer_.cancel();
  gcTimer_.cancel();
  usageTimer_.cancel();
  loopMeter_.stop();
  const auto& loop = loopMeter_.stats();
  LOG_INFO("loop: longest lateness " << loop.maxLateMs << " ms (" << loop.maxLateCpuWaitMs
                                     << " ms waiting for a CPU), " << loop.lateOver10Ms << " of " << loop.ticks
                                     << " ticks 10 ms late or more; longest less the host's steal "
                                     << loop.maxLessStealMs << " ms, host steal in late ticks " << loop.lateStealMs
                                     << " ms; that tick: " << loop.maxLateSplit.describe());
}

void Agent::buildRegistration(wire::RegisterAgent* r) {
  auto* info = r->mutable_info();
  info->set_id(agentId_);
  r->set_agent_secret(agentSecret_);
  info->set_hostname(config_.hostname);
  info->set_http_address(config_.httpAddress);
  config_.resources.toWire(info->mutable_resources());
  for (const auto& a : config_.attributes) *info->add_attributes() = a;
  manager_->fillRegistration(r);
  addUnacknowledgedEndings(r);
}

// A task whose terminal update the framework has not acknowledged is
// reported as still running: a master that never saw that update (the
// agent was cut off when the task ended) would otherwise declare it LOST
// just before the resent terminal update arrives.
void Agent::addUnacknowledgedEndings(wire::RegisterAgent* r) {
  std::set<std::pair<std::string, std::string>> reported;  // framework, task
  std::map<std::pair<std::string, std::string>, int> executorIndex;  // framework, executor
  for (int i = 0; i < r->executors_size(); ++i) {
    const auto& ex = r->executors(i);
    executorIndex[{ex.info().framework_id(), ex.info().executor_id()}] = i;
    for (const auto& t : ex.tasks()) reported.insert({ex.info().framework_id(), t.task_id()});
  }
  for (const auto& s : updates_.pending()) {
    if (!isTerminal(s.state()) || s.executor_id().empty()) continue;
    if (!reported.insert({s.framework_id(), s.task_id()}).second) continue;
    auto key = std::make_pair(s.framework_id(), s.executor_id());
    auto it = executorIndex.find(key);
    if (it == executorIndex.end()) {
      wire::ExecutorState* ex = r->add_executors();
      ex->mutable_info()->set_framework_id(s.framework_id());
      ex->mutable_info()->set_executor_id(s.executor_id());
      it = executorIndex.emplace(key, r->executors_size() - 1).first;
    }
    wire::ExecutorState* ex = r->mutable_executors(it->second);
    ex->add_tasks()->set_task_id(s.task_id());
    wire::TaskStatus* latest = ex->add_latest();
    latest->set_task_id(s.task_id());
    latest->set_framework_id(s.framework_id());
    latest->set_executor_id(s.executor_id());
    latest->set_state(wire::TASK_RUNNING);
  }
}

void Agent::onRegistered(const wire::AgentRegistered& m) {
  // The secret first: an id checkpointed without its secret could never
  // be re-registered.
  if (m.agent_secret() != agentSecret_) {
    agentSecret_ = m.agent_secret();
    if (auto st = checkpoints_.saveAgentSecret(agentSecret_); !st) {
      LOG_ERROR("saving agent secret: " << st.error().describe());
    }
  }
  sandboxReaders_.known = true;
  sandboxReaders_.aclsFromFile = m.acls_from_file();
  // Bounded by the master's frame size; a few rules in practice.
  sandboxReaders_.operators.assign(m.operate_principals().begin(), m.operate_principals().end());
  bool fresh = agentId_ != m.agent_id();
  if (fresh) {
    if (!agentId_.empty()) LOG_WARNING("master gave a new agent id " << m.agent_id() << " (was " << agentId_ << ")");
    agentId_ = m.agent_id();
    manager_->setAgentId(agentId_);
    if (auto st = checkpoints_.saveAgentId(agentId_); !st) LOG_ERROR("saving agent id: " << st.error().describe());
  }
  LOG_INFO("registered with master " << m.master_id() << " as agent " << agentId_ << " ("
                                     << manager_->executorCount() << " executors, "
                                     << manager_->liveTaskCount() << " tasks)");
  resendPending();
  if (registeredHook_) registeredHook_(agentId_);
}

// A refused RunTask whose ids are usable is answered with TASK_ERROR, so
// the framework learns why instead of waiting; other refusals are only
// logged (by the link): the master has nothing to wait for.
void Agent::onRefused(const wire::Envelope& e, const Error& why) {
  if (!e.has_run_task()) return;
  const wire::RunTask& m = e.run_task();
  auto usable = [](const std::string& id) { return !id.empty() && id.size() <= limits::kIdBytesMax; };
  if (!usable(m.framework().id()) || !usable(m.task().task_id())) return;
  manager_->refuseTask(m.framework().id(), m.task().task_id(), wire::REASON_INVALID_LAUNCH,
                       "refused by the agent: " + why.describe());
}

void Agent::onMasterMessage(wire::Envelope& e) {
  auto timer = sections_.time(AgentSection::kMasterMessage);
  switch (e.body_case()) {
    case wire::Envelope::kRunTask:
      if (Status st = checkResources(e.run_task().task()); !st) {
        return manager_->refuseTask(e.run_task().framework().id(), e.run_task().task().task_id(),
                                    wire::REASON_INVALID_LAUNCH, "refused by the agent: " + st.error().describe());
      }
      metrics_.taskRequested(e.run_task().task().executor().framework_id().empty()
                                 ? e.run_task().framework().id()
                                 : e.run_task().task().executor().framework_id(),
                             e.run_task().task().task_id());
      return manager_->runTask(e.run_task().framework(), std::move(*e.mutable_run_task()->mutable_task()),
                               e.run_task().allow_root());
    case wire::Envelope::kKillTask:
      return manager_->killTask(e.kill_task());
    case wire::Envelope::kStatusAcknowledgement: {
      const auto& a = e.status_acknowledgement();
      auto r = updates_.acknowledge(a.framework_id(), a.update_id());
      if (!r) LOG_ERROR("acknowledgement of " << a.update_id() << ": " << r.error().describe());
      return;
    }
    case wire::Envelope::kShutdownFramework:
      LOG_INFO("master removed framework " << e.shutdown_framework().framework_id());
      return manager_->shutdownFramework(e.shutdown_framework().framework_id());
    default:
      LOG_DEBUG("ignoring message field " << e.body_case() << " from the master");
  }
}

// Forwarded to the master once durable: the framework never learns a state
// the agent could still lose.
void Agent::onUpdate(const wire::TaskStatus& status, std::function<void(Status)> persisted) {
  LOG_DEBUG("task " << status.task_id() << " of framework " << status.framework_id() << " is "
                    << wire::TaskState_Name(status.state()));
  auto timer = sections_.time(AgentSection::kStatusUpdate);
  metrics_.statusUpdate(status);
  Status st = updates_.add(status, [this, status, persisted = std::move(persisted)](Status st) {
    auto timer = sections_.time(AgentSection::kStatusUpdate);
    if (st && link_->registered()) {
      wire::Envelope e;
      *e.mutable_status_update()->mutable_status() = status;
      (void)link_->send(e);
    }
    persisted(st);
  });
  if (!st) LOG_ERROR("status update " << status.update_id() << ": " << st.error().describe());
}

void Agent::resendPending() {
  if (!link_->registered()) return;
  for (const auto& s : updates_.pending()) {
    wire::Envelope e;
    *e.mutable_status_update()->mutable_status() = s;
    e.mutable_status_update()->mutable_status()->set_agent_id(agentId_);
    (void)link_->send(e);
  }
}

void Agent::scheduleRetry() {
  retryTimer_.expires_after(config_.statusRetry);
  retryTimer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    if (updates_.size() > 0) {
      LOG_DEBUG("resending " << updates_.size() << " unacknowledged updates");
      resendPending();
    }
    scheduleRetry();
  });
}

// Every executor's usage as its isolators measure it (cpu time, memory,
// I/O, processes), to the master; nothing is kept for a master that is
// away: the next report replaces it.
void Agent::scheduleUsage() {
  usageTimer_.expires_after(config_.usageInterval);
  usageTimer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    if (link_->registered()) {
      auto timer = sections_.time(AgentSection::kUsage);
      wire::Envelope e;
      manager_->collectUsage(e.mutable_usage_report());
      if (e.usage_report().executors_size() > 0) (void)link_->send(e);
    }
    scheduleUsage();
  });
}

void Agent::scheduleGc() {
  auto interval = std::clamp<std::chrono::seconds>(config_.sandboxMaxAge / 4, std::chrono::seconds(1),
                                                   std::chrono::seconds(3600));
  gcTimer_.expires_after(interval);
  gcTimer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    manager_->collectSandboxes(config_.sandboxMaxAge);
    scheduleGc();
  });
}

}  // namespace allot
