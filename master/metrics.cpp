#include "master/metrics.h"

#include <algorithm>

#include <prometheus/text_serializer.h>

namespace allot {

namespace p = prometheus;

MasterMetrics::MasterMetrics() : registry_(std::make_shared<p::Registry>()) {
  addTrafficMetrics();
  addStateGauges();
  addLoopMetrics();
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

void MasterMetrics::addLoopMetrics() {
  loopLateness_ = &p::BuildHistogram()
                       .Name("allot_master_loop_lateness_seconds")
                       .Help("How late each tick of the loop's stall meter ran (a blocked loop makes it late).")
                       .Register(*registry_)
                       .Add({}, p::Histogram::BucketBoundaries{1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1,
                                                               0.2, 0.5, 1});
  loopOwnLateness_ = &p::BuildHistogram()
                          .Name("allot_master_loop_own_lateness_seconds")
                          .Help("Each tick's lateness less the time the loop's thread waited for a CPU: "
                                "what the loop's own work or blocking delayed it by.")
                          .Register(*registry_)
                          .Add({}, p::Histogram::BucketBoundaries{1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1,
                                                                  0.2, 0.5, 1});
  loopLatenessMax_ = gauge("allot_master_loop_lateness_max_seconds",
                           "The longest lateness of the loop's stall meter since the master started.");
  lateTicks_ = &p::BuildCounter()
                    .Name("allot_master_loop_late_ticks_total")
                    .Help("Ticks of the loop's stall meter 10 ms late or more, by the section of the "
                          "loop's work that took the most time since the previous tick.")
                    .Register(*registry_);
  auto& lateSeconds = p::BuildCounter()
                          .Name("allot_master_loop_late_seconds_total")
                          .Help("The lateness of the ticks 10 ms late or more, summed: part=\"cpu_wait\" the "
                                "loop's thread spent waiting for a CPU, part=\"loop\" the rest (its own "
                                "work or blocking).")
                          .Register(*registry_);
  lateCpuWait_ = &lateSeconds.Add({{"part", "cpu_wait"}});
  lateLoop_ = &lateSeconds.Add({{"part", "loop"}});
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

namespace {

// The part of a tick's lateness its thread spent waiting for a CPU (the
// stall meter's wait spans the whole period, so it may exceed the
// lateness): within [0, lateness].
double cpuWaitWithin(double lateSeconds, double cpuWaitSeconds) {
  return std::clamp(cpuWaitSeconds, 0.0, std::max(lateSeconds, 0.0));
}

}  // namespace

void MasterMetrics::lateTick(const std::string& section, double lateSeconds, double cpuWaitSeconds) {
  lateTicks_->Add({{"section", section}}).Increment();
  double wait = cpuWaitWithin(lateSeconds, cpuWaitSeconds);
  lateCpuWait_->Increment(wait);
  lateLoop_->Increment(std::max(lateSeconds - wait, 0.0));
}

void MasterMetrics::loopTick(double lateSeconds, double cpuWaitSeconds) {
  loopLateness_->Observe(lateSeconds);
  loopOwnLateness_->Observe(std::max(lateSeconds - cpuWaitWithin(lateSeconds, cpuWaitSeconds), 0.0));
  if (lateSeconds > loopLatenessMax_->Value()) loopLatenessMax_->Set(lateSeconds);
}

std::string MasterMetrics::serialize() const {
  return p::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace allot
