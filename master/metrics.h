// MasterMetrics: the master's Prometheus metrics (prometheus-cpp core's
// registry; served as text by GET /metrics). Counters and the allocation
// histogram are updated where the events happen; gauges (agents,
// frameworks, tasks by state, offers) are set when scraped from counts the
// Master keeps as its state changes (Master::refreshGauges()). The loop's
// diagnostics are allot_master_loop_* (diag/loop_metrics.h). Names follow
// the Prometheus conventions: allot_ prefix, base units, _total on
// counters.
//
// Thread: the master's loop thread (the registry is thread-safe anyway).
#pragma once

#include <array>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "diag/loop_metrics.h"
#include "proto/allot.pb.h"

namespace allot {

class MasterMetrics {
 public:
  MasterMetrics();

  prometheus::Counter& offersSent() { return *offersSent_; }
  prometheus::Counter& offersDeclined() { return *offersDeclined_; }
  prometheus::Counter& offersRescinded() { return *offersRescinded_; }
  prometheus::Counter& messagesIn() { return *messagesIn_; }
  prometheus::Counter& messagesOut() { return *messagesOut_; }
  prometheus::Counter& tasksKilledByOperator() { return *operatorKills_; }
  prometheus::Histogram& allocationSeconds() { return *allocationSeconds_; }
  // The accept path (master/server.cpp), set where it happens.
  prometheus::Counter& acceptPauses() { return *acceptPauses_; }
  prometheus::Counter& connectionsAbandoned() { return *abandoned_; }
  prometheus::Gauge& pendingHandshakes() { return *pendingHandshakes_; }
  prometheus::Gauge& pendingHandshakesMax() { return *pendingHandshakesMax_; }
  // The loop's stall meter and sections (master/server.h LoopSection):
  // whatever delays the loop (a long handler, a /state request) delays
  // offers and replies by as much.
  LoopMetrics& loop() { return loop_; }
  // One GET /metrics on the loop took `gaugesSeconds` to set the gauges
  // from the master's state and `serializeSeconds` to write the text
  // (shown from the next scrape on).
  void scraped(double gaugesSeconds, double serializeSeconds);

  // Gauges, set before each scrape. allot_master_tasks{state="TASK_..."}: every state's series exists
  // from the start (0 until a task is in it).
  prometheus::Gauge& tasks(wire::TaskState state) { return *tasksByState_[state]; }
  prometheus::Gauge& agents() { return *agents_; }
  prometheus::Gauge& agentsDraining() { return *draining_; }
  prometheus::Gauge& frameworks() { return *frameworks_; }
  prometheus::Gauge& offersOutstanding() { return *offers_; }

  // The whole registry in the Prometheus text format.
  std::string serialize() const;

 private:
  prometheus::Counter* counter(const char* name, const char* help);
  prometheus::Gauge* gauge(const char* name, const char* help);
  void addTrafficMetrics();  // offers, messages, connections, allocation time
  void addStateGauges();     // tasks by state, agents, frameworks, offers, handshakes
  void addScrapeMetrics();   // /metrics' own cost

  std::shared_ptr<prometheus::Registry> registry_;
  LoopMetrics loop_;
  prometheus::Counter* offersSent_;
  prometheus::Counter* offersDeclined_;
  prometheus::Counter* offersRescinded_;
  prometheus::Counter* messagesIn_;
  prometheus::Counter* messagesOut_;
  prometheus::Counter* operatorKills_;
  prometheus::Histogram* allocationSeconds_;
  prometheus::Counter* acceptPauses_;
  prometheus::Counter* abandoned_;
  prometheus::Gauge* pendingHandshakes_;
  prometheus::Gauge* pendingHandshakesMax_;
  prometheus::Histogram* scrapeSeconds_;
  prometheus::Counter* scrapeGauges_;
  prometheus::Counter* scrapeSerialize_;
  prometheus::Gauge* scrapeMax_;
  std::array<prometheus::Gauge*, wire::TaskState_ARRAYSIZE> tasksByState_{};
  prometheus::Gauge* agents_;
  prometheus::Gauge* draining_;
  prometheus::Gauge* frameworks_;
  prometheus::Gauge* offers_;
};

}  // namespace allot
