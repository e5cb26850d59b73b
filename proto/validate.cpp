#include "proto/validate.h"

#include <cmath>
#include <string>
#include <string_view>

#include "proto/input_limits.h"

namespace allot {
namespace {

using namespace limits;

// Where a value sits in the message ("AcceptOffers.tasks[3].command.argv"):
// a chain of frames on the caller's stack, turned into text only when a
// check fails. A message that passes costs no string per field: building
// the names eagerly was most of the validation of a frame with thousands
// of entries (docs/benchmarks.md "Fuzzing").
class Where {
 public:
  Where(const char* root) : root_(root) {}  // a literal: "AcceptOffers"
  explicit Where(const std::string& root) : root_(root) {}
  // `field` is a string literal (".task_id") or points into a string that
  // outlives this frame.
  Where(const Where& parent, std::string_view field) : parent_(&parent), root_(field) {}
  Where(const Where& parent, int index) : parent_(&parent), index_(index) {}

  std::string str() const {
    std::string out = parent_ ? parent_->str() : std::string();
    if (index_ >= 0) return out + "[" + std::to_string(index_) + "]";
    return out.append(root_);
  }

 private:
  const Where* parent_ = nullptr;
  std::string_view root_;
  int index_ = -1;
};

Status tooLong(const Where& where, size_t size, size_t limit) {
  return Error{where.str() + ": " + std::to_string(size) + " bytes (limit " + std::to_string(limit) + ")"};
}

Status tooMany(const Where& where, size_t count, size_t limit) {
  return Error{where.str() + ": " + std::to_string(count) + " entries (limit " + std::to_string(limit) +
               ")"};
}

Status bytes(const std::string& value, size_t limit, const Where& where) {
  if (value.size() > limit) return tooLong(where, value.size(), limit);
  return okStatus();
}

template <typename List>
Status count(const List& list, size_t limit, const Where& where) {
  if (static_cast<size_t>(list.size()) > limit) return tooMany(where, list.size(), limit);
  return okStatus();
}

Status idList(const google::protobuf::RepeatedPtrField<std::string>& ids, size_t limit,
              const Where& where) {
  if (auto st = count(ids, limit, where); !st) return st;
  for (int i = 0; i < ids.size(); ++i) {
    if (auto st = bytes(ids[i], kIdBytesMax, Where(where, i)); !st) return st;
  }
  return okStatus();
}

Status number(double value, double max, const Where& where) {
  if (!std::isfinite(value) || value < 0 || value > max) {
    return Error{where.str() + ": " + std::to_string(value) + " is not in [0, " + std::to_string(max) + "]"};
  }
  return okStatus();
}

Status finiteNumber(double value, const Where& where) {
  if (!std::isfinite(value)) return Error{where.str() + ": not a finite number"};
  return okStatus();
}

// Chains checks: the first failure wins.
#define ALLOT_TRY(expr)           \
  do {                            \
    if (Status st_ = (expr); !st_) return st_; \
  } while (0)

Status resources(const google::protobuf::RepeatedPtrField<wire::Resource>& list, const Where& where) {
  ALLOT_TRY(count(list, kResourcesPerListMax, where));
  for (int i = 0; i < list.size(); ++i) {
    const wire::Resource& r = list[i];
    const Where at(where, i);
    ALLOT_TRY(bytes(r.name(), kResourceNameBytesMax, Where(at, ".name")));
    ALLOT_TRY(count(r.ranges(), kRangesPerResourceMax, Where(at, ".ranges")));
    ALLOT_TRY(finiteNumber(r.scalar(), Where(at, ".scalar")));
  }
  // Names, duplicates, signs and magnitudes: Resources::fromWire.
  return okStatus();
}

Status frameworkInfo(const wire::FrameworkInfo& info, const Where& where) {
  ALLOT_TRY(bytes(info.id(), kIdBytesMax, Where(where, ".id")));
  ALLOT_TRY(bytes(info.name(), kNameBytesMax, Where(where, ".name")));
  ALLOT_TRY(bytes(info.user(), kUserBytesMax, Where(where, ".user")));
  ALLOT_TRY(bytes(info.role(), kRoleBytesMax, Where(where, ".role")));
  ALLOT_TRY(number(info.weight(), kWeightMax, Where(where, ".weight")));
  ALLOT_TRY(number(info.failover_timeout_s(), kTimeoutSecondsMax, Where(where, ".failover_timeout_s")));
  return resources(info.guaranteed(), Where(where, ".guaranteed"));
}

Status attributes(const google::protobuf::RepeatedPtrField<wire::Attribute>& list, const Where& where) {
  ALLOT_TRY(count(list, kAttributesMax, where));
  for (int i = 0; i < list.size(); ++i) {
    const Where at(where, i);
    ALLOT_TRY(bytes(list[i].name(), kAttributeBytesMax, Where(at, ".name")));
    ALLOT_TRY(bytes(list[i].value(), kAttributeBytesMax, Where(at, ".value")));
  }
  return okStatus();
}

Status command(const wire::CommandInfo& c, const Where& where) {
  ALLOT_TRY(bytes(c.shell(), kShellBytesMax, Where(where, ".shell")));
  ALLOT_TRY(count(c.argv(), kArgvCountMax, Where(where, ".argv")));
  ALLOT_TRY(count(c.environment(), kEnvironmentCountMax, Where(where, ".environment")));
  ALLOT_TRY(bytes(c.user(), kUserBytesMax, Where(where, ".user")));
  size_t total = 0;
  for (const auto& a : c.argv()) total += a.size();
  for (const auto& [k, v] : c.environment()) total += k.size() + v.size();
  if (total > kCommandBytesMax) return tooLong(Where(where, " argv+environment"), total, kCommandBytesMax);
  return okStatus();
}

// A volume path: bounded, no control characters, no ".." component.
Status volumePath(const std::string& path, const Where& where) {
  ALLOT_TRY(bytes(path, kVolumePathBytesMax, where));
  if (path.empty()) return Error{where.str() + ": empty"};
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) return Error{where.str() + ": control characters"};
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (path.compare(start, end - start, "..") == 0 && end - start == 2) {
      return Error{where.str() + ": '..' is not allowed"};
    }
    start = end + 1;
  }
  return okStatus();
}

