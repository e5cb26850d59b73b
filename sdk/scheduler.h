// The allot scheduler library: everything a framework author needs to
// share a cluster through allot (SPEC section 2, the paper's Table 1).
//
// A framework implements Scheduler (the callbacks) and drives a
// SchedulerDriver (the actions) on its own Asio io_context:
//
//   class MyScheduler : public allot::Scheduler {
//     void resourceOffers(SchedulerDriver& d, const std::vector<wire::Offer>& offers) override {
//       for (const auto& o : offers) d.acceptOffer({o.offer_id()}, tasksFor(o));
//     }
//     void statusUpdate(SchedulerDriver& d, const wire::TaskStatus& s) override {
//       d.acknowledge(s);   // or the agent keeps resending it
//     }
//   };
//   asio::io_context io;
//   MyScheduler scheduler;
//   wire::FrameworkInfo info;  info.set_name("my-framework");
//   SchedulerDriver driver(io, scheduler, info, {.master = "127.0.0.1:5050"});
//   driver.start();
//   io.run();                  // callbacks run here
//
// Messages are the Protocol Buffers types of proto/allot.proto (namespace
// allot::wire): Offer, TaskInfo, TaskStatus, Filters, StandingFilters.
//
// Guarantees and contract:
// - Offers: each offer is one agent's resources, valid until accepted,
//   declined, rescinded (offerRescinded) or the driver disconnects. Resources
//   you neither accept nor decline count toward your share until the master's
//   offer timeout rescinds them: decline what you do not want.
// - Status updates arrive at least once. Updates with a non-empty update_id
//   must be acknowledged (acknowledge()), or the agent resends them.
// - Connection loss: the driver reconnects with exponential backoff and full
//   jitter (reconnectMin..reconnectMax; proto/reconnecting_link.h), follows
//   the leading master when `master` is a zk:// group, and re-registers with the same framework id;
//   disconnected() then reregistered() are called. Tasks keep running for
//   FrameworkInfo.failover_timeout_s (or the master's default). Actions while
//   disconnected return an error (offers are void anyway); setNeedsOffers()
//   and setFilters() are remembered and re-applied on reconnect.
// - Thread: every method and callback on the io_context's thread. Callbacks
//   may call any action. The driver must outlive io_context::run() or be
//   stopped first; destroying it cancels all its callbacks.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/asio.h"
#include "base/clock.h"
#include "base/result.h"
#include "proto/allot.pb.h"
#include "proto/tls.h"

namespace allot {

class SchedulerDriver;

// How many unfinished task ids a driver remembers for stop()'s message
// (beyond it, the message says some are not named).
constexpr size_t kMaxTrackedTasks = 100000;

class Scheduler {
 public:
  virtual ~Scheduler() = default;

  // First registration: the master assigned `frameworkId`; keep it to fail
  // over a scheduler later (set FrameworkInfo.id).
  virtual void registered(SchedulerDriver& driver, const std::string& frameworkId,
                          const std::string& masterId) {}
  // Registration with an existing id succeeded (reconnect or failover).
  virtual void reregistered(SchedulerDriver& driver, const std::string& masterId) {}
  // The link to the master dropped; the driver is reconnecting.
  virtual void disconnected(SchedulerDriver& driver) {}
  virtual void resourceOffers(SchedulerDriver& driver, const std::vector<wire::Offer>& offers) = 0;
  virtual void offerRescinded(SchedulerDriver& driver, const std::string& offerId) {}
  virtual void statusUpdate(SchedulerDriver& driver, const wire::TaskStatus& status) = 0;
  // The agent was removed; its tasks were reported LOST before this call.
  virtual void agentLost(SchedulerDriver& driver, const std::string& agentId) {}
  // The master reported a problem. `fatal`: it closed the link for good
  // (e.g. another scheduler took over this framework); the driver stops.
  // Also called (the driver keeps running) for a message from the master
  // that fails validation (proto/validate.h: too many offers, an id over
  // its limit...): the message is dropped, nothing else sees it.
  virtual void error(SchedulerDriver& driver, const std::string& message) {}
};

struct SchedulerOptions {
  // HOST:PORT, or zk://host:port,.../path to follow the elected master.
  std::string master = "127.0.0.1:5050";
  // Mutual TLS when set (all three files; proto/tls.h): the certificate
  // should be a `framework` one (scripts/allot-certs).
  TlsFiles tls;
  Duration reconnectMin = std::chrono::milliseconds(100);
  Duration reconnectMax = std::chrono::seconds(5);
  bool needsOffers = true;  // false: register suppressed
  // With FrameworkInfo.id set by a new scheduler process taking over its
  // framework on a plaintext link: the secret the master gave the first one
  // (frameworkSecret()). Over TLS the principal proves ownership instead.
  std::string frameworkSecret;
};

class SchedulerDriver {
 public:
  SchedulerDriver(asio::io_context& io, Scheduler& scheduler, wire::FrameworkInfo info,
                  SchedulerOptions options);
  ~SchedulerDriver();
  SchedulerDriver(const SchedulerDriver&) = delete;
  SchedulerDriver& operator=(const SchedulerDriver&) = delete;

