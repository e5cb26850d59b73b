// Named limits on everything a peer can send (proto/FORMAT.md, "Limits").
//
// Every count, size and number that arrives from the network is checked
// against one of these where the message enters (proto/validate.h), before
// any handler sees it; handlers then rely on them to stay linear in their
// input and to keep every map the network can grow bounded.
#pragma once

#include <cstddef>
#include <cstdint>

namespace allot::limits {

// ---------------------------------------------------------------- strings
inline constexpr size_t kIdBytesMax = 256;           // every *_id, update ids
inline constexpr size_t kNameBytesMax = 256;         // framework/executor/task names, hostname
inline constexpr size_t kUserBytesMax = 64;          // run-as user names
inline constexpr size_t kRoleBytesMax = 64;          // allocation roles
inline constexpr size_t kSecretBytesMax = 128;       // framework_secret, agent_secret
inline constexpr size_t kResourceNameBytesMax = 64;
inline constexpr size_t kAttributeBytesMax = 256;    // attribute name and value, each
inline constexpr size_t kStatusMessageBytesMax = 4096;
inline constexpr size_t kShellBytesMax = 64 * 1024;
inline constexpr size_t kArgvCountMax = 1024;
inline constexpr size_t kEnvironmentCountMax = 1024;
// argv + environment (keys and values) of one command together.
inline constexpr size_t kCommandBytesMax = 256 * 1024;
inline constexpr size_t kTaskDataBytesMax = 1024 * 1024;

// ContainerInfo: an image reference (images/reference.h parses at most
// this), its volumes, and each volume path.
inline constexpr size_t kImageReferenceBytesMax = 512;
inline constexpr size_t kVolumesPerContainerMax = 16;
inline constexpr size_t kVolumePathBytesMax = 1024;

// ---------------------------------------------------------------- resources
inline constexpr size_t kResourcesPerListMax = 32;   // distinct names in one list
inline constexpr size_t kRangesPerResourceMax = 1024;
inline constexpr size_t kAttributesMax = 64;

// ---------------------------------------------------------------- counts per message
inline constexpr size_t kOfferIdsPerMessageMax = 1000;  // AcceptOffers, DeclineOffers
inline constexpr size_t kTasksPerAcceptMax = 1000;
inline constexpr size_t kReconcileTasksMax = 10000;
inline constexpr size_t kFilterAgentIdsMax = 10000;
inline constexpr size_t kFrameworksPerAgentMax = 1000;  // RegisterAgent.frameworks
inline constexpr size_t kExecutorsPerAgentMax = 10000;  // RegisterAgent.executors, UsageReport
inline constexpr size_t kTasksPerAgentMax = 10000;      // summed over RegisterAgent.executors
inline constexpr size_t kTasksPerExecutorMax = 10000;   // RegisterExecutor.tasks/unacknowledged
inline constexpr size_t kOffersPerMessageMax = 1000;    // ResourceOffers (the master sends at most this)

// ---------------------------------------------------------------- numbers
inline constexpr double kWeightMax = 1e6;
inline constexpr double kTimeoutSecondsMax = 365.0 * 86400;  // failover, max duration, refuse
inline constexpr double kKillGraceSecondsMax = 3600;
// AgentRegistered.heartbeat_interval_s: 0 means the agent's default (1 s);
// anything shorter than this would have the agent heartbeat in a busy loop.
inline constexpr double kHeartbeatIntervalSecondsMin = 0.01;
inline constexpr size_t kErrorMessageBytesMax = 4096;  // ErrorMessage.message
// TaskInfo.health_check: delay, timeout and grace period each at most a day;
// the interval at least kHealthCheckIntervalSecondsMin (a check that fails
// at once would otherwise run in a loop).
inline constexpr double kHealthCheckSecondsMax = 86400;
inline constexpr double kHealthCheckIntervalSecondsMin = 0.1;
inline constexpr uint32_t kHealthCheckFailuresMax = 1000;
inline constexpr size_t kHealthCheckPathBytesMax = 1024;

// ---------------------------------------------------------------- per-connection bounds
// The agent's executor socket: a frame may carry a RegisterExecutor that
// replays an executor's tasks, so frames keep the protocol's limit
// (kMaxFrameBytes); what the agent queues for one executor that does not
// read is bounded lower than the default, since the agent holds one such
// queue per executor (executorsMax + pending connections in all).
inline constexpr size_t kExecutorQueuedBytesMax = 16u << 20;

// ---------------------------------------------------------------- master totals
// Below the allocator's own capacities (kMaxFrameworks, kMaxAgents), so
// input can never reach the allocator's CHECKs.
inline constexpr size_t kFrameworksMax = 50000;
inline constexpr size_t kAgentsMax = 200000;
inline constexpr size_t kTasksPerFrameworkMax = 1000000;
// A scheduler or agent that handshakes and does not register within this
// many seconds is disconnected.
inline constexpr double kRegistrationTimeoutSeconds = 30;

}  // namespace allot::limits
