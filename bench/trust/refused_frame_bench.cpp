// CPU per hostile frame at the master (the target: every refused frame
// costs under 10 ms of CPU). Each case is a worst-case frame at or just past
// a limit of proto/input_limits.h, fed as bytes through the FrameDecoder
// and Master::peerMessage exactly as the server does. In the same run, the
// anchor: decoding the same bytes alone (protobuf parse), the floor any
// receiver pays; the "vs_parse" counter is handling / parse.
#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>

#include "base/clock.h"
#include "master/master.h"
#include "proto/frame.h"
#include "proto/input_limits.h"
#include "proto/resources.h"

namespace allot {
namespace {

class NullOutbox final : public Outbox {
 public:
  void send(PeerId, const wire::Envelope& e) override {
    if (e.has_agent_registered()) {
      secret = e.agent_registered().agent_secret();
      agentId = e.agent_registered().agent_id();
    }
    if (e.has_framework_registered()) {
      frameworkId = e.framework_registered().framework_id();
      frameworkSecret = e.framework_registered().framework_secret();
    }
  }
  void close(PeerId, const std::string&) override {}
  std::string secret, agentId, frameworkId, frameworkSecret;
};

constexpr PeerId kScheduler = 1;
constexpr PeerId kAgent = 2;

struct Fixture {
  FakeClock clock;
  NullOutbox out;
  std::unique_ptr<Master> master;
  std::string agentId;