Status container(const wire::ContainerInfo& c, const Where& where) {
  ALLOT_TRY(bytes(c.image(), kImageReferenceBytesMax, Where(where, ".image")));
  const Where volumes(where, ".volumes");
  ALLOT_TRY(count(c.volumes(), kVolumesPerContainerMax, volumes));
  if (c.volumes_size() > 0 && c.image().empty()) return Error{volumes.str() + ": volumes need an image"};
  for (int i = 0; i < c.volumes_size(); ++i) {
    const Where at(volumes, i);
    const wire::Volume& v = c.volumes(i);
    ALLOT_TRY(volumePath(v.source(), Where(at, ".source")));
    const Where target(at, ".container_path");
    ALLOT_TRY(volumePath(v.container_path(), target));
    if (v.container_path().front() != '/' || v.container_path() == "/") {
      return Error{target.str() + ": must be absolute and not '/'"};
    }
  }
  return okStatus();
}

Status executorInfo(const wire::ExecutorInfo& ex, const Where& where) {
  ALLOT_TRY(bytes(ex.executor_id(), kIdBytesMax, Where(where, ".executor_id")));
  ALLOT_TRY(bytes(ex.framework_id(), kIdBytesMax, Where(where, ".framework_id")));
  ALLOT_TRY(bytes(ex.name(), kNameBytesMax, Where(where, ".name")));
  ALLOT_TRY(command(ex.command(), Where(where, ".command")));
  ALLOT_TRY(container(ex.container(), Where(where, ".container")));
  return resources(ex.resources(), Where(where, ".resources"));
}

// The HTTP path goes into a request line: printable ASCII without spaces.
Status httpPath(const std::string& path, const Where& where) {
  ALLOT_TRY(bytes(path, kHealthCheckPathBytesMax, where));
  if (path.empty()) return okStatus();
  if (path[0] != '/') return Error{where.str() + ": must start with '/'"};
  for (unsigned char c : path) {
    if (c <= 0x20 || c >= 0x7f) return Error{where.str() + ": only printable ASCII without spaces"};
  }
  return okStatus();
}

