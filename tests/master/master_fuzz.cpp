// libFuzzer target for the master's handlers, structure-aware: an input is
// a script of (peer, Envelope) steps fed to a Master that already has an
// agent and a framework registered and offers out. The script format and
// the reflection mutator are tests/fuzz/envelope_script.h. Placeholders in
// ids ("$offer", "$fw", "$agent", "$task") are replaced by live ones, so
// mutated AcceptOffers, KillTask, StatusUpdate... reach deep into the
// handlers instead of stopping at "unknown offer".
//
// Any crash, CHECK, sanitizer report or hang is a bug (built with ASan +
// UBSan by run_master_fuzz.sh).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <cstdlib>
#include <map>
#include <unordered_set>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "base/clock.h"
#include "master/master.h"
#include "proto/resources.h"
#include "tests/fuzz/envelope_script.h"

namespace {

using namespace allot;
using namespace allot::fuzz;

// What the master sends, as far as the harness needs it: live ids for the
// placeholders, the base peers' ids and secrets, and the links it closed
// (reported back through peerClosed after the step, as the server does).
class CapturingOutbox final : public Outbox {
 public:
  void send(PeerId peer, const wire::Envelope& e) override {
    if (e.has_resource_offers()) {
      for (const auto& o : e.resource_offers().offers()) offers.push_back(o.offer_id());
    }
    bool base = peer == pending || peer == frameworkPeer || peer == agentPeer;
    if (e.has_framework_registered() && base) {
      frameworkId = e.framework_registered().framework_id();
      frameworkSecret = e.framework_registered().framework_secret();
      answered = peer;
    }
    if (e.has_agent_registered() && base) {
      agentId = e.agent_registered().agent_id();
      agentSecret = e.agent_registered().agent_secret();
      answered = peer;
    }
    if (e.has_run_task()) tasks.push_back(e.run_task().task().task_id());
  }
  void close(PeerId peer, const std::string&) override { closed.push_back(peer); }

  // Keeps the newest `n` offer and task ids.
  void trim(size_t n) {
    for (auto* v : {&offers, &tasks}) {
      if (v->size() > n) v->erase(v->begin(), v->end() - static_cast<long>(n));
    }
  }