  // Starts connecting. Fails only on a malformed master address or
  // unusable TLS files.
  Status start();
  // Stops the driver, at once (nothing waits for the master): call it on
  // SIGINT or SIGTERM too. failover=false unregisters the framework (the
  // master kills its tasks); true just disconnects so another scheduler can
  // take over within the failover timeout. Stopped while no master is
  // reachable, it logs which tasks may still run (unfinishedTasks(): the
  // master ends them once the framework's failover timeout passes).
  void stop(bool failover = false);
  // Tasks this driver launched or heard of in a non-terminal state and has
  // not seen end (at most kMaxTrackedTasks; sorted).
  std::vector<std::string> unfinishedTasks() const;

  // Launches `tasks` on the resources of `offerIds` (all from one agent).
  // Unused resources are refused for filters.refuse_seconds (default 5 s).
  // Each task gets STAGING..terminal updates; invalid ones TASK_ERROR.
  Status acceptOffer(const std::vector<std::string>& offerIds,
                     const std::vector<wire::TaskInfo>& tasks,
                     const wire::Filters& filters = wire::Filters());
  Status declineOffer(const std::string& offerId, const wire::Filters& filters = wire::Filters());
  // false: no more offers until called with true (suppress / revive).
  Status setNeedsOffers(bool needsOffers);
  // Standing filters: only these agents / only agents with this much free.
  Status setFilters(const wire::StandingFilters& filters);
  // The latest share the master reported: guaranteed and allocated
  // resources and the dominant share. Empty before registration.
  const wire::ShareUpdate& guaranteedShare() const { return share_; }
  // grace_s 0: the task's own kill_grace_s (or the agent's default).
  Status killTask(const std::string& taskId, double graceS = 0);
  // Acknowledges a status update (no-op for those without update_id).
  Status acknowledge(const wire::TaskStatus& status);
  // Asks for the latest state of these tasks (empty: all of this framework's).
  Status reconcile(const std::vector<wire::TaskRef>& tasks);

  const std::string& frameworkId() const { return info_.id(); }
  // The secret the master handed out with the id (empty until registered).
  const std::string& frameworkSecret() const { return secret_; }
  bool registered() const { return registered_; }
  // True after stop() or a fatal ErrorMessage (the master refused us).
  bool stopped() const { return stopped_; }

 private:
  wire::Envelope registration() const;
  void onMessage(const wire::Envelope& e);
  void onClosed(const std::string& reason);
  Status sendIfRegistered(const wire::Envelope& e);
  void track(const std::string& taskId, bool running);

  asio::io_context& io_;
  Scheduler& scheduler_;
  wire::FrameworkInfo info_;
  SchedulerOptions options_;
  std::unique_ptr<class ReconnectingLink> link_;
  wire::StandingFilters filters_;
  wire::ShareUpdate share_;
  bool needsOffers_ = true;
  std::string secret_;  // from FrameworkRegistered; presented on re-registration
  bool registered_ = false;
  bool everRegistered_ = false;
  bool stopped_ = true;
  // Hashed: every launch and every end touches it (sorted only when read).
  std::unordered_set<std::string> unfinished_;
};

}  // namespace allot
