#include "master/metrics.h"

#include <algorithm>

#include <prometheus/text_serializer.h>

namespace allot {

namespace p = prometheus;

MasterMetrics::MasterMetrics() : registry_(std::make_shared<p::Registry>()), loop_(*registry_, "master") {
  addTrafficMetrics();
  addStateGauges();
  addScrapeMetrics();
}

p::Counter* MasterMetrics::counter(const char* name, const char* help) {
  return &p::BuildCounter().Name(name).Help(help).Register(*registry_).Add({});
}

p::Gauge* MasterMetrics::gauge(const char* name, const char* help) {
  return &p::BuildGauge().Name(name).Help(help).Register(*registry_).Add({});
}

void MasterMetrics::addTrafficMetrics() {
  offersSent_ = counter("allot_master_offers_sent_total", "Offers sent to frameworks.");
  offersDeclined_ = counter("allot_master_offers_declined_total", "Offers frameworks declined.");
  offersRescinded_ = counter("allot_master_offers_rescinded_total",
                             "Offers rescinded (timed out, agent or framework gone, drain).");
  messagesIn_ = counter("allot_master_messages_received_total",
                        "Protocol messages received from agents and schedulers.");
  messagesOut_ = counter("allot_master_messages_sent_total",
                         "Protocol messages sent to agents and schedulers.");
  operatorKills_ = counter("allot_master_operator_kills_total",
                           "Tasks killed through the operator API (allotctl kill).");
  acceptPauses_ = counter("allot_master_accept_pauses_total",
                          "Times the master stopped accepting because --max-pending-handshakes "
                          "connections were mid-handshake (the rest waited in the listen backlog).");
  abandoned_ = counter("allot_master_connections_abandoned_total",
                       "Accepted connections whose peer had already closed (gave up in the "
                       "backlog); closed without a handshake.");
  // 10 us .. 1 s: an event-driven round is microseconds, a full cycle over
  // 10,000 agents a few milliseconds.
  allocationSeconds_ = &p::BuildHistogram()
                            .Name("allot_master_allocation_seconds")
                            .Help("Time of one allocation round (event-driven or full cycle).")
                            .Register(*registry_)
                            .Add({}, p::Histogram::BucketBoundaries{1e-5, 1e-4, 5e-4, 1e-3, 5e-3,
                                                                    1e-2, 5e-2, 0.1, 0.5, 1});
}

void MasterMetrics::addStateGauges() {
  auto& tasks = p::BuildGauge()
                   .Name("allot_master_tasks")
                   .Help("Tasks the master knows, by latest state.")
                   .Register(*registry_);
  for (int s = wire::TaskState_MIN; s <= wire::TaskState_MAX; ++s) {
    if (!wire::TaskState_IsValid(s)) continue;
    auto state = static_cast<wire::TaskState>(s);
    tasksByState_[s] = &tasks.Add({{"state", wire::TaskState_Name(state)}});
  }
  agents_ = gauge("allot_master_agents", "Registered agents (connected or awaiting re-registration).");
  draining_ = gauge("allot_master_agents_draining", "Agents in maintenance (allotctl drain).");
  frameworks_ = gauge("allot_master_frameworks", "Registered frameworks.");
  pendingHandshakes_ = gauge("allot_master_pending_handshakes",
                             "Connections accepted whose TLS handshake + Hello has not finished.");
  pendingHandshakesMax_ = gauge("allot_master_pending_handshakes_max",
                                "The most connections ever mid-handshake at once (never above "
                                "--max-pending-handshakes).");
  offers_ = gauge("allot_master_offers_outstanding", "Offers sent and not yet answered.");
}

void MasterMetrics::addScrapeMetrics() {
  scrapeSeconds_ = &p::BuildHistogram()
                        .Name("allot_master_metrics_scrape_seconds")
                        .Help("Loop time of each GET /metrics: setting the gauges and writing this text.")
                        .Register(*registry_)
                        .Add({}, p::Histogram::BucketBoundaries{1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3,
                                                                2e-3, 5e-3, 1e-2});
  auto& scrapeParts = p::BuildCounter()
                          .Name("allot_master_metrics_scrape_part_seconds_total")
                          .Help("allot_master_metrics_scrape_seconds by part: part=\"gauges\" setting the "
                                "gauges from the master's state, part=\"serialize\" writing the text.")
                          .Register(*registry_);
  scrapeGauges_ = &scrapeParts.Add({{"part", "gauges"}});
  scrapeSerialize_ = &scrapeParts.Add({{"part", "serialize"}});
  scrapeMax_ = gauge("allot_master_metrics_scrape_max_seconds",
                     "The longest GET /metrics on the loop since the master started.");
}

void MasterMetrics::scraped(double gaugesSeconds, double serializeSeconds) {
  double total = gaugesSeconds + serializeSeconds;
  scrapeSeconds_->Observe(total);
  scrapeGauges_->Increment(std::max(gaugesSeconds, 0.0));
  scrapeSerialize_->Increment(std::max(serializeSeconds, 0.0));
  if (total > scrapeMax_->Value()) scrapeMax_->Set(total);
}

std::string MasterMetrics::serialize() const {
  auto families = registry_->Collect();
  loop_.collect(families);
  return p::TextSerializer().Serialize(families);
}

}  // namespace allot
