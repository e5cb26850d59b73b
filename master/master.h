// Master: the allot master's state machine (SPEC sections 3 and 4), free of
// sockets and timers so unit tests drive it with a FakeClock and a
// recording Outbox.
//
// The server (server.h) feeds it events:
//   peerConnected(peer, hello, identity)  after a handshake (role scheduler
//                               or agent; identity: its certificate or none)
//   peerMessage(peer, envelope) every message after that; each is checked
//                               against proto/input_limits.h (proto/validate.h)
//                               before any handler sees it
//   peerClosed(peer)            once, when the link is gone
//   tick()                      often (every ~100 ms): timeouts, periodic
//                               cycle, share updates to frameworks
//   allocate()                  soon after events, when allocationPending()
// and it answers through Outbox::send / Outbox::close.
//
// Soft state: agents, frameworks, offers and tasks. All of it can be rebuilt
// from RegisterAgent (executors, tasks, frameworks) and RegisterFramework
// (framework id) after a master failover.
//
// Authorization (docs/acls.md, docs/links.md section 3): every framework and
// agent id is bound to the principal that registered it and to a secret
// handed out with it; taking an id over needs the same principal (TLS) or
// the secret (plaintext). A framework acts only on its own tasks; an agent
// reports only tasks the master placed on it (or that it re-registered with)
// and never rewrites a framework's settings.
//
// Thread: single-threaded (the master's io_context thread).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "master/acls.h"
#include "master/agent_registry.h"
#include "master/allocator/allocator.h"
#include "master/allocator/revocation.h"
#include "master/identity_store.h"
#include "master/ids.h"
#include "master/metrics.h"
#include "master/offer_book.h"
#include "master/peer_table.h"
#include "master/task_book.h"
#include "master/policy.h"
#include "master/role_store.h"
#include "proto/allot.pb.h"
#include "proto/peer_identity.h"
#include "proto/input_limits.h"
#include "proto/resources.h"
#include "proto/task_state.h"

namespace allot {

// Role weights (--role-weight, allotctl role weight) are at most this.
constexpr double kRoleWeightMax = 1e6;
// A role name an operator may set: at most kRoleBytesMax bytes, no blanks,
// control characters or ':'.
Status validateRoleName(const std::string& role);

class Outbox {
 public:
  virtual ~Outbox() = default;
  virtual void send(PeerId peer, const wire::Envelope& envelope) = 0;
  // Closes the link; the server later reports peerClosed(peer).
  virtual void close(PeerId peer, const std::string& reason) = 0;
  // The master changed outside peerMessage() and tick() (a store
  // answered): the server does what follows an event (an allocation round
  // when one is pending).
  virtual void changedOutsideEvent() {}
  // Up to when the master has read what `peer` sent: `now` for a link it
  // reads itself; for an agent behind a link shard, when the shard's latest
  // liveness summary was handled (what the shard heard since waits unread
  // on the link). An agent's silence is counted up to this, so the master's
  // own lateness in reading is not charged to the agent.
  virtual TimePoint heardUpTo(PeerId peer, TimePoint now) const {
    (void)peer;
    return now;
  }
};

struct MasterOptions {
  std::string masterId;                 // empty: random
  std::string allocator = "drf";
  Resources minOffer;                   // see AllocatorOptions
  Duration offerTimeout = std::chrono::seconds(30);
  Duration allocationInterval = std::chrono::seconds(1);
  // An agent heard from by no message for agentTimeout is removed. A live
  // agent sends one at least every two heartbeatIntervals (a heartbeat
  // after an interval without traffic both ways, agent/master_link.h), so
  // agentTimeout must exceed two of them.
  Duration agentTimeout = std::chrono::seconds(15);
  Duration heartbeatInterval = std::chrono::seconds(5);
  Duration refuseDefault = std::chrono::seconds(5);
  Duration failoverTimeoutDefault = std::chrono::seconds(60);
  Acls acls = Acls::permissive();
  // A peer that handshakes but does not register within this is closed.
  Duration registrationTimeout = secondsToDuration(limits::kRegistrationTimeoutSeconds);
  PolicyOptions policy;                 // roles, quota, guarantees, revocation, long tasks
};


// Named limits (TIGER_STYLE) of what the master itself queues; the limits
// on what peers send are in proto/input_limits.h.
// The most offers one ResourceOffers carries: what schedulers accept.
constexpr size_t kMaxOffersPerMessage = limits::kOffersPerMessageMax;
constexpr size_t kMaxPendingUpdatesPerFramework = 10000;
constexpr size_t kMaxIdBytes = 256;
// Frameworks this master removed itself, remembered so a late update of
// theirs is acknowledged on their behalf (oldest forgotten first).
constexpr size_t kMaxRemovedFrameworksRemembered = 100000;
// How soon an identity store that could not be read is read again; the
// delay doubles at each failure up to the max.
constexpr Duration kIdentityLoadRetryFirst = std::chrono::seconds(1);
constexpr Duration kIdentityLoadRetryMax = std::chrono::seconds(30);
// Allocation intervals for which a revoked task's resources are withheld
// from the framework they were revoked from (on that agent).
constexpr int kRevokedHoldRounds = 3;
// Agents removed for silence per tick: each removal tells every framework,
// so thousands at once (a partition, a stalled master) would block the loop
// for seconds; the rest wait for the next tick.
constexpr size_t kAgentRemovalsPerTickMax = 50;
// Agents looked at for silence per tick (each one due: its recheck time
// passed). Bounds a tick's cost when many come due at once (registered
// together, a stalled master); the rest are looked at in the next ticks.
// A live agent is due at most once per agent timeout minus two heartbeat
// intervals, so at the server's 10 ticks a second this keeps up with a
// full registry (limits::kAgentsMax) at the default timeout and interval.
constexpr size_t kAgentSilenceLooksPerTickMax = 8192;
// An agent forgiven its silence (its link not read up to now) is looked at
// again this many times per agent timeout.
constexpr int kForgivenLooksPerTimeout = 10;

class Master {
 public:
  static Result<std::unique_ptr<Master>> create(MasterOptions options, const Clock& clock,
                                                Outbox& outbox);

