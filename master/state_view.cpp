#include "master/state_view.h"

#include <google/protobuf/util/json_util.h>

#include "base/clock.h"
#include "proto/json_writer.h"

namespace allot {

namespace {

// The summary prints only what is set, as its lists follow separately.
// Items print every field (zeros included) so readers need no defaults,
// through appendJson: the util costs tens of microseconds per item.
std::string summaryJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = false;
  options.always_print_enums_as_ints = false;
  std::string out;
  // Our own messages always convert; an error would be a programmer error.
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

}  // namespace

MasterStateView::MasterStateView(const Master& master, uint64_t leaderEpoch, double startTimeS)
    : master_(master), leaderEpoch_(leaderEpoch), startTimeS_(startTimeS) {
  agents_.reserve(master.agents_.size());
  for (const auto& [id, a] : master.agents_) agents_.push_back(id);
  for (const auto& [id, f] : master.frameworks_) {
    frameworks_.push_back(id);
    for (const auto& [tid, t] : f.tasks) tasks_.emplace_back(id, tid);
  }
  offers_.reserve(master.offers_.size());
  for (const auto& [id, o] : master.offers_) offers_.push_back(id);
}

void MasterStateView::fillSummary(const Master& m, state::MasterState* out) {
  out->set_master_id(m.masterId());
  out->set_allocator(m.options_.allocator);
  m.allocator_->totalResources().toWire(out->mutable_total());
}

bool MasterStateView::fillAgent(const Master& m, const std::string& id, state::AgentView* out) {
  auto it = m.agents_.find(id);
  if (it == m.agents_.end()) return false;
  const auto& a = it->second;
  out->set_id(id);
  out->set_hostname(a.info.hostname());
  *out->mutable_total() = a.info.resources();
  *out->mutable_attributes() = a.info.attributes();
  auto total = Resources::fromWire(a.info.resources());
  Resources free = m.allocator_->freeResources(a.handle);
  free.toWire(out->mutable_free());
  if (total) {
    Resources used = *total;
    used -= free;
    used.toWire(out->mutable_used());
  }
  out->set_connected(a.peer.has_value());
  out->set_draining(a.draining);
  out->set_drain_deadline_s(a.drainDeadlineS);
  uint32_t tasks = 0;
  for (const auto& [fid, ids] : a.tasks) tasks += static_cast<uint32_t>(ids.size());
  out->set_task_count(tasks);
  out->set_offer_count(static_cast<uint32_t>(a.offers.size()));
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
  auto it = m.frameworks_.find(id);
  if (it == m.frameworks_.end()) return false;
  const auto& f = it->second;
  out->set_id(id);
  out->set_name(f.info.name());
  out->set_user(f.info.user());
  out->set_role(f.info.role());
  out->set_weight(f.info.weight() > 0 ? f.info.weight() : 1);
  out->set_priority(f.info.priority());
  out->set_dominant_share(m.allocator_->dominantShare(f.handle));
  *out->mutable_guaranteed() = f.info.guaranteed();
  m.allocator_->allocation(f.handle).toWire(out->mutable_allocated());
  out->set_connected(f.peer.has_value());
  out->set_needs_offers(f.needsOffers);
  out->set_task_count(static_cast<uint32_t>(f.tasks.size()));
  out->set_offer_count(static_cast<uint32_t>(f.offers.size()));
  return true;
}

bool MasterStateView::fillTask(const Master& m, const std::string& frameworkId,
                               const std::string& taskId, state::TaskView* out) {
  auto f = m.frameworks_.find(frameworkId);
  if (f == m.frameworks_.end()) return false;
  auto t = f->second.tasks.find(taskId);
  if (t == f->second.tasks.end()) return false;
  const auto& task = t->second;
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
  return true;
}

bool MasterStateView::fillOffer(const Master& m, const std::string& id, state::OfferView* out) {
  auto it = m.offers_.find(id);
  if (it == m.offers_.end()) return false;
  const auto& o = it->second;
  out->set_offer_id(id);
  out->set_framework_id(o.frameworkId);
  out->set_agent_id(o.agentId);
  o.resources.toWire(out->mutable_resources());
  out->set_expires_in_s(std::chrono::duration<double>(o.expiry - m.clock_.now()).count());
  return true;
}

state::State MasterStateView::snapshot(const Master& m) {
  state::State s;
  MasterStateView view(m, 0, 0);
  auto* ms = s.mutable_master();
  fillSummary(m, ms);
  for (const auto& id : view.agents_) fillAgent(m, id, ms->add_agents());
  for (const auto& id : view.frameworks_) fillFramework(m, id, ms->add_frameworks());
  for (const auto& [fid, tid] : view.tasks_) fillTask(m, fid, tid, ms->add_tasks());
  for (const auto& id : view.offers_) fillOffer(m, id, ms->add_offers());
  return s;
}

bool MasterStateView::next(std::string* out) {
  if (section_ == Section::kHeader) {
    state::MasterState summary;
    fillSummary(master_, &summary);
    summary.set_leader_epoch(leaderEpoch_);
    summary.set_start_time_s(startTimeS_);
    std::string json = summaryJson(summary);  // "{...}"
    json.pop_back();
    *out += "{\"master\":" + json + (json.size() > 1 ? "," : "") + "\"agents\":[";
    section_ = Section::kAgents;
    return true;
  }
  renderSection(out);
  return section_ != Section::kDone;
}

// Renders up to kItemsPerChunk items of the current section, closing it
// (and opening the next) when its ids run out.
void MasterStateView::renderSection(std::string* out) {
  size_t rendered = 0;
  auto emit = [&](const google::protobuf::Message& item) {
    if (!firstInSection_) *out += ',';
    firstInSection_ = false;
    appendJson(item, out);
  };
  auto advance = [&](Section nextSection, const char* opening) {
    *out += ']';
    *out += opening;
    section_ = nextSection;
    position_ = 0;
    firstInSection_ = true;
  };
  auto deadline = std::chrono::steady_clock::now() + kChunkBudget;
  while (rendered < kItemsPerChunk && section_ != Section::kDone) {
    if (rendered % 16 == 15 && std::chrono::steady_clock::now() > deadline) break;
    if (section_ == Section::kAgents) {
      if (position_ == agents_.size()) { advance(Section::kFrameworks, ",\"frameworks\":["); continue; }
      state::AgentView v;
      if (fillAgent(master_, agents_[position_++], &v)) emit(v);
    } else if (section_ == Section::kFrameworks) {
      if (position_ == frameworks_.size()) { advance(Section::kTasks, ",\"tasks\":["); continue; }
      state::FrameworkView v;
      if (fillFramework(master_, frameworks_[position_++], &v)) emit(v);
    } else if (section_ == Section::kTasks) {
      if (position_ == tasks_.size()) { advance(Section::kOffers, ",\"offers\":["); continue; }
      state::TaskView v;
      const auto& [fid, tid] = tasks_[position_++];
      if (fillTask(master_, fid, tid, &v)) emit(v);
    } else {
      if (position_ == offers_.size()) { advance(Section::kDone, "}}"); continue; }
      state::OfferView v;
      if (fillOffer(master_, offers_[position_++], &v)) emit(v);
    }
    ++rendered;
  }
}

}  // namespace allot
