// What one GET /state costs at scale, in CPU time (meaningful on a busy
// machine, where wall time is not): the master's loop part (the sliced
// copies of MasterStateView::step) and the worker's part (StateBatch::render),
// on a real Master (fake clock, no sockets) with N agents of cpus:2;mem:2048,
// 50 frameworks, two tasks per agent and one outstanding offer per agent,
// the shape bench/scale/state_probe.sh makes. Prints one RESULT line per
// repetition.
//
//   build/bench/scale/state_probe_render [--agents N] [--reps R]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "master/master.h"
#include "master/state_view.h"
#include "master/state_view_cache.h"

namespace allot {
namespace {

double threadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

class OfferBox final : public Outbox {
 public:
  void send(PeerId peer, const wire::Envelope& e) override {
    if (e.body_case() == wire::Envelope::kResourceOffers) offers[peer].push_back(e);
  }
  void close(PeerId, const std::string&) override {}
  std::map<PeerId, std::vector<wire::Envelope>> offers;
};

void connect(Master& m, PeerId peer, wire::Role role) {
  wire::Hello h;
  h.set_role(role);
  m.peerConnected(peer, h, {});
}

// Agents, frameworks, then allocation rounds whose offers each framework
// accepts with two tasks, until the agents are full; a last round leaves
// the offers of what is left outstanding.
void populate(Master& m, OfferBox& box, int agents, int frameworks) {
  PeerId peer = 1;
  for (int i = 0; i < agents; ++i, ++peer) {
    connect(m, peer, wire::ROLE_AGENT);
    wire::Envelope e;
    e.mutable_register_agent()->mutable_info()->set_hostname("node" + std::to_string(i));
    Resources::parse("cpus:2;mem:2048")->toWire(e.mutable_register_agent()->mutable_info()->mutable_resources());
    m.peerMessage(peer, e);
  }
  std::vector<PeerId> fws;
  for (int i = 0; i < frameworks; ++i, ++peer) {
    connect(m, peer, wire::ROLE_SCHEDULER);
    wire::Envelope e;
    e.mutable_register_framework()->mutable_info()->set_name("load" + std::to_string(i));
    e.mutable_register_framework()->set_needs_offers(true);
    m.peerMessage(peer, e);
    fws.push_back(peer);
  }
  int taskN = 0;
  for (int round = 0; round < 3; ++round) {
    m.allocate();
    for (PeerId f : fws) {
      auto batches = std::move(box.offers[f]);
      box.offers[f].clear();
      for (const auto& batch : batches) {
        for (const auto& o : batch.resource_offers().offers()) {
          wire::Envelope a;
          a.mutable_accept_offers()->add_offer_ids(o.offer_id());
          for (int k = 0; k < 2; ++k) {
            auto* t = a.mutable_accept_offers()->add_tasks();
            t->set_task_id("task-" + std::to_string(taskN++));
            t->set_name("load task");
            t->mutable_command()->set_shell("sleep 10");
            Resources::parse("cpus:0.9;mem:900")->toWire(t->mutable_resources());
          }
          m.peerMessage(f, a);
        }
      }
    }
  }
  m.allocate();
}

}  // namespace
}  // namespace allot

int main(int argc, char** argv) {
  using namespace allot;
  int agents = 10000, reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--agents")) agents = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
  }
  setLogLevel(LogLevel::kError);
  FakeClock clock;
  OfferBox box;
  MasterOptions options;
  options.masterId = "bench";
  options.minOffer = *Resources::parse("cpus:0.01;mem:32");
  auto master = Master::create(options, clock, box);
  if (!master) return 1;
  populate(**master, box, agents, 50);
  state::State whole = MasterStateView::snapshot(**master);
  for (int rep = 0; rep < reps; ++rep) {
    MasterStateView view(**master, 1, 0);
    double loopMs = 0, workerMs = 0, sliceMaxMs = 0;
    double t0 = threadCpuMs();
    size_t bytes = view.header().size(), slices = 0, batches = 0;
    loopMs += threadCpuMs() - t0;
    while (!view.done()) {
      // One loop turn as StateCache runs it: batches until the budget is
      // used up (the worker's queue limit aside).
      MasterStateView::Slice slice;
      slice.deadline = std::chrono::steady_clock::now() + StateCache::kSliceBudget;
      double s0 = threadCpuMs();
      std::vector<std::unique_ptr<StateBatch>> made;
      while (!view.done() && std::chrono::steady_clock::now() < slice.deadline) {
        auto batch = view.step(slice);
        if (!batch) break;
        made.push_back(std::move(batch));
      }
      double s1 = threadCpuMs();
      loopMs += s1 - s0;
      sliceMaxMs = std::max(sliceMaxMs, s1 - s0);
      ++slices;
      for (const auto& batch : made) {
        ++batches;
        double w0 = threadCpuMs();
        bytes += batch->render().size();
        workerMs += threadCpuMs() - w0;
      }
    }
    printf("RESULT agents=%d tasks=%d offers=%d bytes=%zu loop_cpu_ms=%.1f slices=%zu slice_max_cpu_ms=%.2f "
           "batches=%zu worker_cpu_ms=%.1f\n",
           whole.master().agents_size(), whole.master().tasks_size(), whole.master().offers_size(), bytes,
           loopMs, slices, sliceMaxMs, batches, workerMs);
  }
  return 0;
}