  std::vector<std::string> offers, tasks;
  std::string frameworkId, agentId, frameworkSecret, agentSecret;
  PeerId agentPeer = 0, frameworkPeer = 0;  // 0: closed, re-attached after the input
  PeerId pending = 0;                       // a base peer registering
  PeerId answered = 0;                      // the last base peer a registration answered
  std::vector<PeerId> closed;
};

// ---------------------------------------------------------------- seeds

wire::TaskInfo seedTask(const std::string& id) {
  wire::TaskInfo t;
  t.set_task_id(id);
  t.mutable_command()->set_shell("true");
  Resources::parse("cpus:0.5;mem:64;ports:[31000-31001]")->toWire(t.mutable_resources());
  return t;
}

std::vector<Step> seeds() {
  std::vector<Step> out;
  auto add = [&](uint8_t selector, auto build) {
    Step s;
    s.selector = selector;
    build(s.envelope);
    out.push_back(std::move(s));
  };
  add(1, [](wire::Envelope& e) {
    auto* a = e.mutable_accept_offers();
    a->add_offer_ids("$offer");
    *a->add_tasks() = seedTask("$task");
    wire::TaskInfo ex = seedTask("t-ex");
    ex.mutable_executor()->set_executor_id("e1");
    ex.mutable_executor()->mutable_command()->set_shell("exec");
    *a->add_tasks() = ex;
  });
  add(1, [](wire::Envelope& e) { e.mutable_decline_offers()->add_offer_ids("$offer"); });
  add(1, [](wire::Envelope& e) {
    e.mutable_kill_task()->set_task_id("$task");
    e.mutable_kill_task()->set_framework_id("$fw");
  });
  add(1, [](wire::Envelope& e) {
    auto* a = e.mutable_acknowledge();
    a->set_task_id("$task");
    a->set_agent_id("$agent");
    a->set_update_id("u1");
  });
  add(1, [](wire::Envelope& e) { e.mutable_reconcile()->add_tasks()->set_task_id("$task"); });
  add(1, [](wire::Envelope& e) {
    auto* f = e.mutable_set_filters()->mutable_filters();
    f->add_agent_ids("$agent");
    Resources::parse("cpus:1")->toWire(f->mutable_min_free());
  });
  add(1, [](wire::Envelope& e) { e.mutable_set_needs_offers()->set_needs_offers(true); });
  add(2, [](wire::Envelope& e) {
    auto* r = e.mutable_register_framework();
    r->mutable_info()->set_id("$fw");
    r->mutable_info()->set_weight(2);
    Resources::parse("cpus:1")->toWire(r->mutable_info()->mutable_guaranteed());
  });
  add(0, [](wire::Envelope& e) {
    auto* s = e.mutable_status_update()->mutable_status();
    s->set_task_id("$task");
    s->set_framework_id("$fw");
    s->set_state(wire::TASK_FINISHED);
    s->set_update_id("u1");
  });
  add(0, [](wire::Envelope& e) {
    auto* u = e.mutable_usage_report()->add_executors();
    u->set_framework_id("$fw");
    u->set_executor_id("e1");
    u->mutable_usage()->set_cpu_time_s(1);
  });
  add(0, [](wire::Envelope& e) { e.mutable_heartbeat()->set_sequence(1); });
  add(3, [](wire::Envelope& e) {
    auto* r = e.mutable_register_agent();
    r->mutable_info()->set_id("$agent");
    r->mutable_info()->set_hostname("node");
    Resources::parse("cpus:8;mem:8192;ports:[31000-32000]")->toWire(r->mutable_info()->mutable_resources());
    r->add_frameworks()->set_id("$fw");
    auto* ex = r->add_executors();
    ex->mutable_info()->set_framework_id("$fw");
    ex->mutable_info()->set_executor_id("e1");
    *ex->add_tasks() = seedTask("$task");
    ex->add_latest()->set_state(wire::TASK_RUNNING);
  });
  return out;
}

// ---------------------------------------------------------------- harness
//
// One master per fuzz process, reused across inputs (building one per input
// held the target near 200 executions/s). Every input's effects are bounded:
// at most kStepsMax steps, each clock step under 256 s, the peers an input
// opens are closed when it ends, and the master is rebuilt every
// resetEvery inputs (ALLOT_FUZZ_RESET_EVERY, default kResetEveryDefault) or
// as soon as its state passes one of the bounds below. A finding that does
// not reproduce on its own input is re-run with ALLOT_FUZZ_RESET_EVERY=1
// (a fresh master per input).

constexpr size_t kResetEveryDefault = 500;
constexpr size_t kFrameworksMax = 64;
constexpr size_t kAgentsMax = 64;
constexpr size_t kTasksMax = 4096;
constexpr size_t kOffersMax = 4096;
constexpr size_t kRememberedIdsMax = 256;

size_t resetEvery() {
  static const size_t every = [] {
    const char* v = std::getenv("ALLOT_FUZZ_RESET_EVERY");
    long n = v ? std::strtol(v, nullptr, 10) : 0;
    return n > 0 ? static_cast<size_t>(n) : kResetEveryDefault;
  }();
  return every;
}

void substitute(std::string* s, const CapturingOutbox& out, std::mt19937_64& rng) {
  if (*s == "$offer" && !out.offers.empty()) *s = out.offers[rng() % out.offers.size()];
  else if (*s == "$fw") *s = out.frameworkId;
  else if (*s == "$agent") *s = out.agentId;
  else if (*s == "$task") *s = out.tasks.empty() ? "t1" : out.tasks[rng() % out.tasks.size()];
}

class Harness {
 public:
  // Each step is parsed when it runs, onto `arena`, with its placeholders
  // replaced in its bytes first (substituteWire); a step that does not
  // parse is skipped, and a step for a link that is gone is dropped
  // unparsed, as the server would drop it.
  void runInput(const std::vector<RawStep>& steps, google::protobuf::Arena& arena) {
    if (!master_ || inputs_ >= resetEvery() || outOfBounds()) reset();
    ++inputs_;
    std::mt19937_64 rng(steps.size());
    std::vector<PeerId> opened;
    for (const RawStep& step : steps) {
      int kind = step.selector % 8;
      PeerId to = 0;  // 2 and 3: the link they open
      if (kind == 0) to = out_.agentPeer;
      if (kind == 1) to = out_.frameworkPeer;
      if (kind >= 6) to = opened.empty() ? out_.frameworkPeer : opened.back();
      bool sends = kind != 4 && kind != 5;
      if (sends && kind != 2 && kind != 3 && !live_.count(to)) continue;
      wire::Envelope* e = parse(step, sends, rng, arena);
      if (!e) continue;
      switch (kind) {
        case 2: opened.push_back(connect(wire::ROLE_SCHEDULER)); to = opened.back(); break;
        case 3: opened.push_back(connect(wire::ROLE_AGENT)); to = opened.back(); break;
        case 4: clock_->advance(std::chrono::seconds(step.selector)); master_->tick(); break;
        case 5: closePeer(step.selector & 0x10 ? out_.agentPeer : out_.frameworkPeer, &opened); break;
        default: break;
      }
      if (sends) master_->peerMessage(to, *e);
      // Links the master closed go, as the server reports them.
      while (!out_.closed.empty()) {
        PeerId p = out_.closed.back();
        out_.closed.pop_back();
        closePeer(p, &opened);
      }
      if (master_->allocationPending()) master_->allocate();
    }
    while (!opened.empty()) closePeer(opened.back(), &opened);
    clock_->advance(std::chrono::seconds(1));
    master_->tick();
    if (!reattach()) master_.reset();  // rebuilt before the next input
    out_.trim(kRememberedIdsMax);
  }