Status healthTimes(const wire::HealthCheck& h, const Where& where) {
  if (h.has_delay_s()) ALLOT_TRY(number(h.delay_s(), kHealthCheckSecondsMax, Where(where, ".delay_s")));
  if (h.has_timeout_s()) ALLOT_TRY(number(h.timeout_s(), kHealthCheckSecondsMax, Where(where, ".timeout_s")));
  if (h.has_grace_period_s()) {
    ALLOT_TRY(number(h.grace_period_s(), kHealthCheckSecondsMax, Where(where, ".grace_period_s")));
  }
  if (h.has_interval_s()) {
    const Where at(where, ".interval_s");
    ALLOT_TRY(number(h.interval_s(), kHealthCheckSecondsMax, at));
    if (h.interval_s() < kHealthCheckIntervalSecondsMin) {
      return Error{at.str() + ": below " + std::to_string(kHealthCheckIntervalSecondsMin)};
    }
  }
  if (h.has_consecutive_failures() &&
      (h.consecutive_failures() < 1 || h.consecutive_failures() > kHealthCheckFailuresMax)) {
    return Error{Where(where, ".consecutive_failures").str() + ": not in [1, " +
                 std::to_string(kHealthCheckFailuresMax) + "]"};
  }
  return okStatus();
}

Status healthCheck(const wire::HealthCheck& h, const Where& where) {
  if (!wire::HealthCheck::Type_IsValid(h.type())) return Error{Where(where, ".type").str() + ": unknown value"};
  if (h.type() == wire::HealthCheck::NONE) return okStatus();
  ALLOT_TRY(healthTimes(h, where));
  ALLOT_TRY(httpPath(h.path(), Where(where, ".path")));
  if (h.type() == wire::HealthCheck::COMMAND) {
    ALLOT_TRY(command(h.command(), Where(where, ".command")));
    if (h.command().shell().empty() && h.command().argv().empty()) {
      return Error{Where(where, ".command").str() + ": neither shell nor argv"};
    }
    return okStatus();
  }
  if (h.port() < 1 || h.port() > 65535) return Error{Where(where, ".port").str() + ": not in [1, 65535]"};
  return okStatus();
}

Status taskInfo(const wire::TaskInfo& task, const Where& where) {
  ALLOT_TRY(bytes(task.task_id(), kIdBytesMax, Where(where, ".task_id")));
  ALLOT_TRY(bytes(task.name(), kNameBytesMax, Where(where, ".name")));
  ALLOT_TRY(bytes(task.agent_id(), kIdBytesMax, Where(where, ".agent_id")));
  ALLOT_TRY(resources(task.resources(), Where(where, ".resources")));
  ALLOT_TRY(command(task.command(), Where(where, ".command")));
  if (task.has_executor()) ALLOT_TRY(executorInfo(task.executor(), Where(where, ".executor")));
  ALLOT_TRY(number(task.kill_grace_s(), kKillGraceSecondsMax, Where(where, ".kill_grace_s")));
  ALLOT_TRY(number(task.max_duration_s(), kTimeoutSecondsMax, Where(where, ".max_duration_s")));
  ALLOT_TRY(healthCheck(task.health_check(), Where(where, ".health_check")));
  ALLOT_TRY(container(task.container(), Where(where, ".container")));
  if (task.has_executor() && !task.container().image().empty()) {
    return Error{Where(where, ".container").str() + ": a task with its own executor sets the image on the executor"};
  }
  return bytes(task.data(), kTaskDataBytesMax, Where(where, ".data"));
}

Status usage(const wire::ResourceUsage& u, const Where& where) {
  return number(u.cpu_time_s(), 1e15, Where(where, ".cpu_time_s"));
}

Status taskStatus(const wire::TaskStatus& s, const Where& where) {
  ALLOT_TRY(bytes(s.task_id(), kIdBytesMax, Where(where, ".task_id")));
  ALLOT_TRY(bytes(s.framework_id(), kIdBytesMax, Where(where, ".framework_id")));
  ALLOT_TRY(bytes(s.agent_id(), kIdBytesMax, Where(where, ".agent_id")));
  ALLOT_TRY(bytes(s.executor_id(), kIdBytesMax, Where(where, ".executor_id")));
  ALLOT_TRY(bytes(s.update_id(), kIdBytesMax, Where(where, ".update_id")));
  ALLOT_TRY(bytes(s.message(), kStatusMessageBytesMax, Where(where, ".message")));
  if (!wire::TaskState_IsValid(s.state())) return Error{Where(where, ".state").str() + ": unknown value"};
  ALLOT_TRY(finiteNumber(s.timestamp_s(), Where(where, ".timestamp_s")));
  return usage(s.usage(), Where(where, ".usage"));
}