  void peerConnected(PeerId peer, const wire::Hello& hello, const PeerIdentity& identity = {});
  void peerMessage(PeerId peer, const wire::Envelope& envelope);
  void peerClosed(PeerId peer);
  void tick();
  bool allocationPending() const { return allocationPending_ && !offersHeld_; }
  void allocate() { allocateRound(false); }
  // While held, no allocation round runs (no offers, no revocations);
  // registrations, status updates and everything else go on. A new leader
  // serves its peers at once and holds offers until it has applied the
  // stored role settings (master/main.cpp), so no offer is made under the
  // flags' weights and quotas alone. Release: a round follows soon.
  void holdOffers() { offersHeld_ = true; }
  void releaseOffers() {
    offersHeld_ = false;
    allocationPending_ = true;
  }
  bool offersHeld() const { return offersHeld_; }
  // Framework identities (master/identity_store.h): from now on a
  // framework's owner is written to `store` before its FrameworkRegistered
  // goes out (a failed write refuses the registration: an error and the
  // link closed, so the scheduler retries). The master reads what an
  // earlier leader kept there; until it has, a RegisterFramework with an
  // id it does not own is refused the same way, and a store that cannot be
  // read is read again from tick(), kIdentityLoadRetryFirst after the
  // failure, doubling up to kIdentityLoadRetryMax (docs/decisions.md).
  // `firstRead` runs after the first read, whatever its outcome. Call
  // once, before the first peer registers (master/main.cpp).
  void keepIdentities(std::unique_ptr<IdentityStore> store, std::function<void()> firstRead);
  bool identitiesRead() const { return !peers_.identitiesPending(); }
  const PeerTable& peerTable() const { return peers_; }

  // Introspection (tests, logs, later /metrics).
  const std::string& masterId() const { return options_.masterId; }
  size_t agentCount() const { return agents_.size(); }
  const AgentRegistry& agents() const { return agents_; }
  size_t frameworkCount() const { return frameworks_.size(); }
  size_t offerCount() const { return offers_.size(); }
  const OfferBook& offerBook() const { return offers_; }
  size_t taskCount() const { return tasks_.size(); }
  const TaskBook& taskBook() const { return tasks_; }
  std::optional<double> dominantShare(const std::string& frameworkId) const;
  const Allocator& allocator() const { return *allocator_; }
  // May this principal act on other frameworks' tasks and frameworks
  // (operator kill, teardown)? For the HTTP/allotctl operator endpoints.
  bool mayOperate(const std::string& principal) const { return options_.acls.operate(principal); }
  // Tasks revoked since start (KillTask with REASON_REVOKED sent).
  uint64_t revocationCount() const { return revocations_; }
  // The latest usage an agent reported for an executor, if any.
  std::optional<wire::ResourceUsage> executorUsage(const std::string& agentId,
                                                   const std::string& frameworkId,
                                                   const std::string& executorId) const;