 private:
  PeerId connect(wire::Role role) {
    wire::Hello hello;
    hello.set_role(role);
    master_->peerConnected(nextPeer_, hello);
    live_.insert(nextPeer_);
    return nextPeer_++;
  }

  // The step's envelope, with live ids for its placeholders when it is sent;
  // null when its bytes do not parse.
  wire::Envelope* parse(const RawStep& step, bool sends, std::mt19937_64& rng,
                        google::protobuf::Arena& arena) {
    auto* e = google::protobuf::Arena::CreateMessage<wire::Envelope>(&arena);
    if (sends && step.placeholders) {
      bytes_.clear();
      auto replace = [&](std::string* s) { substitute(s, out_, rng); };
      if (substituteWire(wire::Envelope::descriptor(), step.body, step.body + step.len, &bytes_, replace)) {
        return e->ParseFromString(bytes_) ? e : nullptr;
      }
    }
    return e->ParseFromArray(step.body, static_cast<int>(step.len)) ? e : nullptr;
  }

  void closePeer(PeerId peer, std::vector<PeerId>* opened) {
    if (peer == 0 || live_.erase(peer) == 0) return;
    master_->peerClosed(peer);
    if (peer == out_.agentPeer) out_.agentPeer = 0;
    if (peer == out_.frameworkPeer) out_.frameworkPeer = 0;
    opened->erase(std::remove(opened->begin(), opened->end(), peer), opened->end());
  }

  bool outOfBounds() const {
    return master_->frameworkCount() > kFrameworksMax || master_->agentCount() > kAgentsMax ||
           master_->taskCount() > kTasksMax || master_->offerCount() > kOffersMax;
  }

