#include "master/state_items.h"

#include <cstring>

#include "proto/json_writer.h"

namespace allot {

namespace {

// A field's name as written before its value: ,"name": (a compile-time
// constant, so a field costs one append).
template <size_t N>
struct Key {
  constexpr Key(const char (&name)[N]) {  // NOLINT: implicit, for field<"name">()
    text[0] = ',';
    text[1] = '"';
    for (size_t i = 0; i + 1 < N; ++i) text[2 + i] = name[i];
    text[N + 1] = '"';
    text[N + 2] = ':';
  }
  char text[N + 3] = {};
};

// One JSON object's fields in order: field<"id">() writes {"id": for the
// first field and ,"id": for the others and returns where the value goes;
// end() closes the object.
class Object {
 public:
  explicit Object(std::string* out) : out_(out) {}
  template <Key key>
  std::string* field() {
    out_->append(key.text, sizeof key.text);
    if (first_) {
      (*out_)[out_->size() - sizeof key.text] = '{';
      first_ = false;
    }
    return out_;
  }
  void end() { out_->push_back('}'); }

 private:
  std::string* out_;
  bool first_ = true;
};

// A JSON array of `items`, each written by write(item, out).
template <typename Items, typename Write>
void array(const Items& items, Write write, std::string* out) {
  out->push_back('[');
  bool first = true;
  for (const auto& item : items) {
    if (!first) out->push_back(',');
    first = false;
    write(item, out);
  }
  out->push_back(']');
}

void boolean(bool v, std::string* out) { *out += v ? "true" : "false"; }

void ranges(const Resources::Ranges& list, std::string* out) {
  array(list, [](const auto& range, std::string* o) {
    Object r(o);
    appendJsonUint64(range.first, r.field<"begin">());
    appendJsonUint64(range.second, r.field<"end">());
    r.end();
  }, out);
}

// A wire::Resource: {"name":..,"scalar":..,"ranges":[..]}.
void resource(std::string_view name, double scalar, const Resources::Ranges& list, std::string* out) {
  Object r(out);
  appendJsonString(name, r.field<"name">());
  appendJsonDouble(scalar, r.field<"scalar">());
  ranges(list, r.field<"ranges">());
  r.end();
}

void resourceItems(const ResourceItems& items, std::string* out) {
  array(items, [](const ResourceItem& r, std::string* o) { resource(r.name, r.scalar, r.ranges, o); }, out);
}

// Resources as Resources::toWire lists them: scalars, then range sets.
void resources(const Resources& res, std::string* out) {
  out->push_back('[');
  bool first = true;
  static const Resources::Ranges kNoRanges;
  for (const Resources::Scalar& s : res.scalars()) {
    if (!first) out->push_back(',');
    first = false;
    resource(s.name, static_cast<double>(s.millis) / 1000.0, kNoRanges, out);
  }
  for (const Resources::RangeSet& set : res.rangeSets()) {
    if (!first) out->push_back(',');
    first = false;
    resource(set.name, 0, set.ranges, out);
  }
  out->push_back(']');
}

// What the agent's total would parse to (as Resources::fromWire), for
// "used"; an error when it would not.
Result<Resources> parse(const ResourceItems& items) {
  ResourceList list;
  for (const ResourceItem& r : items) {
    wire::Resource* w = list.Add();
    w->set_name(std::string(r.name));
    w->set_scalar(r.scalar);
    for (const auto& [begin, end] : r.ranges) {
      wire::Range* range = w->add_ranges();
      range->set_begin(begin);
      range->set_end(end);
    }
  }
  return Resources::fromWire(list);
}

void usage(const wire::ResourceUsage& u, std::string* out) {
  Object o(out);
  appendJsonDouble(u.cpu_time_s(), o.field<"cpuTimeS">());
  appendJsonUint64(u.mem_bytes(), o.field<"memBytes">());
  appendJsonUint64(u.mem_peak_bytes(), o.field<"memPeakBytes">());
  appendJsonUint64(u.io_read_bytes(), o.field<"ioReadBytes">());
  appendJsonUint64(u.io_write_bytes(), o.field<"ioWriteBytes">());
  appendJsonUint32(u.processes(), o.field<"processes">());
  appendJsonUint64(u.disk_bytes(), o.field<"diskBytes">());
  o.end();
}

// An enum value by name, as appendJson prints it (the number when unnamed).
template <typename Descriptor>
void enumValue(const Descriptor* d, int number, std::string* out) {
  if (const auto* v = d->FindValueByNumber(number)) {
    appendJsonString(v->name(), out);
  } else {
    appendJsonInt32(number, out);
  }
}

}  // namespace

std::string_view ItemText::keep(std::string_view s) {
  if (s.empty()) return {};
  char* at;
  if (s.size() > kChunkBytes / 4) {  // a long one gets a chunk of its own
    at = big_.emplace_back(std::make_unique<char[]>(s.size())).get();
  } else {
    if (kChunkBytes - used_ < s.size()) {
      chunks_.push_back(std::make_unique<char[]>(kChunkBytes));
      used_ = 0;
    }
    at = chunks_.back().get() + used_;
    used_ += s.size();
  }
  std::memcpy(at, s.data(), s.size());
  return {at, s.size()};
}

ResourceItems copyResources(const ResourceList& list, ItemText* text) {
  ResourceItems out;
  out.reserve(static_cast<size_t>(list.size()));
  for (const wire::Resource& r : list) {
    ResourceItem& item = out.emplace_back();
    item.name = text->keep(r.name());
    item.scalar = r.scalar();
    for (const wire::Range& range : r.ranges()) item.ranges.emplace_back(range.begin(), range.end());
  }
  return out;
}

void appendItemJson(const AgentItem& a, std::string* out) {
  Object o(out);
  appendJsonString(a.id, o.field<"id">());
  appendJsonString(a.hostname, o.field<"hostname">());
  resourceItems(a.total, o.field<"total">());
  if (auto total = parse(a.total)) {
    Resources used = *total;
    used -= a.free;
    resources(used, o.field<"used">());
  } else {
    *o.field<"used">() += "[]";
  }
  resources(a.free, o.field<"free">());
  array(a.attributes, [](const auto& attribute, std::string* w) {
    Object at(w);
    appendJsonString(attribute.first, at.field<"name">());
    appendJsonString(attribute.second, at.field<"value">());
    at.end();
  }, o.field<"attributes">());
  boolean(a.connected, o.field<"connected">());
  boolean(a.draining, o.field<"draining">());
  appendJsonDouble(a.drainDeadlineS, o.field<"drainDeadlineS">());
  appendJsonUint32(a.taskCount, o.field<"taskCount">());
  appendJsonUint32(a.offerCount, o.field<"offerCount">());
  array(a.usage, [](const UsageItem& u, std::string* w) {
    Object ex(w);
    appendJsonString(u.frameworkId, ex.field<"frameworkId">());
    appendJsonString(u.executorId, ex.field<"executorId">());
    usage(u.usage, ex.field<"usage">());
    ex.end();
  }, o.field<"usage">());
  appendJsonString(a.httpAddress, o.field<"httpAddress">());
  appendJsonString(a.shard, o.field<"shard">());
  o.end();
}

void appendItemJson(const FrameworkItem& f, std::string* out) {
  Object o(out);
  appendJsonString(f.id, o.field<"id">());
  appendJsonString(f.name, o.field<"name">());
  appendJsonString(f.user, o.field<"user">());
  appendJsonString(f.role, o.field<"role">());
  appendJsonDouble(f.weight, o.field<"weight">());
  appendJsonInt32(f.priority, o.field<"priority">());
  appendJsonDouble(f.dominantShare, o.field<"dominantShare">());
  resourceItems(f.guaranteed, o.field<"guaranteed">());
  resources(f.allocated, o.field<"allocated">());
  boolean(f.connected, o.field<"connected">());
  boolean(f.needsOffers, o.field<"needsOffers">());
  appendJsonUint32(f.taskCount, o.field<"taskCount">());
  appendJsonUint32(f.offerCount, o.field<"offerCount">());
  o.end();
}

void appendItemJson(const TaskItem& t, std::string* out) {
  Object o(out);
  appendJsonString(t.taskId, o.field<"taskId">());
  appendJsonString(t.frameworkId, o.field<"frameworkId">());
  appendJsonString(t.agentId, o.field<"agentId">());
  appendJsonString(t.name, o.field<"name">());
  enumValue(wire::TaskState_descriptor(), t.state, o.field<"state">());
  enumValue(wire::Reason_descriptor(), t.reason, o.field<"reason">());
  appendJsonString(t.message, o.field<"message">());
  resourceItems(t.resources, o.field<"resources">());
  appendJsonString(t.executorId, o.field<"executorId">());
  appendJsonDouble(t.updatedS, o.field<"updatedS">());
  if (t.healthy >= 0) boolean(t.healthy == 1, o.field<"healthy">());
  appendJsonString(t.image, o.field<"image">());
  o.end();
}

void appendItemJson(const OfferItem& f, std::string* out) {
  Object o(out);
  appendJsonString(f.offerId, o.field<"offerId">());
  appendJsonString(f.frameworkId, o.field<"frameworkId">());
  appendJsonString(f.agentId, o.field<"agentId">());
  resources(f.resources, o.field<"resources">());
  appendJsonDouble(f.expiresInS, o.field<"expiresInS">());
  o.end();
}

}  // namespace allot