  Fixture() {
    MasterOptions options;
    options.masterId = "bench";
    options.minOffer = *Resources::parse("cpus:0.01;mem:32");
    master = std::move(*Master::create(options, clock, out));
    wire::Hello h;
    h.set_role(wire::ROLE_SCHEDULER);
    master->peerConnected(kScheduler, h);
    wire::Envelope reg;
    reg.mutable_register_framework()->mutable_info()->set_name("bench");
    master->peerMessage(kScheduler, reg);
    h.set_role(wire::ROLE_AGENT);
    master->peerConnected(kAgent, h);
  }
};

std::string frameOf(const wire::Envelope& e) {
  std::string bytes;
  if (!appendFrame(e, &bytes)) std::abort();
  return bytes;
}

void runCase(benchmark::State& state, PeerId peer, const std::function<void(wire::Envelope&)>& build) {
  Fixture f;
  wire::Envelope e;
  build(e);
  std::string bytes = frameOf(e);
  FrameDecoder decoder;
  wire::Envelope scratch;
  // Anchor: the parse alone, timed in the same process just before.
  auto parseStart = std::chrono::steady_clock::now();
  constexpr int kParseRounds = 5;
  for (int i = 0; i < kParseRounds; ++i) {
    if (!scratch.ParseFromArray(bytes.data() + kFrameHeaderBytes, static_cast<int>(bytes.size() - kFrameHeaderBytes))) std::abort();
  }
  double parseNs = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - parseStart).count() / kParseRounds;
  for (auto _ : state) {
    decoder.append(bytes.data(), bytes.size());
    auto got = decoder.next(&scratch);
    if (!got.ok() || !*got) std::abort();
    f.master->peerMessage(peer, scratch);
  }
  state.counters["frame_bytes"] = static_cast<double>(bytes.size());
  state.counters["parse_ms"] = parseNs / 1e6;
  state.SetLabel("refused frame target: < 10 ms CPU");
}

std::string big(size_t n) { return std::string(n, 'x'); }

void BM_AcceptTasksOverLimit(benchmark::State& state) {
  runCase(state, kScheduler, [](wire::Envelope& e) {
    e.mutable_accept_offers()->add_offer_ids("o");
    for (size_t i = 0; i <= limits::kTasksPerAcceptMax; ++i) {
      auto* t = e.mutable_accept_offers()->add_tasks();
      t->set_task_id("t" + std::to_string(i));
      t->mutable_command()->set_shell(big(8000));
    }
  });
}

void BM_AcceptArgvOverLimit(benchmark::State& state) {
  runCase(state, kScheduler, [](wire::Envelope& e) {
    auto* c = e.mutable_accept_offers()->add_tasks()->mutable_command();
    for (size_t i = 0; i <= limits::kArgvCountMax; ++i) c->add_argv(big(200));
  });
}

// Within every limit: 32 resources x 1024 ranges in one task, refused for
// its unknown offer only after the ranges were merged.
void BM_AcceptMaxRanges(benchmark::State& state) {
  runCase(state, kScheduler, [](wire::Envelope& e) {
    e.mutable_accept_offers()->add_offer_ids("unknown");
    auto* t = e.mutable_accept_offers()->add_tasks();
    t->set_task_id("t");
    for (size_t r = 0; r < limits::kResourcesPerListMax; ++r) {
      auto* res = t->add_resources();
      res->set_name("ports" + std::to_string(r));
      for (uint64_t i = 0; i < limits::kRangesPerResourceMax; ++i) {
        auto* range = res->add_ranges();
        range->set_begin((limits::kRangesPerResourceMax - i) * 4);
        range->set_end((limits::kRangesPerResourceMax - i) * 4 + 1);
      }
    }
  });
}

void BM_IdOfAFullFrame(benchmark::State& state) {
  runCase(state, kScheduler, [](wire::Envelope& e) {
    e.mutable_reconcile()->add_tasks()->set_task_id(big(kMaxFrameBytes - 64));
  });
}

void BM_ReconcileOverLimit(benchmark::State& state) {
  runCase(state, kScheduler, [](wire::Envelope& e) {
    for (size_t i = 0; i <= limits::kReconcileTasksMax; ++i) {
      e.mutable_reconcile()->add_tasks()->set_task_id("task-" + std::to_string(i));
    }
  });
}

// Within every limit: a standing filter naming 10,000 agents.
void BM_SetFiltersMaxAgentIds(benchmark::State& state) {
  runCase(state, kScheduler, [](wire::Envelope& e) {
    auto* f = e.mutable_set_filters()->mutable_filters();
    for (size_t i = 0; i < limits::kFilterAgentIdsMax; ++i) f->add_agent_ids("A-" + std::to_string(i));
  });
}

void BM_RegisterAgentTasksOverLimit(benchmark::State& state) {
  runCase(state, kAgent, [](wire::Envelope& e) {
    auto* r = e.mutable_register_agent();
    Resources::parse("cpus:8;mem:8192")->toWire(r->mutable_info()->mutable_resources());
    auto* ex = r->add_executors();
    for (size_t i = 0; i <= limits::kTasksPerAgentMax; ++i) ex->add_tasks()->set_task_id("t" + std::to_string(i));
  });
}

// Registrations among many frameworks (each naming an agent in a standing
// filter): what one registration costs should not grow with the number of
// frameworks the master holds. range(0): frameworks besides the measured one.
void addFrameworks(Fixture& f, int64_t n) {
  wire::Hello h;
  h.set_role(wire::ROLE_SCHEDULER);
  for (int64_t i = 0; i < n; ++i) {
    PeerId peer = 1000 + static_cast<PeerId>(i);
    f.master->peerConnected(peer, h);
    wire::Envelope reg;
    reg.mutable_register_framework()->mutable_info()->set_name("other");
    reg.mutable_register_framework()->mutable_filters()->add_agent_ids("A-elsewhere");
    f.master->peerMessage(peer, reg);
  }
}

void BM_FrameworkReregistersAmongFrameworks(benchmark::State& state) {
  Fixture f;
  wire::Envelope again;
  again.mutable_register_framework()->mutable_info()->set_name("bench");
  again.mutable_register_framework()->mutable_info()->set_id(f.out.frameworkId);
  again.mutable_register_framework()->set_framework_secret(f.out.frameworkSecret);
  addFrameworks(f, state.range(0));
  for (auto _ : state) f.master->peerMessage(kScheduler, again);
  state.SetLabel("flat in the number of frameworks");
}

void BM_AgentReregistersAmongFrameworks(benchmark::State& state) {
  Fixture f;
  wire::Envelope reg;
  Resources::parse("cpus:8;mem:8192")->toWire(reg.mutable_register_agent()->mutable_info()->mutable_resources());
  f.master->peerMessage(kAgent, reg);
  reg.mutable_register_agent()->mutable_info()->set_id(f.out.agentId);
  reg.mutable_register_agent()->set_agent_secret(f.out.secret);
  addFrameworks(f, state.range(0));
  for (auto _ : state) f.master->peerMessage(kAgent, reg);
  state.SetLabel("flat in the number of frameworks");
}

BENCHMARK(BM_FrameworkReregistersAmongFrameworks)->Arg(100)->Arg(5000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AgentReregistersAmongFrameworks)->Arg(100)->Arg(5000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AcceptTasksOverLimit)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AcceptArgvOverLimit)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AcceptMaxRanges)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IdOfAFullFrame)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReconcileOverLimit)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SetFiltersMaxAgentIds)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RegisterAgentTasksOverLimit)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace allot

BENCHMARK_MAIN();