  // The next input starts with the base agent and framework linked again:
  // they re-register on new links with their ids and secrets (a failover,
  // exercised on the way); if the master refuses, it is rebuilt.
  bool reattach() {
    if (out_.agentPeer == 0) {
      PeerId p = connect(wire::ROLE_AGENT);
      wire::Envelope reg = agentRegistration();
      reg.mutable_register_agent()->mutable_info()->set_id(out_.agentId);
      reg.mutable_register_agent()->set_agent_secret(out_.agentSecret);
      out_.pending = p;
      master_->peerMessage(p, reg);
      if (out_.answered != p) return false;
      out_.agentPeer = p;
    }
    if (out_.frameworkPeer == 0) {
      PeerId p = connect(wire::ROLE_SCHEDULER);
      wire::Envelope reg;
      reg.mutable_register_framework()->mutable_info()->set_id(out_.frameworkId);
      reg.mutable_register_framework()->set_framework_secret(out_.frameworkSecret);
      reg.mutable_register_framework()->set_needs_offers(true);
      out_.pending = p;
      master_->peerMessage(p, reg);
      if (out_.answered != p) return false;
      out_.frameworkPeer = p;
    }
    if (master_->allocationPending()) master_->allocate();
    return true;
  }

  static wire::Envelope agentRegistration() {
    wire::Envelope reg;
    auto* r = reg.mutable_register_agent();
    r->mutable_info()->set_hostname("node");
    Resources::parse("cpus:8;mem:8192;ports:[31000-32000]")->toWire(r->mutable_info()->mutable_resources());
    return reg;
  }

  void reset() {
    if (master_) {
      // Everything that expires (offers, failover timeouts, registration
      // deadlines, ended tasks) does, before the master goes.
      clock_->advance(std::chrono::hours(24 * 366));
      master_->tick();
      (void)master_->taskCount();
    }
    master_.reset();
    clock_ = std::make_unique<FakeClock>();
    out_ = CapturingOutbox{};
    live_.clear();
    MasterOptions options;
    options.masterId = "fuzz";
    options.minOffer = *Resources::parse("cpus:0.01;mem:32");
    master_ = std::move(*Master::create(options, *clock_, out_));
    inputs_ = 0;
    PeerId agent = connect(wire::ROLE_AGENT);
    out_.pending = agent;
    master_->peerMessage(agent, agentRegistration());
    out_.agentPeer = agent;
    PeerId framework = connect(wire::ROLE_SCHEDULER);
    wire::Envelope reg;
    reg.mutable_register_framework()->set_needs_offers(true);
    out_.pending = framework;
    master_->peerMessage(framework, reg);
    out_.frameworkPeer = framework;
    master_->allocate();
  }

  std::unique_ptr<FakeClock> clock_;
  CapturingOutbox out_;
  std::unique_ptr<Master> master_;
  std::unordered_set<PeerId> live_;  // connected, not yet closed
  PeerId nextPeer_ = 1;
  size_t inputs_ = 0;
  std::string bytes_;  // a step with its placeholders replaced (kept: no allocation per step)
};

}  // namespace

// Mutated strings are often not UTF-8: protobuf logs each such field it
// parses or serializes, which on stderr cost more than the run itself.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  allot::fuzz::mutationIds() = {"$offer", "$fw", "$agent", "$task", "root", "nobody", "*"};
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness* harness = new Harness;  // lives for the process
  // One arena per input, freed when the input ends: a reference the master
  // kept into an envelope still reads freed memory (ASan) afterwards.
  google::protobuf::Arena arena;
  std::vector<RawStep> steps = splitScript(data, size);
  std::string seedScript;
  if (steps.empty()) {
    seedScript = serializeScript(seeds());
    steps = splitScript(reinterpret_cast<const uint8_t*>(seedScript.data()), seedScript.size());
  }
  harness->runInput(steps, arena);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  static const std::vector<Step> pool = seeds();
  return mutateScript(data, size, maxSize, seed, pool);
}
