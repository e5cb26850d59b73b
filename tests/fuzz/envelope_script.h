// Structure-aware fuzzing of allot's envelopes, shared by the master and
// agent fuzz targets (tests/master/master_fuzz.cpp, tests/agent/agent_fuzz.cpp).
// An input is a script of (selector, Envelope) steps; the target decides
// what a selector means (which peer sends the step). The mutator keeps
// inputs well-formed: it changes one step's envelope through protobuf
// reflection (lengths up to and past the limits, NaN and huge numbers,
// repeated fields grown past the named limits), splices in one of the
// target's valid seed steps, or lets libFuzzer's byte mutator loose now and
// then. Strings may be placeholders ("$task"...) the target replaces with
// live ids before sending (substituteAll), so mutated messages reach deep
// into the handlers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include "proto/allot.pb.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t maxSize);

namespace allot::fuzz {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

inline constexpr size_t kStepsMax = 64;

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

inline std::vector<Step> parseScript(const uint8_t* data, size_t size) {
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

inline std::vector<StepSpan> scanScript(const uint8_t* data, size_t size) {
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

inline std::string serializeScript(const std::vector<Step>& steps) {
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

// ---------------------------------------------------------------- reflection mutator

inline void mutateMessage(Message* m, std::mt19937_64& rng, int depth);

// The target's placeholders and a few names every target tries; set once
// by the target (LLVMFuzzerInitialize) before any mutation.
inline std::vector<std::string>& mutationIds() {
  static std::vector<std::string> ids;
  return ids;
}

inline std::string mutateString(const std::string& s, std::mt19937_64& rng) {
  static const size_t kLengths[] = {0, 1, 63, 64, 65, 255, 256, 257, 4096, 4097, 70000};
  const std::vector<std::string>& kIds = mutationIds();
  switch (rng() % 4) {
    case 0: {
      // The long ones (past the 4 KiB and 64 KiB limits) one time in 8.
      size_t pick = rng() % 8 ? rng() % (std::size(kLengths) - 3) : std::size(kLengths) - 1 - rng() % 3;
      return std::string(kLengths[pick], static_cast<char>('a' + rng() % 26));
    }
    case 1: return kIds.empty() ? s : kIds[rng() % kIds.size()];
    case 2: return s + s;
    default: {
      std::string out = s;
      if (!out.empty()) out[rng() % out.size()] = static_cast<char>(rng());
      return out;
    }
  }
}

inline double mutateDouble(std::mt19937_64& rng) {
  static const double kValues[] = {0, -1, 0.001, 1, 1e6, 1e6 + 1, 1e12, 1e13, 1e300, -1e300,
                                   NAN, INFINITY, -INFINITY, 5e-324};
  return kValues[rng() % std::size(kValues)];
}

inline uint64_t mutateInt(std::mt19937_64& rng) {
  static const uint64_t kValues[] = {0, 1, 2, 0xffff, 0xffffffffull, 0x7fffffffffffffffull, ~0ull};
  return kValues[rng() % std::size(kValues)];
}

// Sizes a repeated field is grown to now and then: just under and just past
// the named limits in proto/input_limits.h (32 resources, 64 attributes,
// 1,000 offers/tasks, 1,024 ranges/argv, 10,000 reconcile/agent entries).
inline constexpr int kRepeatedSizes[] = {32, 33, 64, 65, 1000, 1001, 1024, 1025, 10000, 10001};

inline void mutateField(Message* m, const FieldDescriptor* f, std::mt19937_64& rng, int depth) {
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

inline void mutateMessage(Message* m, std::mt19937_64& rng, int depth) {
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

// Replaces placeholders in every string field, depth first; `substitute`
// rewrites one string in place.
inline void substituteAll(Message* m, const std::function<void(std::string*)>& substitute, int depth = 0) {
  if (depth > 8) return;
  const Reflection* r = m->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  for (const auto* f : fields) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) {
          std::string v = r->GetRepeatedString(*m, f, i);
          substitute(&v);
          r->SetRepeatedString(m, f, i, v);
        }
      } else {
        std::string v = r->GetString(*m, f);
        substitute(&v);
        r->SetString(m, f, v);
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_map()) continue;
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) substituteAll(r->MutableRepeatedMessage(m, f, i), substitute, depth + 1);
      } else {
        substituteAll(r->MutableMessage(m, f), substitute, depth + 1);
      }
    }
  }
}

// Mutates one step and copies the others as bytes: parsing and
// re-serializing the whole script for every mutation cost more than running
// it once the corpus held inputs of a few hundred KiB.
// `pool`: the target's valid seed steps, spliced in now and then. One time
// in 16, libFuzzer's own byte mutator instead.
inline size_t mutateScript(uint8_t* data, size_t size, size_t maxSize, unsigned int seed,
                           const std::vector<Step>& pool) {
  std::mt19937_64 rng(seed);
  if (rng() % 16 == 0) return LLVMFuzzerMutate(data, size, maxSize);
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

}  // namespace allot::fuzz
