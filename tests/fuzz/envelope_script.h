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

#include <google/protobuf/arena.h>
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

// Calls `take(selector, bytes, len)` for each step's header, in order,
// until `take` has accepted kStepsMax steps (it returns whether the step's
// envelope parsed).
template <typename Take>
void forEachStep(const uint8_t* data, size_t size, Take take) {
  size_t at = 0, taken = 0;
  while (at + 5 <= size && taken < kStepsMax) {
    uint32_t len = (uint32_t{data[at + 1]} << 24) | (uint32_t{data[at + 2]} << 16) |
                   (uint32_t{data[at + 3]} << 8) | data[at + 4];
    uint8_t selector = data[at];
    at += 5;
    if (len > size - at) len = static_cast<uint32_t>(size - at);
    if (take(selector, data + at, len)) ++taken;
    at += len;
  }
}

inline std::vector<Step> parseScript(const uint8_t* data, size_t size) {
  std::vector<Step> steps;
  forEachStep(data, size, [&](uint8_t selector, const uint8_t* body, uint32_t len) {
    Step s;
    s.selector = selector;
    s.placeholders = std::memchr(body, '$', len) != nullptr;
    if (!s.envelope.ParseFromArray(body, static_cast<int>(len))) return false;
    steps.push_back(std::move(s));
    return true;
  });
  return steps;
}

// A step not parsed yet (the master target parses each step when it runs
// it, after substituteWire, onto an arena per input).
struct RawStep {
  uint8_t selector = 0;
  const uint8_t* body = nullptr;  // into the input
  uint32_t len = 0;
  bool placeholders = true;  // as Step::placeholders
};

inline std::vector<RawStep> splitScript(const uint8_t* data, size_t size) {
  std::vector<RawStep> steps;
  forEachStep(data, size, [&](uint8_t selector, const uint8_t* body, uint32_t len) {
    steps.push_back({selector, body, len, std::memchr(body, '$', len) != nullptr});
    return true;
  });
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

// Appends one step (header and body) to `out`.
inline void appendStep(std::string* out, uint8_t selector, const wire::Envelope& e) {
  uint32_t len = static_cast<uint32_t>(e.ByteSizeLong());
  out->push_back(static_cast<char>(selector));
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(len >> shift));
  e.AppendToString(out);
}

inline std::string serializeScript(const std::vector<Step>& steps) {
  std::string out;
  for (const auto& s : steps) appendStep(&out, s.selector, s.envelope);
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
// rewrites one string in place and is called only for strings that start
// with '$' (every placeholder does): the others are neither copied nor set.
// Fields are visited through the descriptor, so the walk allocates nothing
// for the (up to 10,000) messages it only passes through.
inline void substituteAll(Message* m, const std::function<void(std::string*)>& substitute, int depth = 0) {
  if (depth > 8) return;
  const Reflection* r = m->GetReflection();
  const google::protobuf::Descriptor* d = m->GetDescriptor();
  auto placeholder = [](const std::string& v) { return !v.empty() && v[0] == '$'; };
  std::string scratch;
  for (int k = 0; k < d->field_count(); ++k) {
    const FieldDescriptor* f = d->field(k);
    if (f->is_map()) continue;
    if (f->is_repeated() ? r->FieldSize(*m, f) == 0 : !r->HasField(*m, f)) continue;
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) {
          if (!placeholder(r->GetRepeatedStringReference(*m, f, i, &scratch))) continue;
          std::string v = r->GetRepeatedString(*m, f, i);
          substitute(&v);
          r->SetRepeatedString(m, f, i, v);
        }
      } else if (placeholder(r->GetStringReference(*m, f, &scratch))) {
        std::string v = r->GetString(*m, f);
        substitute(&v);
        r->SetString(m, f, v);
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) substituteAll(r->MutableRepeatedMessage(m, f, i), substitute, depth + 1);
      } else {
        substituteAll(r->MutableMessage(m, f), substitute, depth + 1);
      }
    }
  }
}

