#include "master/state_items.h"

#include <cstring>

#include "proto/json_writer.h"

namespace allot {

namespace {

void boolean(bool v, std::string* out) { *out += v ? "true" : "false"; }

void ranges(const Resources::Ranges& list, std::string* out) {
  out->push_back('[');
  bool first = true;
  for (const auto& [begin, end] : list) {
    if (!first) out->push_back(',');
    first = false;
    *out += "{\"begin\":";
    appendJsonUint64(begin, out);
    *out += ",\"end\":";
    appendJsonUint64(end, out);
    out->push_back('}');
  }
  out->push_back(']');
}

// A wire::Resource: {"name":..,"scalar":..,"ranges":[..]}.
void resource(std::string_view name, double scalar, const Resources::Ranges& list, std::string* out) {
  *out += "{\"name\":";
  appendJsonString(name, out);
  *out += ",\"scalar\":";
  appendJsonDouble(scalar, out);
  *out += ",\"ranges\":";
  ranges(list, out);
  out->push_back('}');
}

void resourceItems(const ResourceItems& items, std::string* out) {
  out->push_back('[');
  bool first = true;
  for (const ResourceItem& r : items) {
    if (!first) out->push_back(',');
    first = false;
    resource(r.name, r.scalar, r.ranges, out);
  }
  out->push_back(']');
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
  *out += "{\"cpuTimeS\":";
  appendJsonDouble(u.cpu_time_s(), out);
  *out += ",\"memBytes\":";
  appendJsonUint64(u.mem_bytes(), out);
  *out += ",\"memPeakBytes\":";
  appendJsonUint64(u.mem_peak_bytes(), out);
  *out += ",\"ioReadBytes\":";
  appendJsonUint64(u.io_read_bytes(), out);
  *out += ",\"ioWriteBytes\":";
  appendJsonUint64(u.io_write_bytes(), out);
  *out += ",\"processes\":";
  appendJsonUint32(u.processes(), out);
  *out += ",\"diskBytes\":";
  appendJsonUint64(u.disk_bytes(), out);
  out->push_back('}');
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
  *out += "{\"id\":";
  appendJsonString(a.id, out);
  *out += ",\"hostname\":";
  appendJsonString(a.hostname, out);
  *out += ",\"total\":";
  resourceItems(a.total, out);
  *out += ",\"used\":";
  if (auto total = parse(a.total)) {
    Resources used = *total;
    used -= a.free;
    resources(used, out);
  } else {
    *out += "[]";
  }
  *out += ",\"free\":";
  resources(a.free, out);
  *out += ",\"attributes\":[";
  for (size_t i = 0; i < a.attributes.size(); ++i) {
    if (i) out->push_back(',');
    *out += "{\"name\":";
    appendJsonString(a.attributes[i].first, out);
    *out += ",\"value\":";
    appendJsonString(a.attributes[i].second, out);
    out->push_back('}');
  }
  *out += "],\"connected\":";
  boolean(a.connected, out);
  *out += ",\"draining\":";
  boolean(a.draining, out);
  *out += ",\"drainDeadlineS\":";
  appendJsonDouble(a.drainDeadlineS, out);
  *out += ",\"taskCount\":";
  appendJsonUint32(a.taskCount, out);
  *out += ",\"offerCount\":";
  appendJsonUint32(a.offerCount, out);
  *out += ",\"usage\":[";
  for (size_t i = 0; i < a.usage.size(); ++i) {
    if (i) out->push_back(',');
    *out += "{\"frameworkId\":";
    appendJsonString(a.usage[i].frameworkId, out);
    *out += ",\"executorId\":";
    appendJsonString(a.usage[i].executorId, out);
    *out += ",\"usage\":";
    usage(a.usage[i].usage, out);
    out->push_back('}');
  }
  *out += "]}";
}

void appendItemJson(const FrameworkItem& f, std::string* out) {
  *out += "{\"id\":";
  appendJsonString(f.id, out);
  *out += ",\"name\":";
  appendJsonString(f.name, out);
  *out += ",\"user\":";
  appendJsonString(f.user, out);
  *out += ",\"role\":";
  appendJsonString(f.role, out);
  *out += ",\"weight\":";
  appendJsonDouble(f.weight, out);
  *out += ",\"priority\":";
  appendJsonInt32(f.priority, out);
  *out += ",\"dominantShare\":";
  appendJsonDouble(f.dominantShare, out);
  *out += ",\"guaranteed\":";
  resourceItems(f.guaranteed, out);
  *out += ",\"allocated\":";
  resources(f.allocated, out);
  *out += ",\"connected\":";
  boolean(f.connected, out);
  *out += ",\"needsOffers\":";
  boolean(f.needsOffers, out);
  *out += ",\"taskCount\":";
  appendJsonUint32(f.taskCount, out);
  *out += ",\"offerCount\":";
  appendJsonUint32(f.offerCount, out);
  out->push_back('}');
}

void appendItemJson(const TaskItem& t, std::string* out) {
  *out += "{\"taskId\":";
  appendJsonString(t.taskId, out);
  *out += ",\"frameworkId\":";
  appendJsonString(t.frameworkId, out);
  *out += ",\"agentId\":";
  appendJsonString(t.agentId, out);
  *out += ",\"name\":";
  appendJsonString(t.name, out);
  *out += ",\"state\":";
  enumValue(wire::TaskState_descriptor(), t.state, out);
  *out += ",\"reason\":";
  enumValue(wire::Reason_descriptor(), t.reason, out);
  *out += ",\"message\":";
  appendJsonString(t.message, out);
  *out += ",\"resources\":";
  resourceItems(t.resources, out);
  *out += ",\"executorId\":";
  appendJsonString(t.executorId, out);
  *out += ",\"updatedS\":";
  appendJsonDouble(t.updatedS, out);
  out->push_back('}');
}

void appendItemJson(const OfferItem& o, std::string* out) {
  *out += "{\"offerId\":";
  appendJsonString(o.offerId, out);
  *out += ",\"frameworkId\":";
  appendJsonString(o.frameworkId, out);
  *out += ",\"agentId\":";
  appendJsonString(o.agentId, out);
  *out += ",\"resources\":";
  resources(o.resources, out);
  *out += ",\"expiresInS\":";
  appendJsonDouble(o.expiresInS, out);
  out->push_back('}');
}

}  // namespace allot