  // Operator actions (operate.cpp; GET/POST through master/http_api.h).
  // drainAgent: the agent's resources stop being offered (its outstanding
  // offers are rescinded) and each of its tasks is asked to finish: a
  // KillTask with grace `deadline` and REASON_AGENT_DRAINED, so the
  // executor sends SIGTERM now and the agent kills the task when the
  // deadline passes. Draining again with a new deadline asks again.
  // undrainAgent: offers resume. killTask: like the framework's own kill.
  Status drainAgent(const std::string& agentId, Duration deadline);
  Status undrainAgent(const std::string& agentId);
  Status killTask(const std::string& taskId, const std::string& frameworkId);
  // roles.cpp: run-time role settings (allotctl role, HTTP /roles). Only
  // RoleSettingsKeeper (master/role_settings.h) calls the first three: it
  // stores a change before it applies it.
  //   checkRoleSetting  is this setting acceptable (name, 0 < weight <=
  //                     kRoleWeightMax, scalar quota, the configured-role
  //                     limit)? Changes nothing.
  //   applyRoleSetting  the role's weight and quota become the flags'
  //                     (--role-weight, --quota) overridden by each field the
  //                     setting has (an empty quota removes the flag's).
  //   applyRoleSettings every role of a loaded set; the first error, after
  //                     applying all the others.
  Status checkRoleSetting(const std::string& role, const RoleSetting& setting) const;
  Status applyRoleSetting(const std::string& role, const RoleSetting& setting);
  Status applyRoleSettings(const RoleSettings& settings);
  // What applyRoleSetting() applied, by role (what the store holds).
  const RoleSettings& roleSettings() const { return roleSettings_; }
  struct RoleRow {
    std::string name;
    double weight = 1;
    Resources quota;
    Resources allocated;
    size_t frameworks = 0;
    bool runTime = false;  // a stored run-time setting overrides the flags
  };
  std::vector<RoleRow> roles() const;
  MasterMetrics& metrics() { return metrics_; }
  // Sets the gauges of metrics() from counts kept as the state changes
  // (tasks by state, agents draining) and the registries' sizes: as many
  // steps as there are gauges, whatever the number of tasks and agents.
  void refreshGauges();

  // Read access for /state (master/state_view.h) and tests.
  struct FrameworkRecord {
    std::string id;
    wire::FrameworkInfo info;
    FrameworkHandle handle = 0;
    std::optional<PeerId> peer;
    bool needsOffers = true;
    TimePoint disconnectedAt;
    std::deque<wire::Envelope> pending;  // updates while disconnected
    std::vector<std::string> agentFilterIds;
    Resources minFree;
    double lastSentShare = -1;
    FrameworkGrant grant;   // what the ACLs allow it (run-as users, roles)
    std::optional<TimePoint> starvedSince;  // wants offers, below its target
    // Agents given an executor of this framework (some may have left since):
    // removing the framework visits these, not every agent.
    std::unordered_set<std::string> executorAgents;
  };
  using Frameworks = std::unordered_map<std::string, FrameworkRecord>;
  const Frameworks& frameworks() const { return frameworks_; }
  const MasterOptions& options() const { return options_; }
  const Clock& clock() const { return clock_; }

 private:
  Master(MasterOptions options, const Clock& clock, Outbox& outbox,
         std::unique_ptr<Allocator> allocator);

