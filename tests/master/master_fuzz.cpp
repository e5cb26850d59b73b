// libFuzzer target for the master's handlers, structure-aware: an input is
// a script of (peer, Envelope) steps fed to a Master that already has an
// agent and a framework registered and offers out. The custom mutator keeps
// inputs well-formed: it parses the script, mutates one envelope's fields
// through protobuf reflection (lengths up to and past the limits, NaN and
// huge numbers, repeated fields grown), splices in valid seed messages, and
// lets libFuzzer's byte mutator loose now and then. Placeholders in ids
// ("$offer", "$fw", "$agent", "$task") are replaced by live ones, so
// mutated AcceptOffers, KillTask, StatusUpdate... reach deep into the
// handlers instead of stopping at "unknown offer".
//
// Any crash, CHECK, sanitizer report or hang is a bug (built with ASan +
// UBSan by run_master_fuzz.sh).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include "base/clock.h"
#include "master/master.h"
#include "proto/resources.h"

namespace {

using namespace allot;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr PeerId kAgent = 1;
constexpr PeerId kFramework = 2;
constexpr size_t kStepsMax = 64;

class CapturingOutbox final : public Outbox {
 public:
  void send(PeerId peer, const wire::Envelope& e) override {
    if (e.has_resource_offers()) {
      for (const auto& o : e.resource_offers().offers()) offers.push_back(o.offer_id());
    }
    if (e.has_framework_registered()) frameworkId = e.framework_registered().framework_id();
    if (e.has_agent_registered()) agentId = e.agent_registered().agent_id();
    if (e.has_run_task()) tasks.push_back(e.run_task().task().task_id());
    (void)peer;
  }
  void close(PeerId, const std::string&) override {}
  std::vector<std::string> offers, tasks;
  std::string frameworkId, agentId;
};

// ---------------------------------------------------------------- script format
// step := selector:u8 length:u32be envelope-bytes

struct Step {
  uint8_t selector = 0;
  wire::Envelope envelope;
};

std::vector<Step> parseScript(const uint8_t* data, size_t size) {
  std::vector<Step> steps;
  size_t at = 0;
  while (at + 5 <= size && steps.size() < kStepsMax) {
    Step s;
    s.selector = data[at];
    uint32_t len = (uint32_t{data[at + 1]} << 24) | (uint32_t{data[at + 2]} << 16) |
                   (uint32_t{data[at + 3]} << 8) | data[at + 4];
    at += 5;
    if (len > size - at) len = static_cast<uint32_t>(size - at);
    if (s.envelope.ParseFromArray(data + at, static_cast<int>(len))) steps.push_back(std::move(s));
    at += len;
  }
  return steps;
}

std::string serializeScript(const std::vector<Step>& steps) {
  std::string out;
  for (const auto& s : steps) {
    std::string body = s.envelope.SerializeAsString();
    out.push_back(static_cast<char>(s.selector));
    uint32_t len = static_cast<uint32_t>(body.size());
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(len >> shift));
    out += body;
  }
  return out;
}

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

// ---------------------------------------------------------------- reflection mutator

void mutateMessage(Message* m, std::mt19937_64& rng, int depth);

std::string mutateString(const std::string& s, std::mt19937_64& rng) {
  static const size_t kLengths[] = {0, 1, 63, 64, 65, 255, 256, 257, 4096, 4097, 70000};
  static const char* kIds[] = {"$offer", "$fw", "$agent", "$task", "root", "nobody", "*"};
  switch (rng() % 4) {
    case 0: return std::string(kLengths[rng() % std::size(kLengths)], static_cast<char>('a' + rng() % 26));
    case 1: return kIds[rng() % std::size(kIds)];
    case 2: return s + s;
    default: {
      std::string out = s;
      if (!out.empty()) out[rng() % out.size()] = static_cast<char>(rng());
      return out;
    }
  }
}

double mutateDouble(std::mt19937_64& rng) {
  static const double kValues[] = {0, -1, 0.001, 1, 1e6, 1e6 + 1, 1e12, 1e13, 1e300, -1e300,
                                   NAN, INFINITY, -INFINITY, 5e-324};
  return kValues[rng() % std::size(kValues)];
}

uint64_t mutateInt(std::mt19937_64& rng) {
  static const uint64_t kValues[] = {0, 1, 2, 0xffff, 0xffffffffull, 0x7fffffffffffffffull, ~0ull};
  return kValues[rng() % std::size(kValues)];
}

void mutateField(Message* m, const FieldDescriptor* f, std::mt19937_64& rng, int depth) {
  const Reflection* r = m->GetReflection();
  if (f->is_repeated()) {
    int n = r->FieldSize(*m, f);
    if (n > 0 && rng() % 3 == 0) {
      r->RemoveLast(m, f);
      return;
    }
    // Grow by one, or by many (past the limits) now and then.
    int grow = rng() % 8 == 0 ? static_cast<int>(rng() % 2048) : 1;
    for (int i = 0; i < grow; ++i) {
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_STRING: r->AddString(m, f, mutateString("x", rng)); break;
        case FieldDescriptor::CPPTYPE_MESSAGE: {
          Message* child = r->AddMessage(m, f);
          if (i == 0 || rng() % 16 == 0) mutateMessage(child, rng, depth + 1);
          break;
        }
        default: return;
      }
    }
    return;
  }
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING: r->SetString(m, f, mutateString(r->GetString(*m, f), rng)); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(m, f, mutateDouble(rng)); break;
    case FieldDescriptor::CPPTYPE_FLOAT: r->SetFloat(m, f, static_cast<float>(mutateDouble(rng))); break;
    case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(m, f, static_cast<int32_t>(mutateInt(rng))); break;
    case FieldDescriptor::CPPTYPE_INT64: r->SetInt64(m, f, static_cast<int64_t>(mutateInt(rng))); break;
    case FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(m, f, static_cast<uint32_t>(mutateInt(rng))); break;
    case FieldDescriptor::CPPTYPE_UINT64: r->SetUInt64(m, f, mutateInt(rng)); break;
    case FieldDescriptor::CPPTYPE_BOOL: r->SetBool(m, f, !r->GetBool(*m, f)); break;
    case FieldDescriptor::CPPTYPE_ENUM: r->SetEnumValue(m, f, static_cast<int>(rng() % 24) - 2); break;
    case FieldDescriptor::CPPTYPE_MESSAGE: mutateMessage(r->MutableMessage(m, f), rng, depth + 1); break;
  }
}

