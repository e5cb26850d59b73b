#include "sdk/scheduler.h"

#include "base/flags.h"
#include "base/log.h"
#include "proto/connection.h"

namespace allot {

SchedulerDriver::SchedulerDriver(asio::io_context& io, Scheduler& scheduler,
                                 wire::FrameworkInfo info, SchedulerOptions options)
    : io_(io),
      scheduler_(scheduler),
      info_(std::move(info)),
      options_(std::move(options)),
      reconnectTimer_(io),
      backoff_(options_.reconnectMin),
      needsOffers_(options_.needsOffers) {}

SchedulerDriver::~SchedulerDriver() {
  alive_.reset();
  if (connection_) connection_->close("scheduler driver destroyed");
}

Status SchedulerDriver::start() {
  auto hp = parseHostPort(options_.master);
  if (!hp) return Error{"master address: " + hp.error().describe()};
  host_ = hp->host;
  port_ = hp->port;
  stopped_ = false;
  connect();
  return okStatus();
}

void SchedulerDriver::stop(bool failover) {
  if (stopped_) return;
  stopped_ = true;
  reconnectTimer_.cancel();
  if (connection_ && registered_ && !failover) {
    wire::Envelope e;
    e.mutable_unregister_framework()->set_framework_id(info_.id());
    (void)connection_->send(e);
  }
  if (connection_) connection_->closeAfterFlush("scheduler stopped");
  registered_ = false;
}

void SchedulerDriver::connect() {
  std::weak_ptr<Alive> alive = alive_;
  asyncConnect(io_, host_, port_, [this, alive](Result<asio::ip::tcp::socket> socket) {
    if (alive.expired() || stopped_) return;
    if (!socket) {
      LOG_DEBUG("scheduler: " << socket.error().describe());
      scheduleReconnect();
      return;
    }
    onConnected(std::move(*socket));
  });
}

void SchedulerDriver::onConnected(asio::ip::tcp::socket socket) {
  Connection::Options copts;
  copts.localRole = wire::ROLE_SCHEDULER;
  copts.localName = info_.name();
  copts.acceptRoles = {wire::ROLE_MASTER};
  connection_ = Connection::create(std::move(socket), copts);
  std::weak_ptr<Alive> alive = alive_;
  Connection::Handlers handlers;
  handlers.onHello = [this, alive](const wire::Hello&) {
    if (alive.expired()) return;
    wire::Envelope e;
    auto* reg = e.mutable_register_framework();
    *reg->mutable_info() = info_;
    reg->set_needs_offers(needsOffers_);
    *reg->mutable_filters() = filters_;
    (void)connection_->send(e);
  };
  handlers.onMessage = [this, alive](wire::Envelope& e) {
    if (!alive.expired()) onMessage(e);
  };
  handlers.onClose = [this, alive, conn = connection_.get()](const std::string& reason) {
    if (!alive.expired() && connection_.get() == conn) onClosed(reason);
  };
  connection_->start(std::move(handlers));
}

void SchedulerDriver::onMessage(const wire::Envelope& e) {
  switch (e.body_case()) {
    case wire::Envelope::kFrameworkRegistered: {
      const auto& r = e.framework_registered();
      bool first = info_.id().empty();
      info_.set_id(r.framework_id());
      registered_ = true;
      everRegistered_ = true;
      backoff_ = options_.reconnectMin;
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
      return scheduler_.statusUpdate(*this, e.status_update().status());
    case wire::Envelope::kAgentLost:
      return scheduler_.agentLost(*this, e.agent_lost().agent_id());
    case wire::Envelope::kShareUpdate:
      share_ = e.share_update();
      return;
    case wire::Envelope::kError:
      if (e.error().fatal()) stopped_ = true;
      return scheduler_.error(*this, e.error().message());
    default:
      LOG_DEBUG("scheduler: ignoring message field " << e.body_case());
  }
}

void SchedulerDriver::onClosed(const std::string& reason) {
  bool wasRegistered = registered_;
  registered_ = false;
  connection_.reset();
  LOG_DEBUG("scheduler: link to master closed: " << reason);
  if (wasRegistered) scheduler_.disconnected(*this);
  if (!stopped_) scheduleReconnect();
}

void SchedulerDriver::scheduleReconnect() {
  reconnectTimer_.expires_after(backoff_);
  backoff_ = std::min(backoff_ * 2, options_.reconnectMax);
  std::weak_ptr<Alive> alive = alive_;
  reconnectTimer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired() || stopped_) return;
    connect();
  });
}

Status SchedulerDriver::sendIfRegistered(const wire::Envelope& e) {
  if (!registered_ || !connection_) return Error{"not registered with a master"};
  return connection_->send(e);
}

Status SchedulerDriver::acceptOffer(const std::vector<std::string>& offerIds,
                                    const std::vector<wire::TaskInfo>& tasks,
                                    const wire::Filters& filters) {
  wire::Envelope e;
  auto* a = e.mutable_accept_offers();
  for (const auto& id : offerIds) a->add_offer_ids(id);
  for (const auto& t : tasks) *a->add_tasks() = t;
  *a->mutable_filters() = filters;
  return sendIfRegistered(e);
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