// The same replacement on a step's wire bytes, before it is parsed: copies
// `body` to `out`, rewriting the string fields that start with '$' through
// `substitute` and re-encoding the lengths around them. A field whose bytes
// hold no '$' is copied as is, so the cost is a memchr over the step plus
// the path down to each placeholder (the reflection walk over a parsed
// step of thousands of entries was a fifth of the master target's CPU).
// Appends to `out`, one copy of the step in all.
// Maps and anything below depth 8 are copied, as substituteAll leaves them.
// Returns false on bytes that are not a well-formed message of type `d`
// (the caller then parses `body` unchanged and lets protobuf decide).
inline bool readVarint(const uint8_t*& p, const uint8_t* end, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    uint8_t b = *p++;
    *v |= uint64_t{b & 0x7fu} << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

inline void writeVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// A length written before its message: 5 varint bytes (over-long
// encodings are valid protobuf), filled in once the message is written.
inline size_t reserveLength(std::string* out) {
  out->append(5, '\x80');
  return out->size() - 5;
}

inline void fillLength(std::string* out, size_t at) {
  uint64_t v = out->size() - at - 5;
  for (int i = 0; i < 5; ++i, v >>= 7) (*out)[at + i] = static_cast<char>((v & 0x7f) | (i < 4 ? 0x80 : 0));
}

inline bool substituteWire(const google::protobuf::Descriptor* d, const uint8_t* p, const uint8_t* end,
                           std::string* out, const std::function<void(std::string*)>& substitute,
                           int depth = 0) {
  const uint8_t* unchanged = p;  // copied in one piece up to the next rewritten field
  out->reserve(out->size() + static_cast<size_t>(end - p) + 64);
  while (p < end) {
    const uint8_t* field = p;
    uint64_t tag = 0, value = 0;
    if (!readVarint(p, end, &tag)) return false;
    switch (tag & 7) {
      case 0: if (!readVarint(p, end, &value)) return false; continue;
      case 1: if (end - p < 8) return false; p += 8; continue;
      case 5: if (end - p < 4) return false; p += 4; continue;
      case 2: break;
      default: return false;  // groups: not in allot's protocol
    }
    if (!readVarint(p, end, &value) || value > static_cast<uint64_t>(end - p)) return false;
    const uint8_t* bytes = p;
    p += value;
    const FieldDescriptor* f = d->FindFieldByNumber(static_cast<int>(tag >> 3));
    if (!f || f->is_map() || !std::memchr(bytes, '$', value)) continue;
    bool message = f->type() == FieldDescriptor::TYPE_MESSAGE && depth < 8;
    if (!message && (f->cpp_type() != FieldDescriptor::CPPTYPE_STRING || bytes[0] != '$')) continue;
    out->append(reinterpret_cast<const char*>(unchanged), field - unchanged);
    writeVarint(out, tag);
    if (message) {
      size_t length = reserveLength(out);
      if (!substituteWire(f->message_type(), bytes, p, out, substitute, depth + 1)) return false;
      fillLength(out, length);
    } else {
      std::string v(reinterpret_cast<const char*>(bytes), value);
      substitute(&v);
      writeVarint(out, v.size());
      out->append(v);
    }
    unchanged = p;
  }
  out->append(reinterpret_cast<const char*>(unchanged), end - unchanged);
  return true;
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
  // The step being changed lives on an arena: a big one is parsed, mutated,
  // serialized and freed without one allocation per entry.
  google::protobuf::Arena arena;
  auto* envelope = google::protobuf::Arena::CreateMessage<wire::Envelope>(&arena);
  uint8_t selector = 0;
  size_t pick = 0, cut = 0;  // spans[pick, pick + cut) are replaced
  auto fromPool = [&] {
    const Step& seedStep = pool[rng() % pool.size()];
    selector = seedStep.selector;
    *envelope = seedStep.envelope;
  };
  if (spans.empty() || (rng() % 4 == 0 && spans.size() < kStepsMax)) {
    fromPool();
    pick = spans.empty() ? 0 : rng() % (spans.size() + 1);
  } else {
    pick = rng() % spans.size();
    cut = 1;
    selector = data[spans[pick].at];
    if (!envelope->ParseFromArray(data + spans[pick].at + 5, static_cast<int>(spans[pick].len))) {
      envelope->Clear();
      fromPool();
    } else if (rng() % 8 == 0) {
      selector = static_cast<uint8_t>(rng());
    } else {
      mutateMessage(envelope, rng, 0);
    }
  }
  size_t from = pick < spans.size() ? spans[pick].at : size;
  size_t to = pick + cut < spans.size() ? spans[pick + cut].at : (cut ? size : from);
  std::string middle;
  appendStep(&middle, selector, *envelope);
  size_t newSize = from + middle.size() + (size - to);
  if (newSize > maxSize) return LLVMFuzzerMutate(data, size, maxSize);
  std::memmove(data + from + middle.size(), data + to, size - to);
  std::memcpy(data + from, middle.data(), middle.size());
  return newSize;
}

}  // namespace allot::fuzz
