// The items of GET /state as plain copies, and their JSON. The master's
// loop copies what an item shows into one of these (strings, numbers, our
// own Resources: no protobuf message is built there); another thread
// writes the JSON. The JSON is what appendJson (proto/json_writer.h)
// prints for the matching view of proto/state.proto (AgentView,
// FrameworkView, TaskView, OfferView): every field in declaration order,
// zeros and empty lists included. state_view_test checks it byte for byte
// against MasterStateView::snapshot(), which fills the protobuf views.
//
// Thread: any (plain data; no reference to the Master).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "proto/allot.pb.h"
#include "proto/resources.h"

namespace allot {

// The characters of a batch's items: strings are copied into chunks that
// never move, and items hold views of them. A copy costs no allocation
// of its own (ids are longer than std::string keeps inline).
class ItemText {
 public:
  std::string_view keep(std::string_view s);

 private:
  static constexpr size_t kChunkBytes = 64 * 1024;
  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t used_ = kChunkBytes;  // in the last chunk
  std::vector<std::unique_ptr<char[]>> big_;
};

// One wire::Resource as the peer sent it (name, scalar, ranges).
struct ResourceItem {
  std::string_view name;
  double scalar = 0;
  Resources::Ranges ranges;
};
using ResourceItems = boost::container::small_vector<ResourceItem, 3>;
ResourceItems copyResources(const ResourceList& list, ItemText* text);

// Strings are views of the batch's ItemText.
struct UsageItem {
  std::string_view frameworkId, executorId;
  wire::ResourceUsage usage;
};

struct AgentItem {
  std::string_view id, hostname, httpAddress;
  std::string_view shard;  // the link shard carrying it; empty: direct
  ResourceItems total;
  Resources free;
  std::vector<std::pair<std::string_view, std::string_view>> attributes;
  bool connected = false, draining = false;
  double drainDeadlineS = 0;
  uint32_t taskCount = 0, offerCount = 0;
  std::vector<UsageItem> usage;
};

struct FrameworkItem {
  std::string_view id, name, user, role;
  double weight = 1;
  int32_t priority = 0;
  double dominantShare = 0;
  ResourceItems guaranteed;
  Resources allocated;
  bool connected = false, needsOffers = false;
  uint32_t taskCount = 0, offerCount = 0;
};

struct TaskItem {
  std::string_view taskId, frameworkId, agentId, name;
  int state = 0, reason = 0;  // wire::TaskState, wire::Reason
  std::string_view message;
  ResourceItems resources;
  std::string_view executorId;
  double updatedS = 0;
  int healthy = -1;  // the health check's verdict: 1, 0; -1: none (left out)
  std::string_view image;
};

struct OfferItem {
  std::string_view offerId, frameworkId, agentId;
  Resources resources;
  double expiresInS = 0;
};

// The JSON object of one item.
void appendItemJson(const AgentItem& item, std::string* out);
void appendItemJson(const FrameworkItem& item, std::string* out);
void appendItemJson(const TaskItem& item, std::string* out);
void appendItemJson(const OfferItem& item, std::string* out);

}  // namespace allot
