// The offer half of the master: allocation rounds, offers, accept and
// decline with validation, rescinds.
#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "base/log.h"
#include "master/master.h"

namespace allot {
namespace {

// How long resources a framework declined (or left unused) are not offered
// to it again: its filter, else the master's default; at most a year.
Duration refuseFor(const wire::Filters& filters, Duration byDefault) {
  if (!filters.has_refuse_seconds()) return byDefault;
  double s = filters.refuse_seconds();
  return std::isfinite(s) && s > 0 ? secondsToDuration(std::min(s, 365.0 * 86400)) : Duration::zero();
}

}  // namespace

void Master::allocateRound(bool fullCycle) {
  if (offersHeld_) return;  // allocationPending_ stays for releaseOffers()
  allocationPending_ = false;
  std::vector<Grant>& grants = grantsScratch_;
  grants.clear();
  auto started = std::chrono::steady_clock::now();
  allocator_->allocate(clock_.now(), fullCycle, &grants);
  metrics_.allocationSeconds().Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (!grants.empty()) sendOffers(grants);
  if (fullCycle) revokeForStarved(clock_.now());
}

void Master::sendOffers(const std::vector<Grant>& grants) {
  TimePoint now = clock_.now();
  std::unordered_map<FrameworkHandle, wire::Envelope> batches;
  for (const Grant& g : grants) {
    FrameworkRecord& fw = frameworks_.at(frameworkByHandle_.at(g.framework));
    AgentRecord* found = agents_.byHandle(g.agent);
    CHECK(found != nullptr);  // the allocator grants only agents it was given
    AgentRecord& agent = *found;
    std::string offerId = newId('O');
    offers_.add(offerId, OfferRecord{fw.id, agent.id, g.resources, now + options_.offerTimeout});

    wire::Envelope& batch = batches[g.framework];
    wire::Offer* o = batch.mutable_resource_offers()->add_offers();
    o->set_offer_id(offerId);
    o->set_framework_id(fw.id);
    o->set_agent_id(agent.id);
    o->set_hostname(agent.info.hostname());
    o->set_agent_http_address(agent.info.http_address());
    g.resources.toWire(o->mutable_resources());
    *o->mutable_attributes() = agent.info.attributes();
    if (auto ex = agent.executors.find(fw.id); ex != agent.executors.end()) {
      for (const auto& id : ex->second) o->add_executor_ids(id);
    }
    if (batch.resource_offers().offers_size() >= static_cast<int>(kMaxOffersPerMessage)) {
      sendToFramework(fw, batch);
      batch.Clear();
    }
  }
  for (auto& [handle, batch] : batches) {
    if (batch.resource_offers().offers_size() == 0) continue;
    sendToFramework(frameworks_.at(frameworkByHandle_.at(handle)), batch);
  }
  metrics_.offersSent().Increment(static_cast<double>(grants.size()));
  LOG_DEBUG("allocation: " << grants.size() << " offers");
}

// A framework hears its share when it changed by more than 1% of the
// cluster (or it just registered).
void Master::sendShareUpdates() {
  double weights = 0;
  for (const auto& [id, fw] : frameworks_) weights += fw.info.weight() > 0 ? fw.info.weight() : 1;
  weightSum_ = weights;
  Resources total = allocator_->totalResources();
  for (auto& [id, fw] : frameworks_) sendShareUpdate(fw, total);
}

void Master::sendShareUpdate(FrameworkRecord& fw, const Resources& total) {
  if (!fw.peer) return;
  double share = allocator_->dominantShare(fw.handle);
  if (fw.lastSentShare >= 0 && std::abs(share - fw.lastSentShare) < 0.01) return;
  fw.lastSentShare = share;
  wire::Envelope e;
  auto* s = e.mutable_share_update();
  if (const Resources& g = allocator_->params(fw.handle).guaranteed; !g.empty()) {
    g.toWire(s->mutable_guaranteed());
  } else {
    double fraction = (fw.info.weight() > 0 ? fw.info.weight() : 1) / std::max(weightSum_, 1e-9);
    Resources guaranteed;
    for (const auto& sc : total.scalars()) {
      guaranteed.setScalarMillis(sc.name, static_cast<int64_t>(sc.millis * fraction));
    }
    guaranteed.toWire(s->mutable_guaranteed());
  }
  allocator_->allocation(fw.handle).toWire(s->mutable_allocated());
  s->set_dominant_share(share);
  outbox_.send(*fw.peer, e);
}

void Master::removeOffer(const std::string& offerId, bool recoverIt, bool notify,
                         std::optional<Duration> refuse) {
  std::optional<OfferRecord> removed = offers_.remove(offerId);
  if (!removed) return;
  const OfferRecord& offer = *removed;
  auto fw = frameworks_.find(offer.frameworkId);
  const AgentRecord* agent = agents_.find(offer.agentId);
  if (fw == frameworks_.end()) return;
  if (recoverIt && agent != nullptr) {
    allocator_->recover(fw->second.handle, agent->handle(), offer.resources, refuse,
                        clock_.now());
    allocationPending_ = true;
  }
  if (notify && fw->second.peer) {
    metrics_.offersRescinded().Increment();
    wire::Envelope e;
    e.mutable_offer_rescinded()->set_offer_id(offerId);
    outbox_.send(*fw->second.peer, e);
  }
}

void Master::removeOffers(const std::vector<std::string>& offerIds, bool recoverIt, bool notify) {
  for (const auto& id : offerIds) removeOffer(id, recoverIt, notify);
}

void Master::expireOffers(TimePoint now) {
  for (const std::string& id : offers_.takeExpired(now)) {
    LOG_DEBUG("offer " << id << " timed out; rescinding");
    removeOffer(id, true, true);
  }
}

void Master::onDecline(FrameworkRecord& fw, const wire::DeclineOffers& m) {
  Duration refuse = refuseFor(m.filters(), options_.refuseDefault);
  for (const auto& id : m.offer_ids()) {
    const OfferRecord* offer = offers_.find(id);
    if (offer == nullptr || offer->frameworkId != fw.id) continue;
    metrics_.offersDeclined().Increment();
    removeOffer(id, true, false, refuse);
  }
}

Status Master::validateTask(const FrameworkRecord& fw, const AgentRecord& agent,
                            const wire::TaskInfo& task, Resources* charged) {
  if (task.task_id().empty()) return Error{"task id must not be empty"};
  if (tasks_.countOfFramework(fw.id) >= limits::kTasksPerFrameworkMax) {
    return Error{"framework runs " + std::to_string(limits::kTasksPerFrameworkMax) + " tasks already"};
  }
  if (tasks_.find(fw.id, task.task_id())) return Error{"task id " + task.task_id() + " is already in use"};
  auto resources = Resources::fromWire(task.resources());
  if (!resources) return Error{"resources: " + resources.error().describe()};
  if (resources->scalarMillis("cpus") <= 0 && resources->scalarMillis("mem") <= 0) {
    return Error{"a task needs some cpus or mem"};
  }
  bool hasCommand = !task.command().shell().empty() || task.command().argv_size() > 0;
  bool customExecutor = task.has_executor() && (!task.executor().command().shell().empty() ||
                                                task.executor().command().argv_size() > 0);
  // A task of an image may run the image's Entrypoint/Cmd (the agent checks it has one).
  bool image = !task.container().image().empty();
  if (!hasCommand && !customExecutor && !image) return Error{"a task needs a command, an image or an executor"};
  if (task.has_executor() && !task.executor().framework_id().empty() &&
      task.executor().framework_id() != fw.id) {
    return Error{"executor belongs to another framework"};
  }
  if (!(task.kill_grace_s() >= 0) || !(task.max_duration_s() >= 0)) {
    return Error{"kill_grace_s and max_duration_s must be non-negative"};
  }
  *charged = *resources;
  if (customExecutor) {
    auto ex = agent.executors.find(fw.id);
    bool running = ex != agent.executors.end() && ex->second.count(task.executor().executor_id());
    if (!running) {
      auto overhead = Resources::fromWire(task.executor().resources());
      if (!overhead) return Error{"executor resources: " + overhead.error().describe()};
      *charged += *overhead;
    }
  }
  return okStatus();
}

std::string Master::runAsUser(const FrameworkRecord& fw, const wire::TaskInfo& task) {
  if (task.has_executor() && !task.executor().command().user().empty()) {
    return task.executor().command().user();
  }
  if (!task.command().user().empty()) return task.command().user();
  return fw.info.user();
}

void Master::launchTask(FrameworkRecord& fw, AgentRecord& agent, wire::TaskInfo task,
                        Resources charged) {
  task.set_agent_id(agent.id);
  // The agent runs the task as the user the ACLs allowed (empty: its
  // --default-user).
  std::string user = runAsUser(fw, task);
  task.mutable_command()->set_user(user);
  if (task.has_executor()) task.mutable_executor()->mutable_command()->set_user(user);
  if (task.has_executor()) {
    task.mutable_executor()->set_framework_id(fw.id);
    if (task.executor().executor_id().empty()) task.mutable_executor()->set_executor_id(task.task_id());
    agent.executors[fw.id].insert(task.executor().executor_id());
    fw.executorAgents.insert(agent.id);
  }
  tasks_.launch(fw.id, task, std::move(charged), clock_.now());
  wire::Envelope e;
  *e.mutable_run_task()->mutable_framework() = fw.info;
  e.mutable_run_task()->mutable_framework()->set_principal(principalOf(fw));
  *e.mutable_run_task()->mutable_task() = std::move(task);
  // The agent runs a named user that is uid 0 (root, or another name for
  // it) only with this; the ACL granted it by naming root (docs/acls.md).
  e.mutable_run_task()->set_allow_root(!user.empty() && fw.grant.allowRoot);
  outbox_.send(*agent.peer, e);
}

// An accept spends only offers that pass the offer book's rules (each
// outstanding, the sender's own, named once, all on one agent) on a
// connected agent; otherwise nothing launches and the sender's offers it
// named go back to the allocator at once. Each task is then checked on its
// own (authorization, validity, what is left of the offers).
void Master::onAccept(FrameworkRecord& fw, const wire::AcceptOffers& m) {
  std::vector<std::string> ids(m.offer_ids().begin(), m.offer_ids().end());
  auto accepted = offers_.checkAccept(fw.id, ids);
  if (!accepted) return refuseAccept(fw, m, wire::REASON_INVALID_OFFER, accepted.error().message);
  AgentRecord* agent = agents_.find(accepted->agentId);
  if (agent == nullptr || !agent->peer) {
    return refuseAccept(fw, m, wire::REASON_INVALID_OFFER, "agent " + accepted->agentId + " is gone");
  }
  launchAccepted(fw, *agent, m, accepted->offered);
}

void Master::refuseAccept(FrameworkRecord& fw, const wire::AcceptOffers& m, wire::Reason reason,
                          const std::string& why) {
  // A frame refused for its size may name more than the limits allow:
  // what lies beyond them gets no answer (the ErrorMessage covers it).
  int tasks = std::min(m.tasks_size(), static_cast<int>(limits::kTasksPerAcceptMax));
  for (int i = 0; i < tasks; ++i) sendMasterUpdate(fw, m.tasks(i), wire::TASK_ERROR, reason, why);
  int named = std::min(m.offer_ids_size(), static_cast<int>(limits::kOfferIdsPerMessageMax));
  std::vector<std::string> ids(m.offer_ids().begin(), m.offer_ids().begin() + named);
  removeOffers(offers_.ownOffers(fw.id, ids), true, false);
  LOG_INFO("framework " << fw.id << ": accept refused: " << why);
}

void Master::launchAccepted(FrameworkRecord& fw, AgentRecord& agent, const wire::AcceptOffers& m,
                            const Resources& offered) {
  Duration refuse = refuseFor(m.filters(), options_.refuseDefault);
  for (const auto& id : m.offer_ids()) offers_.remove(id);
  Resources used;
  std::unordered_set<std::string> seen;
  for (const auto& t : m.tasks()) {
    if (std::string user = runAsUser(fw, t); !fw.grant.allowsUser(user)) {
      sendMasterUpdate(fw, t, wire::TASK_ERROR, wire::REASON_NOT_AUTHORIZED,
                       "principal '" + principalOf(fw) + "' may not run tasks as user '" + user + "'");
      continue;
    }
    Resources charged;
    Status st = validateTask(fw, agent, t, &charged);
    if (st && !seen.insert(t.task_id()).second) st = Error{"task id " + t.task_id() + " appears twice"};
    if (st && !offered.contains(used + charged)) {
      st = Error{"task " + t.task_id() + " needs " + charged.toString() + " but only " +
                 (offered - used).toString() + " is left in the offers"};
    }
    if (st) st = checkLongTaskCap(agent, t, charged);
    if (!st) {
      sendMasterUpdate(fw, t, wire::TASK_ERROR, wire::REASON_INVALID_LAUNCH, st.error().describe());
      continue;
    }
    used += charged;
    launchTask(fw, agent, t, std::move(charged));
  }
  Resources unused = offered - used;
  if (!unused.empty()) {
    allocator_->recover(fw.handle, agent.handle(), unused, refuse, clock_.now());
    allocationPending_ = true;
  }
}

}  // namespace allot
