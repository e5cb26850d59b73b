#include "sdk/scheduler.h"

#include <algorithm>

#include "base/flags.h"
#include "base/log.h"
#include "ha/detector_factory.h"
#include "proto/reconnecting_link.h"
#include "proto/task_state.h"
#include "proto/validate.h"

namespace allot {

SchedulerDriver::SchedulerDriver(asio::io_context& io, Scheduler& scheduler,
                                 wire::FrameworkInfo info, SchedulerOptions options)
    : io_(io),
      scheduler_(scheduler),
      info_(std::move(info)),
      options_(std::move(options)),
      needsOffers_(options_.needsOffers),
      secret_(options_.frameworkSecret) {}

SchedulerDriver::~SchedulerDriver() = default;

Status SchedulerDriver::start() {
  auto detector = makeLeaderDetector(io_, options_.master);
  if (!detector) return Error{"master address: " + detector.error().describe()};
  auto tls = tlsContextFromFlags(options_.tls, TlsSide::kClient);
  if (!tls) return tls.error();
  ReconnectingLink::Options lo;
  lo.localRole = wire::ROLE_SCHEDULER;
  lo.localName = info_.name();
  lo.peerRole = wire::ROLE_MASTER;
  lo.tls = *tls;
  lo.backoffMin = options_.reconnectMin;
  lo.backoffMax = options_.reconnectMax;
  ReconnectingLink::Callbacks lc;
  // The registration leaves with the Hello: one round trip to registered.
  lc.firstMessage = [this] { return registration(); };
  lc.onMessage = [this](wire::Envelope& e) { onMessage(e); };
  lc.onDisconnected = [this](const std::string& reason) { onClosed(reason); };
  link_ = std::make_unique<ReconnectingLink>(io_, std::move(*detector), lo, lc);
  stopped_ = false;
  link_->start();
  return okStatus();
}

void SchedulerDriver::stop(bool failover) {
  if (stopped_) return;
  stopped_ = true;
  if (!registered_ && !unfinished_.empty()) {
    std::string names;
    for (const auto& id : unfinishedTasks()) names += (names.empty() ? "" : ", ") + id;
    LOG_WARNING("scheduler: stopped while no master is reachable; these tasks may still run: "
                << names << (unfinished_.size() >= kMaxTrackedTasks ? " (and maybe more)" : "")
                << " (the master ends them when this framework's failover timeout passes)");
  }
  if (link_ && registered_ && !failover) {
    wire::Envelope e;
    e.mutable_unregister_framework()->set_framework_id(info_.id());
    (void)link_->send(e);
  }
  if (link_) link_->stop();
  registered_ = false;
}

wire::Envelope SchedulerDriver::registration() const {
  wire::Envelope e;
  auto* reg = e.mutable_register_framework();
  *reg->mutable_info() = info_;
  reg->set_needs_offers(needsOffers_);
  reg->set_framework_secret(secret_);
  *reg->mutable_filters() = filters_;
  return e;
}

void SchedulerDriver::onMessage(const wire::Envelope& e) {
  if (Status valid = validateFromMasterToScheduler(e); !valid) {
    LOG_WARNING("scheduler: refused a message from the master: " << valid.error().describe());
    return scheduler_.error(*this, "refused a message from the master: " + valid.error().describe());
  }
  switch (e.body_case()) {
    case wire::Envelope::kFrameworkRegistered: {
      const auto& r = e.framework_registered();
      bool first = info_.id().empty();
      info_.set_id(r.framework_id());
      secret_ = r.framework_secret();
      registered_ = true;
      everRegistered_ = true;
      link_->registered();
      if (first) {
        scheduler_.registered(*this, r.framework_id(), r.master_id());
      } else {
        scheduler_.reregistered(*this, r.master_id());
      }
      return;
    }
    case wire::Envelope::kResourceOffers: {
      std::vector<wire::Offer> offers(e.resource_offers().offers().begin(),
                                      e.resource_offers().offers().end());
      return scheduler_.resourceOffers(*this, offers);
    }
    case wire::Envelope::kOfferRescinded:
      return scheduler_.offerRescinded(*this, e.offer_rescinded().offer_id());
    case wire::Envelope::kStatusUpdate:
      track(e.status_update().status().task_id(), !isTerminal(e.status_update().status().state()));
      return scheduler_.statusUpdate(*this, e.status_update().status());
    case wire::Envelope::kAgentLost:
      return scheduler_.agentLost(*this, e.agent_lost().agent_id());
    case wire::Envelope::kShareUpdate:
      share_ = e.share_update();
      return;
    case wire::Envelope::kError:
      if (e.error().fatal()) {
        stopped_ = true;
        registered_ = false;
        link_->stop();
      }
      return scheduler_.error(*this, e.error().message());
    default:
      LOG_DEBUG("scheduler: ignoring message field " << e.body_case());
  }
}

void SchedulerDriver::onClosed(const std::string& reason) {
  bool wasRegistered = registered_;
  registered_ = false;
  LOG_DEBUG("scheduler: link to master closed: " << reason);
  if (wasRegistered) scheduler_.disconnected(*this);
}

Status SchedulerDriver::sendIfRegistered(const wire::Envelope& e) {
  if (!registered_ || !link_) return Error{"not registered with a master"};
  return link_->send(e);
}

Status SchedulerDriver::acceptOffer(const std::vector<std::string>& offerIds,
                                    const std::vector<wire::TaskInfo>& tasks,
                                    const wire::Filters& filters) {
  wire::Envelope e;
  auto* a = e.mutable_accept_offers();
  for (const auto& id : offerIds) a->add_offer_ids(id);
  for (const auto& t : tasks) *a->add_tasks() = t;
  *a->mutable_filters() = filters;
  Status sent = sendIfRegistered(e);
  if (sent) {
    for (const auto& t : tasks) track(t.task_id(), true);
  }
  return sent;
}

void SchedulerDriver::track(const std::string& taskId, bool running) {
  if (!running) {
    unfinished_.erase(taskId);
  } else if (unfinished_.size() < kMaxTrackedTasks) {
    unfinished_.insert(taskId);
  }
}

std::vector<std::string> SchedulerDriver::unfinishedTasks() const {
  std::vector<std::string> ids(unfinished_.begin(), unfinished_.end());
  std::sort(ids.begin(), ids.end());
  return ids;
}

Status SchedulerDriver::declineOffer(const std::string& offerId, const wire::Filters& filters) {
  wire::Envelope e;
  e.mutable_decline_offers()->add_offer_ids(offerId);
  *e.mutable_decline_offers()->mutable_filters() = filters;
  return sendIfRegistered(e);
}

Status SchedulerDriver::setNeedsOffers(bool needsOffers) {
  needsOffers_ = needsOffers;
  wire::Envelope e;
  e.mutable_set_needs_offers()->set_needs_offers(needsOffers);
  return registered_ ? sendIfRegistered(e) : okStatus();
}

Status SchedulerDriver::setFilters(const wire::StandingFilters& filters) {
  filters_ = filters;
  wire::Envelope e;
  *e.mutable_set_filters()->mutable_filters() = filters;
  return registered_ ? sendIfRegistered(e) : okStatus();
}

Status SchedulerDriver::killTask(const std::string& taskId, double graceS) {
  wire::Envelope e;
  e.mutable_kill_task()->set_framework_id(info_.id());
  e.mutable_kill_task()->set_task_id(taskId);
  e.mutable_kill_task()->set_grace_s(graceS);
  return sendIfRegistered(e);
}

Status SchedulerDriver::acknowledge(const wire::TaskStatus& status) {
  if (status.update_id().empty()) return okStatus();
  wire::Envelope e;
  auto* a = e.mutable_acknowledge();
  a->set_framework_id(info_.id());
  a->set_agent_id(status.agent_id());
  a->set_task_id(status.task_id());
  a->set_update_id(status.update_id());
  return sendIfRegistered(e);
}

Status SchedulerDriver::reconcile(const std::vector<wire::TaskRef>& tasks) {
  wire::Envelope e;
  for (const auto& t : tasks) *e.mutable_reconcile()->add_tasks() = t;
  if (tasks.empty()) e.mutable_reconcile();
  return sendIfRegistered(e);
}

}  // namespace allot
