#include "proto/validate.h"

#include <cmath>
#include <string>

#include "proto/input_limits.h"

namespace allot {
namespace {

using namespace limits;

std::string indexed(const std::string& where, int i) { return where + "[" + std::to_string(i) + "]"; }

Status tooLong(const std::string& where, size_t size, size_t limit) {
  return Error{where + ": " + std::to_string(size) + " bytes (limit " + std::to_string(limit) + ")"};
}

Status tooMany(const std::string& where, size_t count, size_t limit) {
  return Error{where + ": " + std::to_string(count) + " entries (limit " + std::to_string(limit) +
               ")"};
}

Status bytes(const std::string& value, size_t limit, const std::string& where) {
  if (value.size() > limit) return tooLong(where, value.size(), limit);
  return okStatus();
}

template <typename List>
Status count(const List& list, size_t limit, const std::string& where) {
  if (static_cast<size_t>(list.size()) > limit) return tooMany(where, list.size(), limit);
  return okStatus();
}

Status idList(const google::protobuf::RepeatedPtrField<std::string>& ids, size_t limit,
              const std::string& where) {
  if (auto st = count(ids, limit, where); !st) return st;
  for (int i = 0; i < ids.size(); ++i) {
    if (auto st = bytes(ids[i], kIdBytesMax, indexed(where, i)); !st) return st;
  }
  return okStatus();
}

Status number(double value, double max, const std::string& where) {
  if (!std::isfinite(value) || value < 0 || value > max) {
    return Error{where + ": " + std::to_string(value) + " is not in [0, " + std::to_string(max) + "]"};
  }
  return okStatus();
}

// Chains checks: the first failure wins.
#define ALLOT_TRY(expr)           \
  do {                            \
    if (Status st_ = (expr); !st_) return st_; \
  } while (0)

Status attributes(const google::protobuf::RepeatedPtrField<wire::Attribute>& list,
                  const std::string& where) {
  ALLOT_TRY(count(list, kAttributesMax, where));
  for (int i = 0; i < list.size(); ++i) {
    ALLOT_TRY(bytes(list[i].name(), kAttributeBytesMax, indexed(where, i) + ".name"));
    ALLOT_TRY(bytes(list[i].value(), kAttributeBytesMax, indexed(where, i) + ".value"));
  }
  return okStatus();
}

Status command(const wire::CommandInfo& c, const std::string& where) {
  ALLOT_TRY(bytes(c.shell(), kShellBytesMax, where + ".shell"));
  ALLOT_TRY(count(c.argv(), kArgvCountMax, where + ".argv"));
  ALLOT_TRY(count(c.environment(), kEnvironmentCountMax, where + ".environment"));
  ALLOT_TRY(bytes(c.user(), kUserBytesMax, where + ".user"));
  size_t total = 0;
  for (const auto& a : c.argv()) total += a.size();
  for (const auto& [k, v] : c.environment()) total += k.size() + v.size();
  if (total > kCommandBytesMax) return tooLong(where + " argv+environment", total, kCommandBytesMax);
  return okStatus();
}

Status executorInfo(const wire::ExecutorInfo& ex, const std::string& where) {
  ALLOT_TRY(bytes(ex.executor_id(), kIdBytesMax, where + ".executor_id"));
  ALLOT_TRY(bytes(ex.framework_id(), kIdBytesMax, where + ".framework_id"));
  ALLOT_TRY(bytes(ex.name(), kNameBytesMax, where + ".name"));
  ALLOT_TRY(command(ex.command(), where + ".command"));
  return validateResources(ex.resources(), where + ".resources");
}

Status filters(const wire::StandingFilters& f, const std::string& where) {
  ALLOT_TRY(idList(f.agent_ids(), kFilterAgentIdsMax, where + ".agent_ids"));
  return validateResources(f.min_free(), where + ".min_free");
}

Status refuse(const wire::Filters& f, const std::string& where) {
  if (!f.has_refuse_seconds()) return okStatus();
  return number(f.refuse_seconds(), kTimeoutSecondsMax, where + ".refuse_seconds");
}

Status usage(const wire::ResourceUsage& u, const std::string& where) {
  return number(u.cpu_time_s(), 1e15, where + ".cpu_time_s");
}

Status registerFramework(const wire::RegisterFramework& m) {
  ALLOT_TRY(validateFrameworkInfo(m.info(), "RegisterFramework.info"));
  ALLOT_TRY(filters(m.filters(), "RegisterFramework.filters"));
  return bytes(m.framework_secret(), kSecretBytesMax, "RegisterFramework.framework_secret");
}

Status acceptOffers(const wire::AcceptOffers& m) {
  ALLOT_TRY(idList(m.offer_ids(), kOfferIdsPerMessageMax, "AcceptOffers.offer_ids"));
  ALLOT_TRY(count(m.tasks(), kTasksPerAcceptMax, "AcceptOffers.tasks"));
  for (int i = 0; i < m.tasks_size(); ++i) {
    ALLOT_TRY(validateTaskInfo(m.tasks(i), indexed("AcceptOffers.tasks", i)));
  }
  return refuse(m.filters(), "AcceptOffers.filters");
}

Status killTask(const wire::KillTask& m, const std::string& where) {
  ALLOT_TRY(bytes(m.framework_id(), kIdBytesMax, where + ".framework_id"));
  ALLOT_TRY(bytes(m.task_id(), kIdBytesMax, where + ".task_id"));
  ALLOT_TRY(bytes(m.agent_id(), kIdBytesMax, where + ".agent_id"));
  return number(m.grace_s(), kKillGraceSecondsMax, where + ".grace_s");
}

Status acknowledge(const wire::Acknowledge& m) {
  ALLOT_TRY(bytes(m.framework_id(), kIdBytesMax, "Acknowledge.framework_id"));
  ALLOT_TRY(bytes(m.agent_id(), kIdBytesMax, "Acknowledge.agent_id"));
  ALLOT_TRY(bytes(m.task_id(), kIdBytesMax, "Acknowledge.task_id"));
  return bytes(m.update_id(), kIdBytesMax, "Acknowledge.update_id");
}

Status reconcile(const wire::Reconcile& m) {
  ALLOT_TRY(count(m.tasks(), kReconcileTasksMax, "Reconcile.tasks"));
  for (int i = 0; i < m.tasks_size(); ++i) {
    ALLOT_TRY(bytes(m.tasks(i).task_id(), kIdBytesMax, indexed("Reconcile.tasks", i) + ".task_id"));
    ALLOT_TRY(bytes(m.tasks(i).agent_id(), kIdBytesMax, indexed("Reconcile.tasks", i) + ".agent_id"));
  }
  return okStatus();
}

Status executorState(const wire::ExecutorState& ex, const std::string& where) {
  ALLOT_TRY(executorInfo(ex.info(), where + ".info"));
  ALLOT_TRY(count(ex.latest(), static_cast<size_t>(ex.tasks_size()), where + ".latest"));
  for (int i = 0; i < ex.tasks_size(); ++i) {
    ALLOT_TRY(validateTaskInfo(ex.tasks(i), indexed(where + ".tasks", i)));
  }
  for (int i = 0; i < ex.latest_size(); ++i) {
    ALLOT_TRY(validateTaskStatus(ex.latest(i), indexed(where + ".latest", i)));
  }
  return okStatus();
}

Status registerAgent(const wire::RegisterAgent& m) {
  const std::string where = "RegisterAgent";
  ALLOT_TRY(bytes(m.info().id(), kIdBytesMax, where + ".info.id"));
  ALLOT_TRY(bytes(m.info().hostname(), kNameBytesMax, where + ".info.hostname"));
  ALLOT_TRY(validateResources(m.info().resources(), where + ".info.resources"));
  ALLOT_TRY(attributes(m.info().attributes(), where + ".info.attributes"));
  ALLOT_TRY(bytes(m.agent_secret(), kSecretBytesMax, where + ".agent_secret"));
  ALLOT_TRY(count(m.frameworks(), kFrameworksPerAgentMax, where + ".frameworks"));
  for (int i = 0; i < m.frameworks_size(); ++i) {
    ALLOT_TRY(validateFrameworkInfo(m.frameworks(i), indexed(where + ".frameworks", i)));
  }
  ALLOT_TRY(count(m.executors(), kExecutorsPerAgentMax, where + ".executors"));
  size_t tasks = 0;
  for (const auto& ex : m.executors()) tasks += ex.tasks_size();
  if (tasks > kTasksPerAgentMax) return tooMany(where + ".executors[*].tasks", tasks, kTasksPerAgentMax);
  for (int i = 0; i < m.executors_size(); ++i) {
    ALLOT_TRY(executorState(m.executors(i), indexed(where + ".executors", i)));
  }
  return okStatus();
}

Status usageReport(const wire::UsageReport& m) {
  ALLOT_TRY(count(m.executors(), kExecutorsPerAgentMax, "UsageReport.executors"));
  for (int i = 0; i < m.executors_size(); ++i) {
    const std::string where = indexed("UsageReport.executors", i);
    ALLOT_TRY(bytes(m.executors(i).framework_id(), kIdBytesMax, where + ".framework_id"));
    ALLOT_TRY(bytes(m.executors(i).executor_id(), kIdBytesMax, where + ".executor_id"));
    ALLOT_TRY(usage(m.executors(i).usage(), where + ".usage"));
  }
  return okStatus();
}

Status registerExecutor(const wire::RegisterExecutor& m) {
  ALLOT_TRY(bytes(m.framework_id(), kIdBytesMax, "RegisterExecutor.framework_id"));
  ALLOT_TRY(bytes(m.executor_id(), kIdBytesMax, "RegisterExecutor.executor_id"));
  ALLOT_TRY(bytes(m.executor_secret(), kSecretBytesMax, "RegisterExecutor.executor_secret"));
  ALLOT_TRY(count(m.tasks(), kTasksPerExecutorMax, "RegisterExecutor.tasks"));
  ALLOT_TRY(count(m.unacknowledged(), kTasksPerExecutorMax, "RegisterExecutor.unacknowledged"));
  for (int i = 0; i < m.tasks_size(); ++i) {
    ALLOT_TRY(validateTaskInfo(m.tasks(i), indexed("RegisterExecutor.tasks", i)));
  }
  for (int i = 0; i < m.unacknowledged_size(); ++i) {
    ALLOT_TRY(validateTaskStatus(m.unacknowledged(i), indexed("RegisterExecutor.unacknowledged", i)));
  }
  return okStatus();
}

Status nonEmpty(const std::string& value, const std::string& where) {
  if (value.empty()) return Error{where + ": empty"};
  return okStatus();
}

Status errorMessage(const wire::ErrorMessage& m) {
  return bytes(m.message(), kErrorMessageBytesMax, "ErrorMessage.message");
}

Status agentRegistered(const wire::AgentRegistered& m) {
  ALLOT_TRY(nonEmpty(m.agent_id(), "AgentRegistered.agent_id"));
  ALLOT_TRY(bytes(m.agent_id(), kIdBytesMax, "AgentRegistered.agent_id"));
  ALLOT_TRY(bytes(m.master_id(), kIdBytesMax, "AgentRegistered.master_id"));
  ALLOT_TRY(bytes(m.agent_secret(), kSecretBytesMax, "AgentRegistered.agent_secret"));
  double interval = m.heartbeat_interval_s();
  ALLOT_TRY(number(interval, kTimeoutSecondsMax, "AgentRegistered.heartbeat_interval_s"));
  if (interval > 0 && interval < kHeartbeatIntervalSecondsMin) {
    return Error{"AgentRegistered.heartbeat_interval_s: " + std::to_string(interval) + " is below " +
                 std::to_string(kHeartbeatIntervalSecondsMin)};
  }
  return okStatus();
}

// The ids come first: a RunTask refused for anything else is answered with
// TASK_ERROR for that task, which needs usable ids.
Status runTask(const wire::RunTask& m) {
  ALLOT_TRY(nonEmpty(m.framework().id(), "RunTask.framework.id"));
  ALLOT_TRY(bytes(m.framework().id(), kIdBytesMax, "RunTask.framework.id"));
  ALLOT_TRY(nonEmpty(m.task().task_id(), "RunTask.task.task_id"));
  ALLOT_TRY(bytes(m.task().task_id(), kIdBytesMax, "RunTask.task.task_id"));
  ALLOT_TRY(validateFrameworkInfo(m.framework(), "RunTask.framework"));
  return validateTaskInfo(m.task(), "RunTask.task");
}

Status offer(const wire::Offer& o, const std::string& where) {
  ALLOT_TRY(bytes(o.offer_id(), kIdBytesMax, where + ".offer_id"));
  ALLOT_TRY(bytes(o.framework_id(), kIdBytesMax, where + ".framework_id"));
  ALLOT_TRY(bytes(o.agent_id(), kIdBytesMax, where + ".agent_id"));
  ALLOT_TRY(bytes(o.hostname(), kNameBytesMax, where + ".hostname"));
  ALLOT_TRY(validateResources(o.resources(), where + ".resources"));
  ALLOT_TRY(attributes(o.attributes(), where + ".attributes"));
  return idList(o.executor_ids(), kExecutorsPerAgentMax, where + ".executor_ids");
}

Status resourceOffers(const wire::ResourceOffers& m) {
  ALLOT_TRY(count(m.offers(), kOffersPerMessageMax, "ResourceOffers.offers"));
  for (int i = 0; i < m.offers_size(); ++i) ALLOT_TRY(offer(m.offers(i), indexed("ResourceOffers.offers", i)));
  return okStatus();
}

Status shareUpdate(const wire::ShareUpdate& m) {
  ALLOT_TRY(validateResources(m.guaranteed(), "ShareUpdate.guaranteed"));
  ALLOT_TRY(validateResources(m.allocated(), "ShareUpdate.allocated"));
  return number(m.dominant_share(), 1e6, "ShareUpdate.dominant_share");
}

Status unexpected(const wire::Envelope& e, const char* from) {
  return Error{std::string("unexpected message from ") + from + " (field " +
               std::to_string(e.body_case()) + ")"};
}

}  // namespace

Status validateResources(const google::protobuf::RepeatedPtrField<wire::Resource>& list,
                         const std::string& where) {
  ALLOT_TRY(count(list, kResourcesPerListMax, where));
  for (int i = 0; i < list.size(); ++i) {
    const wire::Resource& r = list[i];
    ALLOT_TRY(bytes(r.name(), kResourceNameBytesMax, indexed(where, i) + ".name"));
    ALLOT_TRY(count(r.ranges(), kRangesPerResourceMax, indexed(where, i) + ".ranges"));
    if (!std::isfinite(r.scalar())) return Error{indexed(where, i) + ".scalar: not a finite number"};
  }
  // Names, duplicates, signs and magnitudes: Resources::fromWire.
  return okStatus();
}

Status validateFrameworkInfo(const wire::FrameworkInfo& info, const std::string& where) {
  ALLOT_TRY(bytes(info.id(), kIdBytesMax, where + ".id"));
  ALLOT_TRY(bytes(info.name(), kNameBytesMax, where + ".name"));
  ALLOT_TRY(bytes(info.user(), kUserBytesMax, where + ".user"));
  ALLOT_TRY(bytes(info.role(), kRoleBytesMax, where + ".role"));
  ALLOT_TRY(number(info.weight(), kWeightMax, where + ".weight"));
  ALLOT_TRY(number(info.failover_timeout_s(), kTimeoutSecondsMax, where + ".failover_timeout_s"));
  return validateResources(info.guaranteed(), where + ".guaranteed");
}

Status validateTaskInfo(const wire::TaskInfo& task, const std::string& where) {
  ALLOT_TRY(bytes(task.task_id(), kIdBytesMax, where + ".task_id"));
  ALLOT_TRY(bytes(task.name(), kNameBytesMax, where + ".name"));
  ALLOT_TRY(bytes(task.agent_id(), kIdBytesMax, where + ".agent_id"));
  ALLOT_TRY(validateResources(task.resources(), where + ".resources"));
  ALLOT_TRY(command(task.command(), where + ".command"));
  if (task.has_executor()) ALLOT_TRY(executorInfo(task.executor(), where + ".executor"));
  ALLOT_TRY(number(task.kill_grace_s(), kKillGraceSecondsMax, where + ".kill_grace_s"));
  ALLOT_TRY(number(task.max_duration_s(), kTimeoutSecondsMax, where + ".max_duration_s"));
  return bytes(task.data(), kTaskDataBytesMax, where + ".data");
}

Status validateTaskStatus(const wire::TaskStatus& s, const std::string& where) {
  ALLOT_TRY(bytes(s.task_id(), kIdBytesMax, where + ".task_id"));
  ALLOT_TRY(bytes(s.framework_id(), kIdBytesMax, where + ".framework_id"));
  ALLOT_TRY(bytes(s.agent_id(), kIdBytesMax, where + ".agent_id"));
  ALLOT_TRY(bytes(s.executor_id(), kIdBytesMax, where + ".executor_id"));
  ALLOT_TRY(bytes(s.update_id(), kIdBytesMax, where + ".update_id"));
  ALLOT_TRY(bytes(s.message(), kStatusMessageBytesMax, where + ".message"));
  if (!wire::TaskState_IsValid(s.state())) return Error{where + ".state: unknown value"};
  if (!std::isfinite(s.timestamp_s())) return Error{where + ".timestamp_s: not a finite number"};
  return usage(s.usage(), where + ".usage");
}

Status validateFromScheduler(const wire::Envelope& e) {
  switch (e.body_case()) {
    case wire::Envelope::kRegisterFramework: return registerFramework(e.register_framework());
    case wire::Envelope::kAcceptOffers: return acceptOffers(e.accept_offers());
    case wire::Envelope::kDeclineOffers:
      ALLOT_TRY(idList(e.decline_offers().offer_ids(), kOfferIdsPerMessageMax, "DeclineOffers.offer_ids"));
      return refuse(e.decline_offers().filters(), "DeclineOffers.filters");
    case wire::Envelope::kSetNeedsOffers: return okStatus();
    case wire::Envelope::kSetFilters: return filters(e.set_filters().filters(), "SetFilters.filters");
    case wire::Envelope::kKillTask: return killTask(e.kill_task(), "KillTask");
    case wire::Envelope::kAcknowledge: return acknowledge(e.acknowledge());
    case wire::Envelope::kReconcile: return reconcile(e.reconcile());
    case wire::Envelope::kUnregisterFramework:
      return bytes(e.unregister_framework().framework_id(), kIdBytesMax,
                   "UnregisterFramework.framework_id");
    default: return unexpected(e, "a scheduler");
  }
}

Status validateFromAgent(const wire::Envelope& e) {
  switch (e.body_case()) {
    case wire::Envelope::kRegisterAgent: return registerAgent(e.register_agent());
    case wire::Envelope::kHeartbeat: return okStatus();
    case wire::Envelope::kStatusUpdate:
      return validateTaskStatus(e.status_update().status(), "StatusUpdate.status");
    case wire::Envelope::kUsageReport: return usageReport(e.usage_report());
    default: return unexpected(e, "an agent");
  }
}

Status validateFromMaster(const wire::Envelope& e) {
  switch (e.body_case()) {
    case wire::Envelope::kAgentRegistered: return agentRegistered(e.agent_registered());
    case wire::Envelope::kRunTask: return runTask(e.run_task());
    case wire::Envelope::kKillTask:
      ALLOT_TRY(nonEmpty(e.kill_task().framework_id(), "KillTask.framework_id"));
      ALLOT_TRY(nonEmpty(e.kill_task().task_id(), "KillTask.task_id"));
      return killTask(e.kill_task(), "KillTask");
    case wire::Envelope::kStatusAcknowledgement: {
      const auto& a = e.status_acknowledgement();
      ALLOT_TRY(bytes(a.framework_id(), kIdBytesMax, "StatusAcknowledgement.framework_id"));
      ALLOT_TRY(bytes(a.task_id(), kIdBytesMax, "StatusAcknowledgement.task_id"));
      return bytes(a.update_id(), kIdBytesMax, "StatusAcknowledgement.update_id");
    }
    case wire::Envelope::kShutdownFramework:
      return bytes(e.shutdown_framework().framework_id(), kIdBytesMax, "ShutdownFramework.framework_id");
    case wire::Envelope::kHeartbeatAck: return okStatus();
    case wire::Envelope::kError: return errorMessage(e.error());
    default: return unexpected(e, "the master");
  }
}

Status validateFromExecutor(const wire::Envelope& e) {
  switch (e.body_case()) {
    case wire::Envelope::kRegisterExecutor: return registerExecutor(e.register_executor());
    case wire::Envelope::kStatusUpdate:
      ALLOT_TRY(nonEmpty(e.status_update().status().task_id(), "StatusUpdate.status.task_id"));
      return validateTaskStatus(e.status_update().status(), "StatusUpdate.status");
    default: return unexpected(e, "an executor");
  }
}

Status validateFromMasterToScheduler(const wire::Envelope& e) {
  switch (e.body_case()) {
    case wire::Envelope::kFrameworkRegistered: {
      const auto& r = e.framework_registered();
      ALLOT_TRY(nonEmpty(r.framework_id(), "FrameworkRegistered.framework_id"));
      ALLOT_TRY(bytes(r.framework_id(), kIdBytesMax, "FrameworkRegistered.framework_id"));
      ALLOT_TRY(bytes(r.master_id(), kIdBytesMax, "FrameworkRegistered.master_id"));
      return bytes(r.framework_secret(), kSecretBytesMax, "FrameworkRegistered.framework_secret");
    }
    case wire::Envelope::kResourceOffers: return resourceOffers(e.resource_offers());
    case wire::Envelope::kOfferRescinded:
      return bytes(e.offer_rescinded().offer_id(), kIdBytesMax, "OfferRescinded.offer_id");
    case wire::Envelope::kStatusUpdate:
      return validateTaskStatus(e.status_update().status(), "StatusUpdate.status");
    case wire::Envelope::kAgentLost:
      return bytes(e.agent_lost().agent_id(), kIdBytesMax, "AgentLost.agent_id");
    case wire::Envelope::kShareUpdate: return shareUpdate(e.share_update());
    case wire::Envelope::kError: return errorMessage(e.error());
    default: return unexpected(e, "the master");
  }
}

Status validateFromAgentToExecutor(const wire::Envelope& e) {
  switch (e.body_case()) {
    case wire::Envelope::kExecutorRegistered: {
      const auto& r = e.executor_registered();
      ALLOT_TRY(bytes(r.agent_id(), kIdBytesMax, "ExecutorRegistered.agent_id"));
      ALLOT_TRY(validateFrameworkInfo(r.framework(), "ExecutorRegistered.framework"));
      return executorInfo(r.executor(), "ExecutorRegistered.executor");
    }
    case wire::Envelope::kLaunchTask:
      ALLOT_TRY(nonEmpty(e.launch_task().task().task_id(), "LaunchTask.task.task_id"));
      return validateTaskInfo(e.launch_task().task(), "LaunchTask.task");
    case wire::Envelope::kKillTask:
      ALLOT_TRY(nonEmpty(e.kill_task().task_id(), "KillTask.task_id"));
      return killTask(e.kill_task(), "KillTask");
    case wire::Envelope::kShutdownExecutor: {
      const auto& s = e.shutdown_executor();
      ALLOT_TRY(bytes(s.framework_id(), kIdBytesMax, "ShutdownExecutor.framework_id"));
      ALLOT_TRY(bytes(s.executor_id(), kIdBytesMax, "ShutdownExecutor.executor_id"));
      return number(s.grace_s(), kKillGraceSecondsMax, "ShutdownExecutor.grace_s");
    }
    case wire::Envelope::kStatusAcknowledgement: {
      const auto& a = e.status_acknowledgement();
      ALLOT_TRY(bytes(a.framework_id(), kIdBytesMax, "StatusAcknowledgement.framework_id"));
      ALLOT_TRY(bytes(a.task_id(), kIdBytesMax, "StatusAcknowledgement.task_id"));
      return bytes(a.update_id(), kIdBytesMax, "StatusAcknowledgement.update_id");
    }
    case wire::Envelope::kError: return errorMessage(e.error());
    default: return unexpected(e, "the agent");
  }
}

}  // namespace allot