Status filters(const wire::StandingFilters& f, const Where& where) {
  ALLOT_TRY(idList(f.agent_ids(), kFilterAgentIdsMax, Where(where, ".agent_ids")));
  return resources(f.min_free(), Where(where, ".min_free"));
}

Status refuse(const wire::Filters& f, const Where& where) {
  if (!f.has_refuse_seconds()) return okStatus();
  return number(f.refuse_seconds(), kTimeoutSecondsMax, Where(where, ".refuse_seconds"));
}

Status registerFramework(const wire::RegisterFramework& m) {
  const Where where("RegisterFramework");
  ALLOT_TRY(frameworkInfo(m.info(), Where(where, ".info")));
  ALLOT_TRY(filters(m.filters(), Where(where, ".filters")));
  return bytes(m.framework_secret(), kSecretBytesMax, Where(where, ".framework_secret"));
}

Status acceptOffers(const wire::AcceptOffers& m) {
  const Where where("AcceptOffers");
  ALLOT_TRY(idList(m.offer_ids(), kOfferIdsPerMessageMax, Where(where, ".offer_ids")));
  const Where tasks(where, ".tasks");
  ALLOT_TRY(count(m.tasks(), kTasksPerAcceptMax, tasks));
  for (int i = 0; i < m.tasks_size(); ++i) ALLOT_TRY(taskInfo(m.tasks(i), Where(tasks, i)));
  return refuse(m.filters(), Where(where, ".filters"));
}

Status killTask(const wire::KillTask& m, const Where& where) {
  ALLOT_TRY(bytes(m.framework_id(), kIdBytesMax, Where(where, ".framework_id")));
  ALLOT_TRY(bytes(m.task_id(), kIdBytesMax, Where(where, ".task_id")));
  ALLOT_TRY(bytes(m.agent_id(), kIdBytesMax, Where(where, ".agent_id")));
  return number(m.grace_s(), kKillGraceSecondsMax, Where(where, ".grace_s"));
}

Status acknowledge(const wire::Acknowledge& m) {
  const Where where("Acknowledge");
  ALLOT_TRY(bytes(m.framework_id(), kIdBytesMax, Where(where, ".framework_id")));
  ALLOT_TRY(bytes(m.agent_id(), kIdBytesMax, Where(where, ".agent_id")));
  ALLOT_TRY(bytes(m.task_id(), kIdBytesMax, Where(where, ".task_id")));
  return bytes(m.update_id(), kIdBytesMax, Where(where, ".update_id"));
}

Status reconcile(const wire::Reconcile& m) {
  const Where tasks("Reconcile.tasks");
  ALLOT_TRY(count(m.tasks(), kReconcileTasksMax, tasks));
  for (int i = 0; i < m.tasks_size(); ++i) {
    const Where at(tasks, i);
    ALLOT_TRY(bytes(m.tasks(i).task_id(), kIdBytesMax, Where(at, ".task_id")));
    ALLOT_TRY(bytes(m.tasks(i).agent_id(), kIdBytesMax, Where(at, ".agent_id")));
  }
  return okStatus();
}

Status executorState(const wire::ExecutorState& ex, const Where& where) {
  ALLOT_TRY(executorInfo(ex.info(), Where(where, ".info")));
  const Where tasks(where, ".tasks"), latest(where, ".latest");
  ALLOT_TRY(count(ex.latest(), static_cast<size_t>(ex.tasks_size()), latest));
  for (int i = 0; i < ex.tasks_size(); ++i) ALLOT_TRY(taskInfo(ex.tasks(i), Where(tasks, i)));
  for (int i = 0; i < ex.latest_size(); ++i) ALLOT_TRY(taskStatus(ex.latest(i), Where(latest, i)));
  return okStatus();
}