  // master.cpp: peers, frameworks, agents.
  void onRegisterFramework(PeerId peer, const wire::RegisterFramework& m);
  // registration.cpp: a registration in steps. The id's owner is written to
  // the identity store first (storeAhead); when the store answers,
  // registerFramework runs again on the state of then, and completes.
  struct Registration {
    wire::RegisterFramework m;  // info.id set once chosen
    bool freshId = false;       // the master chose the id
    std::string secret;         // what the claim binds (PeerTable::secretFor)
  };
  void registerFramework(PeerId peer, Registration r);
  void storeThenRegister(PeerId peer, Registration r);
  void identityStored(PeerId peer, const std::string& frameworkId, Status written);
  void completeRegistration(PeerId peer, const Registration& r, const FrameworkGrant& grant);
  // A refusal the scheduler should retry: an error, the link closed (not
  // fatal: its driver reconnects and registers again).
  void refuseForNow(PeerId peer, const std::string& why);
  void readIdentities();
  void identitiesAnswered(Result<StoredIdentities> loaded);
  void onUnregisterFramework(PeerId peer, FrameworkRecord& fw);
  void onRegisterAgent(PeerId peer, const wire::RegisterAgent& m);
  Status adoptAgentTasks(AgentRecord& agent, const wire::RegisterAgent& m);
  using TaskIdsByFramework = std::unordered_map<std::string, std::unordered_set<std::string>>;
  void adoptAgentFrameworks(const wire::RegisterAgent& m);
  void adoptExecutor(AgentRecord& agent, const wire::ExecutorState& ex, TaskIdsByFramework* reported,
                     std::string* problems);
  void loseUnreported(AgentRecord& agent, const TaskIdsByFramework& reported);
  void onHeartbeat(PeerId peer, AgentRecord& agent, const wire::Heartbeat& m);
  void onUsageReport(AgentRecord& agent, const wire::UsageReport& m);
  void schedulerMessage(PeerId peer, FrameworkRecord& fw, const wire::Envelope& e);
  // A frame that broke an input limit: an ErrorMessage (fatal for a
  // registration), and a refused accept's own offers released.
  void refuseFrame(PeerId peer, const PeerLink& link, const wire::Envelope& e, const Error& why);
  void agentMessage(PeerId peer, AgentRecord& agent, const wire::Envelope& e);
  // `grant`: what the ACLs allow it, when it registers itself (kept for
  // later updates from agents).
  FrameworkRecord& ensureFramework(const wire::FrameworkInfo& info,
                                   const FrameworkGrant* grant = nullptr);
  // Checks a RegisterFramework against the ACLs and the id's owner;
  // returns the grant or the reason for refusal.
  Result<FrameworkGrant> authorizeFramework(const PeerLink& link, const wire::RegisterFramework& m);
  Status authorizeAgent(const PeerLink& link, const wire::RegisterAgent& m);
  // The principal that registered a framework ("" when none did).
  const std::string& principalOf(const FrameworkRecord& fw) const;
  void closeUnregistered(TimePoint now);
  void disconnectFramework(FrameworkRecord& fw);
  void removeFramework(const std::string& frameworkId, const std::string& why);
  void disconnectAgent(AgentRecord& agent);
  void recoverAgentHoldings(AgentRecord& agent);
  void removeAgent(const std::string& agentId, const std::string& why);
  // Removes the silent agents among those due for a look (at most
  // kAgentRemovalsPerTickMax; the rest wait for the next tick).
  void checkAgentSilence(TimePoint now);
  std::optional<TimePoint> nextSilenceLook(const AgentRecord& agent, TimePoint now) const;
  // Frameworks past their failover timeout, kept identities unclaimed.
  void checkFailoverTimeouts(TimePoint now);
  Duration failoverTimeoutOf(const wire::FrameworkInfo& info) const;
  FrameworkParams paramsOf(const wire::FrameworkInfo& info, const FrameworkGrant& grant) const;
  void applyStandingFilters(FrameworkRecord& fw);
  // The only writer of FrameworkRecord::agentFilterIds (and so of
  // filtersNaming_).
  void setAgentFilters(FrameworkRecord& fw, std::vector<std::string> agentIds);
  void sendToFramework(FrameworkRecord& fw, const wire::Envelope& e);
  void sendError(PeerId peer, const std::string& message, bool fatal);
  std::string newId(char kind) { return ids_.id(kind); }

  // offers.cpp: allocation, offers, accept, decline.
  void allocateRound(bool fullCycle);
  void sendOffers(const std::vector<Grant>& grants);
  void sendShareUpdates();
  void sendShareUpdate(FrameworkRecord& fw, const Resources& total);
  void onAccept(FrameworkRecord& fw, const wire::AcceptOffers& m);
  // An accept broke an offer rule (`why`) or an input limit: each task
  // ends TASK_ERROR with `reason`, and the sender's own offers it named go
  // back to the allocator now.
  void refuseAccept(FrameworkRecord& fw, const wire::AcceptOffers& m, wire::Reason reason,
                    const std::string& why);
  // Launches what fits of an accept whose offers are `accepted`.
  void launchAccepted(FrameworkRecord& fw, AgentRecord& agent, const wire::AcceptOffers& m,
                      const Resources& offered);
  void onDecline(FrameworkRecord& fw, const wire::DeclineOffers& m);
  Status validateTask(const FrameworkRecord& fw, const AgentRecord& agent,
                      const wire::TaskInfo& task, Resources* charged);
  // The user a task runs as: its executor's or command's user, else the
  // framework's (empty: the agent's --default-user).
  static std::string runAsUser(const FrameworkRecord& fw, const wire::TaskInfo& task);
  void launchTask(FrameworkRecord& fw, AgentRecord& agent, wire::TaskInfo task,
                  Resources charged);
  // Removes an offer. `recoverIt`: return its resources to the pool;
  // `notify`: tell the framework (OfferRescinded).
  void removeOffer(const std::string& offerId, bool recoverIt, bool notify,
                   std::optional<Duration> refuse = std::nullopt);
  void removeOffers(const std::vector<std::string>& offerIds, bool recoverIt, bool notify);
  void expireOffers(TimePoint now);

