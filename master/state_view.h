// MasterStateView: the loop's half of GET /state on the master. It copies
// the master's records into batches of plain items (master/state_items.h:
// strings, numbers, Resources; no protobuf message) a slice at a time;
// another thread writes each batch as the JSON of allot.state.State
// (proto/state.proto; StateBatch::render) without touching the master.
// The HTTP side
// (master/state_view_cache.h) runs the slices, the worker and the readers.
//
// Two phases, both resumable across loop turns:
//  1. keys: the ids of agents, frameworks, tasks and offers, a few hash
//     buckets at a time into one flat buffer (no allocation per id). A map
//     that rehashes between two slices (it grew) has its keys collected
//     again from the start; nothing of it was rendered yet.
//  2. items: each id is looked up afresh and its item copied into the
//     current batch (what it shows, nothing converted). An item that
//     vanished meanwhile is left out, so every item is consistent in itself
//     and the document holds every item that lived through the rendering.
//
// The document is one JSON object, pieces in order:
//   header():  {"master":{...summary...,"agents":[
//   batches:   items of one section each (agents, frameworks, tasks,
//              offers, completedTasks), the section's opening before the
//              first, the document's end after the last:  ]}}
// Completed tasks (the master's bounded list of tasks that ended lately)
// need no keys: the view notes the list's sequence numbers when the keys
// are in, and renders those still listed.
//
// Thread: the master's loop (construction, header(), step()); the Master
// must outlive the view. StateBatch::render() runs on any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "master/master.h"
#include "master/state_items.h"
#include "proto/state.pb.h"

namespace allot {

// One slice of items, all of one section, handed to another thread.
struct StateBatch {
  StateBatch() = default;
  StateBatch(const StateBatch&) = delete;
  StateBatch& operator=(const StateBatch&) = delete;

  // The JSON piece: prefix, the items comma-separated (a comma first when
  // leadingComma), suffix. Reads only the batch.
  std::string render() const;
  size_t itemCount() const;

  // Only this batch's section is filled; the items' strings are in text.
  ItemText text;
  std::vector<AgentItem> agents;
  std::vector<FrameworkItem> frameworks;
  std::vector<TaskItem> tasks;
  std::vector<OfferItem> offers;
  std::vector<TaskItem> completedTasks;
  std::string prefix;
  bool leadingComma = false;
  std::string suffix;
};

class MasterStateView {
 public:
  // A batch holds at most this many items (about 100 KiB of JSON).
  static constexpr size_t kBatchItemsMax = 256;

  // What one step() may do: stop at the deadline (checked every few
  // units) or after unitsMax units (an id collected or an item filled).
  struct Slice {
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    size_t unitsMax = SIZE_MAX;
  };

  MasterStateView(const Master& master, uint64_t leaderEpoch, double startTimeS);

  // The document's opening, with the summary as of now. Call once, first.
  std::string header();

  // Works until the slice is used up or a batch is complete; returns that
  // batch (null when the slice ran out first: call again). After the batch
  // that closes the document, done() is true.
  std::unique_ptr<StateBatch> step(const Slice& slice);
  bool done() const { return phase_ == Phase::kDone; }

  // The whole state at once, on the caller's thread (tests, tools).
  static state::State snapshot(const Master& master);

  // The protobuf views of one item (snapshot(); the specification the
  // plain copies below must print the same as).
  static bool fillAgent(const Master& m, const std::string& id, state::AgentView* out);
  static bool fillFramework(const Master& m, const std::string& id, state::FrameworkView* out);
  static bool fillTask(const Master& m, const std::string& frameworkId, const std::string& taskId,
                       state::TaskView* out);
  static bool fillOffer(const Master& m, const std::string& id, state::OfferView* out);
  static void fillTaskRecord(const std::string& frameworkId, const std::string& taskId,
                             const TaskRecord& task, state::TaskView* out);
  static void fillSummary(const Master& m, state::MasterState* out);

  // The plain copies (master/state_items.h) the loop makes for the worker.
  static bool copyAgent(const Master& m, const std::string& id, AgentItem* out, ItemText* text);
  static bool copyFramework(const Master& m, const std::string& id, FrameworkItem* out, ItemText* text);
  static void copyTaskRecord(const std::string& frameworkId, const std::string& taskId,
                             const TaskRecord& task, TaskItem* out, ItemText* text);
  static bool copyOffer(const Master& m, const std::string& id, OfferItem* out, ItemText* text);

 private:
  enum class Phase { kAgentKeys, kFrameworkKeys, kTaskKeys, kOfferKeys, kAgents, kFrameworks,
                     kTasks, kOffers, kCompletedTasks, kDone };

  // Ids side by side in one buffer: id i is bytes[ends[i-1], ends[i]).
  struct IdList {
    std::string bytes;
    std::vector<size_t> ends;
    std::vector<uint32_t> owners;  // tasks: the index of their framework
    void add(const std::string& id, uint32_t owner = 0);
    void truncate(size_t count);
    size_t size() const { return ends.size(); }
    void get(size_t i, std::string* out) const;
  };
  // Where a key collection stands in one hash map.
  struct KeyCursor {
    size_t bucket = 0;
    size_t bucketCount = 0;  // 0: not started
    size_t startIds = 0;     // ids in the list before this map's
  };

  class Meter;  // counts a slice's units, reads the clock now and then
  template <typename Map>
  bool collectKeys(const Map& map, KeyCursor* cursor, IdList* out, uint32_t owner, Meter* meter);
  bool collectTaskKeys(Meter* meter);
  bool fillNext(StateBatch* batch);
  std::unique_ptr<StateBatch> newBatch() const;
  std::unique_ptr<StateBatch> takeBatch(bool last);

  const Master& master_;
  uint64_t leaderEpoch_;
  double startTimeS_;
  Phase phase_ = Phase::kAgentKeys;
  KeyCursor cursor_;
  size_t taskOwner_ = 0;  // the framework whose task keys are collected
  IdList agents_, frameworks_, tasks_, offers_;
  uint64_t endedFrom_ = 0, endedTo_ = 0;  // sequence numbers of completed tasks
  size_t position_ = 0;          // next id of the section being filled
  bool sectionOpened_ = false;   // the section's opening was emitted
  bool sectionHasItems_ = false;
  std::unique_ptr<StateBatch> batch_;
  std::string key_, owner_;      // reused lookup keys
  // The tasks of the task keys' owner index, looked up once per step (the
  // master does not change during one).
  size_t cachedOwner_ = SIZE_MAX;
  const TaskBook::Tasks* cachedTasks_ = nullptr;
};

}  // namespace allot