Status registerAgent(const wire::RegisterAgent& m) {
  const Where where("RegisterAgent");
  ALLOT_TRY(bytes(m.info().id(), kIdBytesMax, Where(where, ".info.id")));
  ALLOT_TRY(bytes(m.info().hostname(), kNameBytesMax, Where(where, ".info.hostname")));
  ALLOT_TRY(bytes(m.info().http_address(), kNameBytesMax, Where(where, ".info.http_address")));
  ALLOT_TRY(resources(m.info().resources(), Where(where, ".info.resources")));
  ALLOT_TRY(attributes(m.info().attributes(), Where(where, ".info.attributes")));
  ALLOT_TRY(bytes(m.agent_secret(), kSecretBytesMax, Where(where, ".agent_secret")));
  const Where frameworks(where, ".frameworks");
  ALLOT_TRY(count(m.frameworks(), kFrameworksPerAgentMax, frameworks));
  for (int i = 0; i < m.frameworks_size(); ++i) ALLOT_TRY(frameworkInfo(m.frameworks(i), Where(frameworks, i)));
  const Where executors(where, ".executors");
  ALLOT_TRY(count(m.executors(), kExecutorsPerAgentMax, executors));
  size_t tasks = 0;
  for (const auto& ex : m.executors()) tasks += ex.tasks_size();
  if (tasks > kTasksPerAgentMax) return tooMany(Where(where, ".executors[*].tasks"), tasks, kTasksPerAgentMax);
  for (int i = 0; i < m.executors_size(); ++i) ALLOT_TRY(executorState(m.executors(i), Where(executors, i)));
  return okStatus();
}

Status usageReport(const wire::UsageReport& m) {
  const Where executors("UsageReport.executors");
  ALLOT_TRY(count(m.executors(), kExecutorsPerAgentMax, executors));
  for (int i = 0; i < m.executors_size(); ++i) {
    const Where at(executors, i);
    ALLOT_TRY(bytes(m.executors(i).framework_id(), kIdBytesMax, Where(at, ".framework_id")));
    ALLOT_TRY(bytes(m.executors(i).executor_id(), kIdBytesMax, Where(at, ".executor_id")));
    ALLOT_TRY(usage(m.executors(i).usage(), Where(at, ".usage")));
  }
  return okStatus();
}

Status registerExecutor(const wire::RegisterExecutor& m) {
  const Where where("RegisterExecutor");
  ALLOT_TRY(bytes(m.framework_id(), kIdBytesMax, Where(where, ".framework_id")));
  ALLOT_TRY(bytes(m.executor_id(), kIdBytesMax, Where(where, ".executor_id")));
  ALLOT_TRY(bytes(m.executor_secret(), kSecretBytesMax, Where(where, ".executor_secret")));
  const Where tasks(where, ".tasks"), unacknowledged(where, ".unacknowledged");
  ALLOT_TRY(count(m.tasks(), kTasksPerExecutorMax, tasks));
  ALLOT_TRY(count(m.unacknowledged(), kTasksPerExecutorMax, unacknowledged));
  for (int i = 0; i < m.tasks_size(); ++i) ALLOT_TRY(taskInfo(m.tasks(i), Where(tasks, i)));
  for (int i = 0; i < m.unacknowledged_size(); ++i) {
    ALLOT_TRY(taskStatus(m.unacknowledged(i), Where(unacknowledged, i)));
  }
  return okStatus();
}

Status nonEmpty(const std::string& value, const Where& where) {
  if (value.empty()) return Error{where.str() + ": empty"};
  return okStatus();
}

Status errorMessage(const wire::ErrorMessage& m) {
  return bytes(m.message(), kErrorMessageBytesMax, Where("ErrorMessage.message"));
}

Status agentRegistered(const wire::AgentRegistered& m) {
  const Where where("AgentRegistered");
  ALLOT_TRY(nonEmpty(m.agent_id(), Where(where, ".agent_id")));
  ALLOT_TRY(bytes(m.agent_id(), kIdBytesMax, Where(where, ".agent_id")));
  ALLOT_TRY(bytes(m.master_id(), kIdBytesMax, Where(where, ".master_id")));
  ALLOT_TRY(bytes(m.agent_secret(), kSecretBytesMax, Where(where, ".agent_secret")));
  double interval = m.heartbeat_interval_s();
  ALLOT_TRY(number(interval, kTimeoutSecondsMax, Where(where, ".heartbeat_interval_s")));
  if (interval > 0 && interval < kHeartbeatIntervalSecondsMin) {
    return Error{"AgentRegistered.heartbeat_interval_s: " + std::to_string(interval) + " is below " +
                 std::to_string(kHeartbeatIntervalSecondsMin)};
  }
  return okStatus();
}