  // revocation.cpp: policy the paper describes.
  void revokeForStarved(TimePoint now);
  // revocation.cpp: what revokeForStarved gathered, for the placed pass.
  struct RevocationScratch {
    struct Ref {
      FrameworkRecord* fw;
      const TaskRecord* task;
      AgentRecord* agent;
    };
    std::vector<RevocableTask> tasks;
    std::vector<Ref> refs;
    std::unordered_map<AgentHandle, std::vector<size_t>> byAgent;  // indices into tasks
    std::unordered_set<AgentHandle> revokingOn;  // agents with tasks being revoked
  };
  void revokePlaced(TimePoint now, std::vector<RevocationFramework>* inputs, RevocationScratch* s,
                    std::vector<RevocationRole>* roles);
  bool gatherRevocationInputs(TimePoint now, std::vector<RevocationFramework>* inputs,
                              std::vector<RevocationRole>* roles);
  void gatherRevocableTasks(std::vector<RevocationFramework>* inputs, RevocationScratch* s);
  void sendRevocation(FrameworkRecord& fw, const TaskRecord& task);
  // Tasks of this accept already launched count: launchTask records each.
  Status checkLongTaskCap(const AgentRecord& agent, const wire::TaskInfo& task,
                          const Resources& charged) const;

  // tasks.cpp: status updates, kill, acknowledge, reconcile.
  void onStatusUpdate(AgentRecord& agent, const wire::StatusUpdate& m);
  FrameworkRecord* frameworkOfUpdate(AgentRecord& agent, const wire::TaskStatus& status);
  // A task placed on `agent` ended (the task book forgot it): its
  // resources go back to the allocator.
  void freeEnded(AgentRecord& agent, FrameworkRecord& fw, const TaskRecord& ended);
  void onKill(FrameworkRecord& fw, const wire::KillTask& m);
  void onAcknowledge(FrameworkRecord& fw, const wire::Acknowledge& m);
  void onReconcile(FrameworkRecord& fw, const wire::Reconcile& m);
  void sendMasterUpdate(FrameworkRecord& fw, const wire::TaskInfo& task, wire::TaskState state,
                        wire::Reason reason, const std::string& message);

  MasterOptions options_;
  // The flags' roles (options_.policy.roles as given): the defaults that
  // run-time settings override.
  std::map<std::string, RoleConfig> flagRoles_;
  RoleSettings roleSettings_;
  const Clock& clock_;
  Outbox& outbox_;
  std::unique_ptr<Allocator> allocator_;
  PeerTable peers_;
  std::unique_ptr<IdentityStore> identityStore_;  // written through peers_
  bool identitiesReading_ = false;
  TimePoint nextIdentityRead_;
  Duration identityRetry_ = kIdentityLoadRetryFirst;
  std::function<void()> firstIdentityRead_;
  // Registrations waiting for the store, by link (one each) and by id.
  std::unordered_map<PeerId, Registration> registering_;
  std::unordered_map<std::string, PeerId> registeringIds_;
  AgentRegistry agents_;
  Frameworks frameworks_;
  std::unordered_set<std::string> removedFrameworks_;
  std::deque<std::string> removedOrder_;  // removedFrameworks_ oldest first
  std::unordered_map<FrameworkHandle, std::string> frameworkByHandle_;
  OfferBook offers_;
  // Agent id -> the frameworks whose standing filter names it: an agent's
  // registration re-applies only their filters, not every framework's.
  std::unordered_map<std::string, std::unordered_set<std::string>> filtersNaming_;
  // The sum of the frameworks' weights, kept as they come, change and go
  // (a registration's ShareUpdate needs it without a pass over all of
  // them); recomputed by each tick's pass, so rounding never builds up.
  double weightSum_ = 0;
  TimePoint nextFullCycle_;
  TimePoint nextTimeoutCheck_;
  RandomIds ids_;
  bool allocationPending_ = false;
  bool offersHeld_ = false;
  MasterMetrics metrics_;
  // Every task, the only writer of their state (master/task_book.h).
  TaskBook tasks_;
  uint64_t revocations_ = 0;
  std::vector<double> fairScratch_;
  // A round's grants (rounds run after every event batch: no allocation
  // each time).
  std::vector<Grant> grantsScratch_;
};

}  // namespace allot
