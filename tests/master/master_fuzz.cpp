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
#include <algorithm>
#include <cstdlib>
#include <map>
#include <unordered_set>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/stubs/logging.h>

#include "base/clock.h"
#include "master/master.h"
#include "proto/resources.h"

namespace {

using namespace allot;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr size_t kStepsMax = 64;

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

// ---------------------------------------------------------------- script format
// step := selector:u8 length:u32be envelope-bytes

struct Step {
  uint8_t selector = 0;
  wire::Envelope envelope;
  // False when the step's bytes hold no '$': no string in it can be a
  // placeholder, and the reflection walk over (up to 10,000) entries is
  // skipped.
  bool placeholders = true;
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
    s.placeholders = std::memchr(data + at, '$', len) != nullptr;
    if (s.envelope.ParseFromArray(data + at, static_cast<int>(len))) steps.push_back(std::move(s));
    at += len;
  }
  return steps;
}

// Where each step's header starts and its body's length, without parsing
// the bodies (the mutator parses only the step it changes).
struct StepSpan {
  size_t at = 0;
  size_t len = 0;
};

std::vector<StepSpan> scanScript(const uint8_t* data, size_t size) {
  std::vector<StepSpan> spans;
  size_t at = 0;
  while (at + 5 <= size && spans.size() < kStepsMax) {
    size_t len = (size_t{data[at + 1]} << 24) | (size_t{data[at + 2]} << 16) |
                 (size_t{data[at + 3]} << 8) | data[at + 4];
    len = std::min(len, size - at - 5);
    spans.push_back({at, len});
    at += 5 + len;
  }
  return spans;
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
    case 0: {
      // The long ones (past the 4 KiB and 64 KiB limits) one time in 8.
      size_t pick = rng() % 8 ? rng() % (std::size(kLengths) - 3) : std::size(kLengths) - 1 - rng() % 3;
      return std::string(kLengths[pick], static_cast<char>('a' + rng() % 26));
    }
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

// Sizes a repeated field is grown to now and then: just under and just past
// the named limits in proto/input_limits.h (32 resources, 64 attributes,
// 1,000 offers/tasks, 1,024 ranges/argv, 10,000 reconcile/agent entries).
constexpr int kRepeatedSizes[] = {32, 33, 64, 65, 1000, 1001, 1024, 1025, 10000, 10001};

void mutateField(Message* m, const FieldDescriptor* f, std::mt19937_64& rng, int depth) {
  const Reflection* r = m->GetReflection();
  if (f->is_repeated()) {
    int n = r->FieldSize(*m, f);
    if (n > 0 && rng() % 3 == 0) {
      // Drop the last one, or cut to a random length (keeps the corpus
      // from only ever growing: big inputs cost every later execution).
      int keep = rng() % 2 ? n - 1 : static_cast<int>(rng() % static_cast<uint64_t>(n));
      while (r->FieldSize(*m, f) > keep) r->RemoveLast(m, f);
      return;
    }
    // Grow by one, or (rarely: each such input slows every later execution
    // that mutates it) to just under or past a limit.
    int grow = 1;
    if (rng() % 32 == 0) grow = std::max(1, kRepeatedSizes[rng() % std::size(kRepeatedSizes)] - n);
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
//
// One master per fuzz process, reused across inputs (building one per input
// held the target near 200 executions/s). Every input's effects are bounded:
// at most kStepsMax steps, each clock step under 256 s, the peers an input
// opens are closed when it ends, and the master is rebuilt every
// resetEvery inputs (ALLOT_FUZZ_RESET_EVERY, default kResetEveryDefault) or
// as soon as its state passes one of the bounds below. A finding that does
// not reproduce on its own input is re-run with ALLOT_FUZZ_RESET_EVERY=1
// (a fresh master per input, as before).

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

class Harness {
 public:
  // Placeholders are replaced in `steps` itself (no copy per step).
  void runInput(std::vector<Step>& steps) {
    if (!master_ || inputs_ >= resetEvery() || outOfBounds()) reset();
    ++inputs_;
    std::mt19937_64 rng(steps.size());
    std::vector<PeerId> opened;
    for (Step& step : steps) {
      wire::Envelope& e = step.envelope;
      if (step.placeholders) substituteAll(&e, out_, rng);
      switch (step.selector % 8) {
        case 0: send(out_.agentPeer, e); break;
        case 1: send(out_.frameworkPeer, e); break;
        case 2: opened.push_back(connect(wire::ROLE_SCHEDULER)); send(opened.back(), e); break;
        case 3: opened.push_back(connect(wire::ROLE_AGENT)); send(opened.back(), e); break;
        case 4: clock_->advance(std::chrono::seconds(step.selector)); master_->tick(); break;
        case 5: closePeer(step.selector & 0x10 ? out_.agentPeer : out_.frameworkPeer, &opened); break;
        default: send(opened.empty() ? out_.frameworkPeer : opened.back(), e); break;
      }
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

  // A step on a link that is gone is dropped, as the server would.
  void send(PeerId peer, const wire::Envelope& e) {
    if (peer != 0 && live_.count(peer)) master_->peerMessage(peer, e);
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
};

}  // namespace

// Mutated strings are often not UTF-8: protobuf logs each such field it
// parses or serializes, which on stderr cost more than the run itself.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness* harness = new Harness;  // lives for the process
  std::vector<Step> steps = parseScript(data, size);
  if (steps.empty()) steps = seeds();
  harness->runInput(steps);
  return 0;
}

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t maxSize);

// Mutates one step and copies the others as bytes: parsing and
// re-serializing the whole script for every mutation cost more than running
// it once the corpus held inputs of a few hundred KiB.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  std::mt19937_64 rng(seed);
  if (rng() % 16 == 0) return LLVMFuzzerMutate(data, size, maxSize);
  static const std::vector<Step> pool = seeds();
  std::vector<StepSpan> spans = scanScript(data, size);
  std::vector<Step> replacement(1);
  size_t pick = 0, cut = 0;  // spans[pick, pick + cut) are replaced
  if (spans.empty() || (rng() % 4 == 0 && spans.size() < kStepsMax)) {
    replacement[0] = pool[rng() % pool.size()];
    pick = spans.empty() ? 0 : rng() % (spans.size() + 1);
  } else {
    pick = rng() % spans.size();
    cut = 1;
    Step& s = replacement[0];
    s.selector = data[spans[pick].at];
    if (!s.envelope.ParseFromArray(data + spans[pick].at + 5, static_cast<int>(spans[pick].len))) {
      s = pool[rng() % pool.size()];
    } else if (rng() % 8 == 0) {
      s.selector = static_cast<uint8_t>(rng());
    } else {
      mutateMessage(&s.envelope, rng, 0);
    }
  }
  size_t from = pick < spans.size() ? spans[pick].at : size;
  size_t to = pick + cut < spans.size() ? spans[pick + cut].at : (cut ? size : from);
  std::string middle = serializeScript(replacement);
  size_t newSize = from + middle.size() + (size - to);
  if (newSize > maxSize) return LLVMFuzzerMutate(data, size, maxSize);
  std::memmove(data + from + middle.size(), data + to, size - to);
  std::memcpy(data + from, middle.data(), middle.size());
  return newSize;
}