// The ids come first: a RunTask refused for anything else is answered with
// TASK_ERROR for that task, which needs usable ids.
Status runTask(const wire::RunTask& m) {
  const Where framework("RunTask.framework"), task("RunTask.task");
  ALLOT_TRY(nonEmpty(m.framework().id(), Where(framework, ".id")));
  ALLOT_TRY(bytes(m.framework().id(), kIdBytesMax, Where(framework, ".id")));
  ALLOT_TRY(nonEmpty(m.task().task_id(), Where(task, ".task_id")));
  ALLOT_TRY(bytes(m.task().task_id(), kIdBytesMax, Where(task, ".task_id")));
  ALLOT_TRY(frameworkInfo(m.framework(), framework));
  return taskInfo(m.task(), task);
}

Status offer(const wire::Offer& o, const Where& where) {
  ALLOT_TRY(bytes(o.offer_id(), kIdBytesMax, Where(where, ".offer_id")));
  ALLOT_TRY(bytes(o.framework_id(), kIdBytesMax, Where(where, ".framework_id")));
  ALLOT_TRY(bytes(o.agent_id(), kIdBytesMax, Where(where, ".agent_id")));
  ALLOT_TRY(bytes(o.hostname(), kNameBytesMax, Where(where, ".hostname")));
  ALLOT_TRY(resources(o.resources(), Where(where, ".resources")));
  ALLOT_TRY(attributes(o.attributes(), Where(where, ".attributes")));
  return idList(o.executor_ids(), kExecutorsPerAgentMax, Where(where, ".executor_ids"));
}

Status resourceOffers(const wire::ResourceOffers& m) {
  const Where offers("ResourceOffers.offers");
  ALLOT_TRY(count(m.offers(), kOffersPerMessageMax, offers));
  for (int i = 0; i < m.offers_size(); ++i) ALLOT_TRY(offer(m.offers(i), Where(offers, i)));
  return okStatus();
}

Status shareUpdate(const wire::ShareUpdate& m) {
  ALLOT_TRY(resources(m.guaranteed(), Where("ShareUpdate.guaranteed")));
  ALLOT_TRY(resources(m.allocated(), Where("ShareUpdate.allocated")));
  return number(m.dominant_share(), 1e6, Where("ShareUpdate.dominant_share"));
}

Status unexpected(const wire::Envelope& e, const char* from) {
  return Error{std::string("unexpected message from ") + from + " (field " +
               std::to_string(e.body_case()) + ")"};
}

}  // namespace

Status validateResources(const google::protobuf::RepeatedPtrField<wire::Resource>& list,
                         const std::string& where) {
  return resources(list, Where(where));
}

Status validateFrameworkInfo(const wire::FrameworkInfo& info, const std::string& where) {
  return frameworkInfo(info, Where(where));
}

Status validateTaskInfo(const wire::TaskInfo& task, const std::string& where) {
  return taskInfo(task, Where(where));
}

Status validateTaskStatus(const wire::TaskStatus& s, const std::string& where) {
  return taskStatus(s, Where(where));
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
      return taskStatus(e.status_update().status(), "StatusUpdate.status");
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
      return taskStatus(e.status_update().status(), "StatusUpdate.status");
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
      return taskStatus(e.status_update().status(), "StatusUpdate.status");
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
      ALLOT_TRY(frameworkInfo(r.framework(), "ExecutorRegistered.framework"));
      return executorInfo(r.executor(), "ExecutorRegistered.executor");
    }
    case wire::Envelope::kLaunchTask:
      ALLOT_TRY(nonEmpty(e.launch_task().task().task_id(), "LaunchTask.task.task_id"));
      return taskInfo(e.launch_task().task(), "LaunchTask.task");
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