void mutateMessage(Message* m, std::mt19937_64& rng, int depth) {
  const auto* d = m->GetDescriptor();
  if (d->field_count() == 0 || depth > 6) return;
  const FieldDescriptor* f = d->field(static_cast<int>(rng() % d->field_count()));
  // Envelope: stay inside the body that is set, most of the time.
  if (d == wire::Envelope::descriptor() && m->GetReflection()->HasField(*m, f) == false && rng() % 4) {
    auto* e = static_cast<wire::Envelope*>(m);
    if (e->body_case() != wire::Envelope::BODY_NOT_SET) f = d->FindFieldByNumber(e->body_case());
  }
  mutateField(m, f, rng, depth);
}

// ---------------------------------------------------------------- harness

void substitute(std::string* s, const CapturingOutbox& out, std::mt19937_64& rng) {
  if (*s == "$offer" && !out.offers.empty()) *s = out.offers[rng() % out.offers.size()];
  else if (*s == "$fw") *s = out.frameworkId;
  else if (*s == "$agent") *s = out.agentId;
  else if (*s == "$task") *s = out.tasks.empty() ? "t1" : out.tasks[rng() % out.tasks.size()];
}

// Replaces placeholders in every string field, depth first.
void substituteAll(Message* m, const CapturingOutbox& out, std::mt19937_64& rng, int depth = 0) {
  if (depth > 8) return;
  const Reflection* r = m->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  for (const auto* f : fields) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) {
          std::string v = r->GetRepeatedString(*m, f, i);
          substitute(&v, out, rng);
          r->SetRepeatedString(m, f, i, v);
        }
      } else {
        std::string v = r->GetString(*m, f);
        substitute(&v, out, rng);
        r->SetString(m, f, v);
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_map()) continue;
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) substituteAll(r->MutableRepeatedMessage(m, f, i), out, rng, depth + 1);
      } else {
        substituteAll(r->MutableMessage(m, f), out, rng, depth + 1);
      }
    }
  }
}

void run(const std::vector<Step>& steps) {
  FakeClock clock;
  CapturingOutbox out;
  MasterOptions options;
  options.masterId = "fuzz";
  options.minOffer = *Resources::parse("cpus:0.01;mem:32");
  auto master = std::move(*Master::create(options, clock, out));
  wire::Hello agentHello, schedulerHello;
  agentHello.set_role(wire::ROLE_AGENT);
  schedulerHello.set_role(wire::ROLE_SCHEDULER);
  master->peerConnected(kAgent, agentHello);
  for (const Step& s : seeds()) {
    if (s.selector == 3) {
      wire::Envelope reg = s.envelope;
      reg.mutable_register_agent()->mutable_info()->clear_id();
      reg.mutable_register_agent()->clear_executors();
      reg.mutable_register_agent()->clear_frameworks();
      master->peerMessage(kAgent, reg);
    }
  }
  master->peerConnected(kFramework, schedulerHello);
  wire::Envelope reg;
  reg.mutable_register_framework()->set_needs_offers(true);
  master->peerMessage(kFramework, reg);
  master->allocate();
  std::mt19937_64 rng(steps.size());
  PeerId nextPeer = 10;
  for (const Step& step : steps) {
    wire::Envelope e = step.envelope;
    substituteAll(&e, out, rng);
    switch (step.selector % 8) {
      case 0: master->peerMessage(kAgent, e); break;
      case 1: master->peerMessage(kFramework, e); break;
      case 2: master->peerConnected(nextPeer, schedulerHello); master->peerMessage(nextPeer++, e); break;
      case 3: master->peerConnected(nextPeer, agentHello); master->peerMessage(nextPeer++, e); break;
      case 4: clock.advance(std::chrono::seconds(step.selector)); master->tick(); break;
      case 5: master->peerClosed(step.selector & 0x10 ? kAgent : kFramework); break;
      default: master->peerMessage(nextPeer - 1, e); break;
    }
    if (master->allocationPending()) master->allocate();
  }
  clock.advance(std::chrono::hours(24 * 366));
  master->tick();
  (void)master->taskCount();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<Step> steps = parseScript(data, size);
  if (steps.empty()) steps = seeds();
  run(steps);
  return 0;
}

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t maxSize);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  std::mt19937_64 rng(seed);
  if (rng() % 16 == 0) return LLVMFuzzerMutate(data, size, maxSize);
  std::vector<Step> steps = parseScript(data, size);
  std::vector<Step> pool = seeds();
  if (steps.empty() || (rng() % 4 == 0 && steps.size() < kStepsMax)) {
    Step s = pool[rng() % pool.size()];
    steps.insert(steps.begin() + static_cast<long>(steps.empty() ? 0 : rng() % (steps.size() + 1)), s);
  } else {
    Step& s = steps[rng() % steps.size()];
    if (rng() % 8 == 0) s.selector = static_cast<uint8_t>(rng());
    else mutateMessage(&s.envelope, rng, 0);
  }
  std::string bytes = serializeScript(steps);
  if (bytes.size() > maxSize) return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}
