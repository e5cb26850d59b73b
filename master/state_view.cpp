#include "master/state_view.h"

#include <google/protobuf/util/json_util.h>

#include "base/clock.h"
#include "proto/json_writer.h"

namespace allot {

namespace {

// The summary prints only what is set, as its lists follow separately.
// Items print every field (zeros included) so readers need no defaults
// (master/state_items.h).
std::string summaryJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = false;
  options.always_print_enums_as_ints = false;
  std::string out;
  // Our own messages always convert; an error would be a programmer error.
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

// The image a task runs in: its own, or its custom executor's.
const std::string& imageOf(const wire::TaskInfo& task) {
  return task.container().image().empty() ? task.executor().container().image() : task.container().image();
}

}  // namespace

// The clock is read once per this many units of a slice.
constexpr size_t kUnitsPerClockRead = 8;

class MasterStateView::Meter {
 public:
  explicit Meter(const Slice& slice) : slice_(slice) {}
  void count(size_t n = 1) { units_ += n; }
  bool over() {
    if (units_ >= slice_.unitsMax) return true;
    if (units_ < nextClockRead_) return false;
    nextClockRead_ = units_ + kUnitsPerClockRead;
    return std::chrono::steady_clock::now() >= slice_.deadline;
  }

 private:
  const Slice& slice_;
  size_t units_ = 0;
  size_t nextClockRead_ = 0;
};

size_t StateBatch::itemCount() const {
  return agents.size() + frameworks.size() + tasks.size() + offers.size() + completedTasks.size();
}

std::string StateBatch::render() const {
  constexpr size_t kBytesPerItemGuess = 512;
  std::string out;
  out.reserve(prefix.size() + suffix.size() + itemCount() * kBytesPerItemGuess);
  out += prefix;
  bool comma = leadingComma;
  auto emit = [&](const auto& item) {
    if (comma) out += ',';
    comma = true;
    appendItemJson(item, &out);
  };
  for (const auto& v : agents) emit(v);
  for (const auto& v : frameworks) emit(v);
  for (const auto& v : tasks) emit(v);
  for (const auto& v : offers) emit(v);
  for (const auto& v : completedTasks) emit(v);
  out += suffix;
  return out;
}

void MasterStateView::IdList::add(const std::string& id, uint32_t owner) {
  bytes += id;
  ends.push_back(bytes.size());
  owners.push_back(owner);
}

void MasterStateView::IdList::truncate(size_t count) {
  if (count >= ends.size()) return;
  bytes.resize(count == 0 ? 0 : ends[count - 1]);
  ends.resize(count);
  owners.resize(count);
}

void MasterStateView::IdList::get(size_t i, std::string* out) const {
  size_t begin = i == 0 ? 0 : ends[i - 1];
  out->assign(bytes, begin, ends[i] - begin);
}

MasterStateView::MasterStateView(const Master& master, uint64_t leaderEpoch, double startTimeS)
    : master_(master), leaderEpoch_(leaderEpoch), startTimeS_(startTimeS) {}

std::string MasterStateView::header() {
  state::MasterState summary;
  fillSummary(master_, &summary);
  summary.set_leader_epoch(leaderEpoch_);
  summary.set_start_time_s(startTimeS_);
  std::string json = summaryJson(summary);  // "{...}"
  json.pop_back();
  return "{\"master\":" + json + (json.size() > 1 ? "," : "") + "\"agents\":[";
}

// Collects the keys of `map` a bucket at a time. True once all are in.
// Local (bucket) iterators stay valid across loop turns as long as the map
// is not rehashed: then its keys are collected again from the start.
template <typename Map>
bool MasterStateView::collectKeys(const Map& map, KeyCursor* c, IdList* out, uint32_t owner,
                                  Meter* meter) {
  if (c->bucketCount == 0) {
    c->startIds = out->size();
  } else if (c->bucketCount != map.bucket_count()) {
    out->truncate(c->startIds);
    c->bucket = 0;
  }
  c->bucketCount = map.bucket_count();
  while (c->bucket < c->bucketCount) {
    if (meter->over()) return false;
    for (auto it = map.begin(c->bucket); it != map.end(c->bucket); ++it) {
      out->add(it->first, owner);
      meter->count();
    }
    ++c->bucket;
    if (c->bucket % 64 == 0) meter->count();  // empty buckets cost something too
  }
  *c = KeyCursor{};
  return true;
}

// Task keys, framework after framework (in the order of frameworks_); a
// framework gone meanwhile has none.
bool MasterStateView::collectTaskKeys(Meter* meter) {
  while (taskOwner_ < frameworks_.size()) {
    frameworks_.get(taskOwner_, &owner_);
    if (master_.frameworks().count(owner_) &&
        !collectKeys(master_.taskBook().ofFramework(owner_), &cursor_, &tasks_,
                     static_cast<uint32_t>(taskOwner_), meter)) {
      return false;
    }
    cursor_ = KeyCursor{};
    ++taskOwner_;
  }
  return true;
}

// Copies the next item of the current section into `batch`; false when
// the section's ids ran out.
bool MasterStateView::fillNext(StateBatch* batch) {
  switch (phase_) {
    case Phase::kAgents:
      if (position_ == agents_.size()) return false;
      agents_.get(position_++, &key_);
      if (!copyAgent(master_, key_, &batch->agents.emplace_back(), &batch->text)) batch->agents.pop_back();
      return true;
    case Phase::kFrameworks:
      if (position_ == frameworks_.size()) return false;
      frameworks_.get(position_++, &key_);
      if (!copyFramework(master_, key_, &batch->frameworks.emplace_back(), &batch->text)) batch->frameworks.pop_back();
      return true;
    case Phase::kTasks: {
      if (position_ == tasks_.size()) return false;
      uint32_t owner = tasks_.owners[position_];
      tasks_.get(position_++, &key_);
      if (owner != cachedOwner_) {
        frameworks_.get(owner, &owner_);
        cachedOwner_ = owner;
        cachedTasks_ = &master_.taskBook().ofFramework(owner_);
      }
      auto t = cachedTasks_->find(key_);
      if (t == cachedTasks_->end()) return true;
      copyTaskRecord(owner_, key_, t->second, &batch->tasks.emplace_back(), &batch->text);
      return true;
    }
    case Phase::kOffers:
      if (position_ == offers_.size()) return false;
      offers_.get(position_++, &key_);
      if (!copyOffer(master_, key_, &batch->offers.emplace_back(), &batch->text)) batch->offers.pop_back();
      return true;
    case Phase::kCompletedTasks: {
      if (position_ == endedTo_ - endedFrom_) return false;
      uint64_t seq = endedFrom_ + position_++;
      const TaskBook& book = master_.taskBook();
      if (seq < book.endedDropped()) return true;  // pushed out meanwhile
      const auto& ended = book.endedShown()[seq - book.endedDropped()];
      copyTaskRecord(ended.frameworkId, ended.record.info.task_id(), ended.record,
                     &batch->completedTasks.emplace_back(), &batch->text);
      return true;
    }
    default:
      return false;
  }
}

// A batch with room for kBatchItemsMax items of the current section (the
// vectors never grow item by item: a grown vector moves every item).
std::unique_ptr<StateBatch> MasterStateView::newBatch() const {
  auto batch = std::make_unique<StateBatch>();
  switch (phase_) {
    case Phase::kAgents: batch->agents.reserve(kBatchItemsMax); break;
    case Phase::kFrameworks: batch->frameworks.reserve(kBatchItemsMax); break;
    case Phase::kTasks: batch->tasks.reserve(kBatchItemsMax); break;
    case Phase::kOffers: batch->offers.reserve(kBatchItemsMax); break;
    case Phase::kCompletedTasks: batch->completedTasks.reserve(kBatchItemsMax); break;
    default: break;
  }
  return batch;
}

std::unique_ptr<StateBatch> MasterStateView::takeBatch(bool last) {
  static const char* const kOpenings[] = {"", ",\"frameworks\":[", ",\"tasks\":[", ",\"offers\":[",
                                          ",\"completedTasks\":["};
  auto batch = std::move(batch_);
  if (!batch) batch = std::make_unique<StateBatch>();
  size_t section = static_cast<size_t>(phase_) - static_cast<size_t>(Phase::kAgents);
  if (!sectionOpened_) batch->prefix = kOpenings[section];
  batch->leadingComma = sectionHasItems_;
  sectionOpened_ = true;
  sectionHasItems_ = sectionHasItems_ || batch->itemCount() > 0;
  if (last) {
    batch->suffix = phase_ == Phase::kCompletedTasks ? "]}}" : "]";
    phase_ = static_cast<Phase>(static_cast<int>(phase_) + 1);
    position_ = 0;
    sectionOpened_ = false;
    sectionHasItems_ = false;
  }
  return batch;
}

std::unique_ptr<StateBatch> MasterStateView::step(const Slice& slice) {
  Meter meter(slice);
  cachedOwner_ = SIZE_MAX;  // the master may have changed since the last step
  cachedTasks_ = nullptr;
  while (phase_ < Phase::kAgents) {
    bool complete = false;
    switch (phase_) {
      case Phase::kAgentKeys:
        complete = collectKeys(master_.agents().all(), &cursor_, &agents_, 0, &meter);
        break;
      case Phase::kFrameworkKeys:
        complete = collectKeys(master_.frameworks(), &cursor_, &frameworks_, 0, &meter);
        break;
      case Phase::kTaskKeys:
        complete = collectTaskKeys(&meter);
        break;
      default:
        complete = collectKeys(master_.offerBook().all(), &cursor_, &offers_, 0, &meter);
        break;
    }
    if (!complete) return nullptr;
    phase_ = static_cast<Phase>(static_cast<int>(phase_) + 1);
    if (phase_ == Phase::kAgents) {
      endedFrom_ = master_.taskBook().endedDropped();
      endedTo_ = endedFrom_ + master_.taskBook().endedShown().size();
    }
  }
  if (phase_ == Phase::kDone) return nullptr;
  if (!batch_) batch_ = newBatch();
  while (batch_->itemCount() < kBatchItemsMax) {
    if (meter.over()) {
      // A slice that filled something hands it on rather than holding it.
      return batch_->itemCount() > 0 ? takeBatch(false) : nullptr;
    }
    if (!fillNext(batch_.get())) return takeBatch(true);
    meter.count();
  }
  return takeBatch(false);
}

void MasterStateView::fillSummary(const Master& m, state::MasterState* out) {
  out->set_master_id(m.masterId());
  out->set_allocator(m.options().allocator);
  m.allocator().totalResources().toWire(out->mutable_total());
}

bool MasterStateView::fillAgent(const Master& m, const std::string& id, state::AgentView* out) {
  auto it = m.agents().all().find(id);
  if (it == m.agents().all().end()) return false;
  const auto& a = it->second;
  out->set_id(id);
  out->set_hostname(a.info.hostname());
  out->set_http_address(a.info.http_address());
  *out->mutable_total() = a.info.resources();
  *out->mutable_attributes() = a.info.attributes();
  auto total = Resources::fromWire(a.info.resources());
  Resources free = m.allocator().freeResources(a.handle());
  free.toWire(out->mutable_free());
  if (total) {
    Resources used = *total;
    used -= free;
    used.toWire(out->mutable_used());
  }
  out->set_connected(a.peer.has_value());
  out->set_draining(a.draining());
  out->set_drain_deadline_s(a.drainDeadlineS());
  out->set_task_count(static_cast<uint32_t>(m.taskBook().countOnAgent(id)));
  out->set_offer_count(static_cast<uint32_t>(m.offerBook().countOfAgent(id)));
  for (const auto& [key, usage] : a.usage) {
    auto* u = out->add_usage();
    size_t slash = key.find('/');
    u->set_framework_id(key.substr(0, slash));
    if (slash != std::string::npos) u->set_executor_id(key.substr(slash + 1));
    *u->mutable_usage() = usage;
  }
  return true;
}

bool MasterStateView::fillFramework(const Master& m, const std::string& id,
                                    state::FrameworkView* out) {
  auto it = m.frameworks().find(id);
  if (it == m.frameworks().end()) return false;
  const auto& f = it->second;
  out->set_id(id);
  out->set_name(f.info.name());
  out->set_user(f.info.user());
  out->set_role(f.info.role());
  out->set_weight(f.info.weight() > 0 ? f.info.weight() : 1);
  out->set_priority(f.info.priority());
  out->set_dominant_share(m.allocator().dominantShare(f.handle));
  *out->mutable_guaranteed() = f.info.guaranteed();
  m.allocator().allocation(f.handle).toWire(out->mutable_allocated());
  out->set_connected(f.peer.has_value());
  out->set_needs_offers(f.needsOffers);
  out->set_task_count(static_cast<uint32_t>(m.taskBook().countOfFramework(id)));
  out->set_offer_count(static_cast<uint32_t>(m.offerBook().countOfFramework(id)));
  return true;
}

bool MasterStateView::fillTask(const Master& m, const std::string& frameworkId,
                               const std::string& taskId, state::TaskView* out) {
  const TaskRecord* task = m.taskBook().find(frameworkId, taskId);
  if (task == nullptr) return false;
  fillTaskRecord(frameworkId, taskId, *task, out);
  return true;
}

void MasterStateView::fillTaskRecord(const std::string& frameworkId, const std::string& taskId,
                                     const TaskRecord& task, state::TaskView* out) {
  out->set_task_id(taskId);
  out->set_framework_id(frameworkId);
  out->set_agent_id(task.info.agent_id());
  out->set_name(task.info.name());
  out->set_state(task.latest.state());
  out->set_reason(task.latest.reason());
  out->set_message(task.latest.message());
  *out->mutable_resources() = task.info.resources();
  out->set_executor_id(task.latest.executor_id().empty() ? task.info.executor().executor_id()
                                                         : task.latest.executor_id());
  out->set_updated_s(task.latest.timestamp_s());
  if (task.latest.has_healthy()) out->set_healthy(task.latest.healthy());
  out->set_image(imageOf(task.info));
}

bool MasterStateView::fillOffer(const Master& m, const std::string& id, state::OfferView* out) {
  const OfferRecord* found = m.offerBook().find(id);
  if (found == nullptr) return false;
  const OfferRecord& o = *found;
  out->set_offer_id(id);
  out->set_framework_id(o.frameworkId);
  out->set_agent_id(o.agentId);
  o.resources.toWire(out->mutable_resources());
  out->set_expires_in_s(std::chrono::duration<double>(o.expiry - m.clock().now()).count());
  return true;
}

bool MasterStateView::copyAgent(const Master& m, const std::string& id, AgentItem* out, ItemText* text) {
  auto it = m.agents().all().find(id);
  if (it == m.agents().all().end()) return false;
  const auto& a = it->second;
  out->id = text->keep(id);
  out->hostname = text->keep(a.info.hostname());
  out->httpAddress = text->keep(a.info.http_address());
  out->total = copyResources(a.info.resources(), text);
  out->free = m.allocator().freeResources(a.handle());
  out->attributes.reserve(static_cast<size_t>(a.info.attributes_size()));
  for (const auto& attr : a.info.attributes()) out->attributes.emplace_back(text->keep(attr.name()), text->keep(attr.value()));
  out->connected = a.peer.has_value();
  if (const PeerLink* link = a.peer ? m.peerTable().link(*a.peer) : nullptr) out->shard = text->keep(link->auth.via);
  out->draining = a.draining();
  out->drainDeadlineS = a.drainDeadlineS();
  out->taskCount = static_cast<uint32_t>(m.taskBook().countOnAgent(id));
  out->offerCount = static_cast<uint32_t>(m.offerBook().countOfAgent(id));
  out->usage.reserve(a.usage.size());
  for (const auto& [key, usage] : a.usage) {
    UsageItem& u = out->usage.emplace_back();
    std::string_view kept = text->keep(key);
    size_t slash = kept.find('/');
    u.frameworkId = kept.substr(0, slash);
    if (slash != std::string_view::npos) u.executorId = kept.substr(slash + 1);
    u.usage = usage;
  }
  return true;
}

bool MasterStateView::copyFramework(const Master& m, const std::string& id, FrameworkItem* out,
                                    ItemText* text) {
  auto it = m.frameworks().find(id);
  if (it == m.frameworks().end()) return false;
  const auto& f = it->second;
  out->id = text->keep(id);
  out->name = text->keep(f.info.name());
  out->user = text->keep(f.info.user());
  out->role = text->keep(f.info.role());
  out->weight = f.info.weight() > 0 ? f.info.weight() : 1;
  out->priority = f.info.priority();
  out->dominantShare = m.allocator().dominantShare(f.handle);
  out->guaranteed = copyResources(f.info.guaranteed(), text);
  out->allocated = m.allocator().allocation(f.handle);
  out->connected = f.peer.has_value();
  out->needsOffers = f.needsOffers;
  out->taskCount = static_cast<uint32_t>(m.taskBook().countOfFramework(id));
  out->offerCount = static_cast<uint32_t>(m.offerBook().countOfFramework(id));
  return true;
}

void MasterStateView::copyTaskRecord(const std::string& frameworkId, const std::string& taskId,
                                     const TaskRecord& task, TaskItem* out, ItemText* text) {
  out->taskId = text->keep(taskId);
  out->frameworkId = text->keep(frameworkId);
  out->agentId = text->keep(task.info.agent_id());
  out->name = text->keep(task.info.name());
  out->state = task.latest.state();
  out->reason = task.latest.reason();
  out->message = text->keep(task.latest.message());
  out->resources = copyResources(task.info.resources(), text);
  out->executorId = text->keep(task.latest.executor_id().empty() ? task.info.executor().executor_id()
                                                                 : task.latest.executor_id());
  out->updatedS = task.latest.timestamp_s();
  out->healthy = task.latest.has_healthy() ? (task.latest.healthy() ? 1 : 0) : -1;
  out->image = text->keep(imageOf(task.info));
}

bool MasterStateView::copyOffer(const Master& m, const std::string& id, OfferItem* out, ItemText* text) {
  const OfferRecord* found = m.offerBook().find(id);
  if (found == nullptr) return false;
  const OfferRecord& o = *found;
  out->offerId = text->keep(id);
  out->frameworkId = text->keep(o.frameworkId);
  out->agentId = text->keep(o.agentId);
  out->resources = o.resources;
  out->expiresInS = std::chrono::duration<double>(o.expiry - m.clock().now()).count();
  return true;
}

state::State MasterStateView::snapshot(const Master& m) {
  state::State s;
  auto* ms = s.mutable_master();
  fillSummary(m, ms);
  for (const auto& [id, a] : m.agents().all()) fillAgent(m, id, ms->add_agents());
  for (const auto& [id, f] : m.frameworks()) {
    fillFramework(m, id, ms->add_frameworks());
    for (const auto& [tid, t] : m.taskBook().ofFramework(id)) fillTask(m, id, tid, ms->add_tasks());
  }
  for (const auto& [id, o] : m.offerBook().all()) fillOffer(m, id, ms->add_offers());
  for (const auto& e : m.taskBook().endedShown()) {
    fillTaskRecord(e.frameworkId, e.record.info.task_id(), e.record, ms->add_completed_tasks());
  }
  return s;
}

}  // namespace allot
