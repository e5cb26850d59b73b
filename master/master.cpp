#include "master/master.h"

#include <random>

#include "base/check.h"
#include "base/log.h"
#include "base/secrets.h"
#include "proto/validate.h"

namespace allot {
namespace {

double toSeconds(Duration d) { return std::chrono::duration<double>(d).count(); }

double weightOf(const wire::FrameworkInfo& info) { return info.weight() > 0 ? info.weight() : 1.0; }

}  // namespace

Result<std::unique_ptr<Master>> Master::create(MasterOptions options, const Clock& clock,
                                               Outbox& outbox) {
  if (options.masterId.empty()) options.masterId = randomHex(6);
  AllocatorOptions allocatorOptions{options.minOffer, std::random_device{}(), options.policy.roles};
  allocatorOptions.reservationTimeout = options.policy.reservationTimeout;
  allocatorOptions.reservationHysteresis = options.policy.revocation.hysteresis;
  auto allocator = createAllocator(options.allocator, allocatorOptions);
  if (!allocator) return allocator.error();
  return std::unique_ptr<Master>(
      new Master(std::move(options), clock, outbox, std::move(*allocator)));
}

Master::Master(MasterOptions options, const Clock& clock, Outbox& outbox,
               std::unique_ptr<Allocator> allocator)
    : options_(std::move(options)),
      flagRoles_(options_.policy.roles),
      clock_(clock),
      outbox_(outbox),
      allocator_(std::move(allocator)),
      nextFullCycle_(clock.now() + options_.allocationInterval) {}

std::optional<double> Master::dominantShare(const std::string& frameworkId) const {
  auto it = frameworks_.find(frameworkId);
  if (it == frameworks_.end()) return std::nullopt;
  return allocator_->dominantShare(it->second.handle);
}

void Master::sendError(PeerId peer, const std::string& message, bool fatal) {
  wire::Envelope e;
  e.mutable_error()->set_message(message);
  e.mutable_error()->set_fatal(fatal);
  outbox_.send(peer, e);
  if (fatal) outbox_.close(peer, message);
}

void Master::sendToFramework(FrameworkRecord& fw, const wire::Envelope& e) {
  if (fw.peer) {
    outbox_.send(*fw.peer, e);
    return;
  }
  if (e.has_status_update()) {
    if (fw.pending.size() >= kMaxPendingUpdatesPerFramework) fw.pending.pop_front();
    fw.pending.push_back(e);
  }
}

// ------------------------------------------------------------------ peers

void Master::peerConnected(PeerId peer, const wire::Hello& hello, const PeerIdentity& identity) {
  peers_.connect(peer, hello.role(), identity, clock_.now());
}

void Master::closeUnregistered(TimePoint now) {
  for (PeerId peer : peers_.takeUnregistered(now - options_.registrationTimeout)) {
    LOG_WARNING("peer " << peer << " did not register within "
                        << toSeconds(options_.registrationTimeout) << " s; closing");
    sendError(peer, "no registration within " + std::to_string(toSeconds(options_.registrationTimeout)) + " s", true);
  }
}

const std::string& Master::principalOf(const FrameworkRecord& fw) const {
  static const std::string none;
  const IdOwner* owner = peers_.owner(IdKind::kFramework, fw.id);
  return owner == nullptr ? none : owner->principal;
}

void Master::peerClosed(PeerId peer) {
  // A registration waiting for the store ends here; the store's answer
  // finds nothing and drops what it wrote (identityStored).
  if (auto r = registering_.find(peer); r != registering_.end()) {
    registeringIds_.erase(r->second.m.info().id());
    registering_.erase(r);
  }
  std::optional<PeerLink> link = peers_.close(peer);
  if (!link || link->id.empty()) return;
  if (link->role == wire::ROLE_SCHEDULER) {
    auto fw = frameworks_.find(link->id);
    if (fw != frameworks_.end() && fw->second.peer == peer) disconnectFramework(fw->second);
  } else if (link->role == wire::ROLE_AGENT) {
    AgentRecord* agent = agents_.find(link->id);
    if (agent != nullptr && agent->peer == peer) disconnectAgent(*agent);
  }
}

void Master::peerMessage(PeerId peer, const wire::Envelope& e) {
  const PeerLink* link = peers_.link(peer);
  if (link == nullptr) return;
  const PeerLink& binding = *link;
  Status valid = binding.role == wire::ROLE_SCHEDULER ? validateFromScheduler(e)
                 : binding.role == wire::ROLE_AGENT   ? validateFromAgent(e)
                                                      : Status(Error{"unexpected role"});
  if (!valid) return refuseFrame(peer, binding, e, valid.error());
  if (binding.role == wire::ROLE_SCHEDULER) {
    if (e.has_register_framework()) return onRegisterFramework(peer, e.register_framework());
    auto fw = frameworks_.find(binding.id);
    if (binding.id.empty() || fw == frameworks_.end()) {
      return sendError(peer, "not registered: send RegisterFramework first", false);
    }
    return schedulerMessage(peer, fw->second, e);
  }
  if (binding.role == wire::ROLE_AGENT) {
    if (e.has_register_agent()) return onRegisterAgent(peer, e.register_agent());
    AgentRecord* agent = agents_.find(binding.id);
    if (binding.id.empty() || agent == nullptr) {
      return sendError(peer, "not registered: send RegisterAgent first", false);
    }
    return agentMessage(peer, *agent, e);
  }
  sendError(peer, "the master talks to schedulers and agents only", true);
}

void Master::refuseFrame(PeerId peer, const PeerLink& link, const wire::Envelope& e,
                         const Error& why) {
  bool fatal = e.has_register_framework() || e.has_register_agent();
  std::string message = "refused: " + why.describe();
  LOG_WARNING("peer " << peer << ": " << message);
  sendError(peer, message, fatal);
  // A refused accept still releases the sender's offers it named.
  auto fw = link.id.empty() ? frameworks_.end() : frameworks_.find(link.id);
  if (e.has_accept_offers() && link.role == wire::ROLE_SCHEDULER && fw != frameworks_.end()) {
    refuseAccept(fw->second, e.accept_offers(), wire::REASON_INVALID_LAUNCH, message);
  }
}

void Master::schedulerMessage(PeerId peer, FrameworkRecord& fw, const wire::Envelope& e) {
  switch (e.body_case()) {
    case wire::Envelope::kAcceptOffers: return onAccept(fw, e.accept_offers());
    case wire::Envelope::kDeclineOffers: return onDecline(fw, e.decline_offers());
    case wire::Envelope::kSetNeedsOffers:
      fw.needsOffers = e.set_needs_offers().needs_offers();
      allocator_->setActive(fw.handle, fw.needsOffers);
      if (fw.needsOffers) allocationPending_ = true;
      return;
    case wire::Envelope::kSetFilters:
      setAgentFilters(fw, {e.set_filters().filters().agent_ids().begin(),
                           e.set_filters().filters().agent_ids().end()});
      if (auto r = Resources::fromWire(e.set_filters().filters().min_free()); r) {
        fw.minFree = *r;
      } else {
        sendError(peer, "SetFilters: " + r.error().describe(), false);
      }
      applyStandingFilters(fw);
      return;
    case wire::Envelope::kKillTask: return onKill(fw, e.kill_task());
    case wire::Envelope::kAcknowledge: return onAcknowledge(fw, e.acknowledge());
    case wire::Envelope::kReconcile: return onReconcile(fw, e.reconcile());
    case wire::Envelope::kUnregisterFramework: return onUnregisterFramework(peer, fw);
    default:
      return sendError(peer, "unexpected message from a scheduler (field " +
                                 std::to_string(e.body_case()) + ")", false);
  }
}

void Master::agentMessage(PeerId peer, AgentRecord& agent, const wire::Envelope& e) {
  agent.lastSeen = clock_.now();
  switch (e.body_case()) {
    case wire::Envelope::kHeartbeat: return onHeartbeat(peer, agent, e.heartbeat());
    case wire::Envelope::kStatusUpdate: return onStatusUpdate(agent, e.status_update());
    case wire::Envelope::kUsageReport: return onUsageReport(agent, e.usage_report());
    default:
      return sendError(peer, "unexpected message from an agent (field " +
                                 std::to_string(e.body_case()) + ")", false);
  }
}

// ------------------------------------------------------------------ frameworks

FrameworkParams Master::paramsOf(const wire::FrameworkInfo& info, const FrameworkGrant& grant) const {
  FrameworkParams p;
  p.weight = info.weight() > 0 ? info.weight() : 1.0;
  p.priority = info.priority();
  p.guaranteed = effectiveGuarantee(options_.policy, info, grant.guarantee);
  p.role = info.role();
  return p;
}

Master::FrameworkRecord& Master::ensureFramework(const wire::FrameworkInfo& info,
                                                 const FrameworkGrant* grant) {
  auto [it, inserted] = frameworks_.try_emplace(info.id());
  FrameworkRecord& fw = it->second;
  if (grant) fw.grant = *grant;  // else: the one it registered with, if any
  if (inserted) {
    fw.id = info.id();
    fw.handle = allocator_->addFramework(paramsOf(info, fw.grant));
    frameworkByHandle_[fw.handle] = fw.id;
    fw.disconnectedAt = clock_.now();
  } else {
    allocator_->updateFramework(fw.handle, paramsOf(info, fw.grant));
  }
  weightSum_ += weightOf(info) - (inserted ? 0 : weightOf(fw.info));
  fw.info = info;
  return fw;
}

Result<FrameworkGrant> Master::authorizeFramework(const PeerLink& link,
                                                  const wire::RegisterFramework& m) {
  const wire::FrameworkInfo& info = m.info();
  const std::string& principal = link.auth.principal;
  auto grant = options_.acls.registerFramework(principal);
  if (!grant) return Error{"principal '" + principal + "' may not register frameworks"};
  if (!grant->allowsUser(info.user())) {
    return Error{"principal '" + principal + "' may not run tasks as user '" + info.user() + "'"};
  }
  if (!grant->allowsRole(info.role())) {
    return Error{"principal '" + principal + "' may not use role '" + info.role() + "'"};
  }
  if (info.weight() > grant->weightMax) {
    return Error{"principal '" + principal + "' may not ask for a weight above " +
                 std::to_string(grant->weightMax)};
  }
  bool known = !info.id().empty() && frameworks_.count(info.id());
  if (!known && frameworks_.size() >= limits::kFrameworksMax) {
    return Error{"the master holds " + std::to_string(limits::kFrameworksMax) + " frameworks already"};
  }
  Status st = peers_.mayTakeOver(IdKind::kFramework, info.id(), link.auth, m.framework_secret());
  if (st) st = peers_.withinLimit(IdKind::kFramework, info.id(), principal, grant->frameworksMax);
  if (!st) return st.error();
  return *grant;
}

void Master::setAgentFilters(FrameworkRecord& fw, std::vector<std::string> agentIds) {
  for (const auto& id : fw.agentFilterIds) {
    auto naming = filtersNaming_.find(id);
    if (naming == filtersNaming_.end()) continue;
    naming->second.erase(fw.id);
    if (naming->second.empty()) filtersNaming_.erase(naming);
  }
  fw.agentFilterIds = std::move(agentIds);
  for (const auto& id : fw.agentFilterIds) filtersNaming_[id].insert(fw.id);
}

void Master::applyStandingFilters(FrameworkRecord& fw) {
  std::vector<AgentHandle> handles;
  for (const auto& id : fw.agentFilterIds) {
    if (const AgentRecord* a = agents_.find(id)) handles.push_back(a->handle());
  }
  // A list naming only unknown agents still means "none of the others".
  if (handles.empty() && !fw.agentFilterIds.empty()) handles.push_back(kMaxAgents);
  allocator_->setStandingFilters(fw.handle, handles, fw.minFree);
}

void Master::onUnregisterFramework(PeerId peer, FrameworkRecord& fw) {
  std::string id = fw.id;
  removeFramework(id, "unregistered by its scheduler");
  outbox_.close(peer, "framework unregistered");
}

void Master::disconnectFramework(FrameworkRecord& fw) {
  LOG_INFO("framework " << fw.id << " disconnected; failover timeout "
                        << (fw.info.failover_timeout_s() > 0
                                ? fw.info.failover_timeout_s()
                                : toSeconds(options_.failoverTimeoutDefault))
                        << " s");
  fw.peer.reset();
  fw.disconnectedAt = clock_.now();
  allocator_->setActive(fw.handle, false);
  removeOffers(offers_.ofFramework(fw.id), true, false);
}

void Master::removeFramework(const std::string& frameworkId, const std::string& why) {
  auto it = frameworks_.find(frameworkId);
  if (it == frameworks_.end()) return;
  FrameworkRecord& fw = it->second;
  LOG_INFO("removing framework " << frameworkId << ": " << why);
  removeOffers(offers_.ofFramework(fw.id), true, true);
  for (const auto& [taskId, task] : tasks_.ofFramework(frameworkId)) {
    const AgentRecord* agent = agents_.find(task.info.agent_id());
    if (agent == nullptr) continue;
    allocator_->recover(fw.handle, agent->handle(), task.charged, std::nullopt, clock_.now());
  }
  // Only the agents that ran its tasks or hold its executors hear of it:
  // a walk over every agent made this O(agents), a stall of the whole
  // loop at 50,000 agents each time a framework leaves.
  std::unordered_set<std::string> present = tasks_.dropFramework(frameworkId);
  present.insert(fw.executorAgents.begin(), fw.executorAgents.end());
  for (const std::string& agentId : present) {
    AgentRecord* agent = agents_.find(agentId);
    if (agent == nullptr) continue;
    agent->executors.erase(frameworkId);
    if (agent->peer) {
      wire::Envelope e;
      e.mutable_shutdown_framework()->set_framework_id(frameworkId);
      outbox_.send(*agent->peer, e);
    }
  }
  if (fw.peer) peers_.bind(*fw.peer, "");
  peers_.forget(IdKind::kFramework, frameworkId);
  if (removedFrameworks_.insert(frameworkId).second) {
    removedOrder_.push_back(frameworkId);
    if (removedOrder_.size() > kMaxRemovedFrameworksRemembered) {
      removedFrameworks_.erase(removedOrder_.front());
      removedOrder_.pop_front();
    }
  }
  setAgentFilters(fw, {});
  weightSum_ -= weightOf(fw.info);
  allocator_->removeFramework(fw.handle);
  frameworkByHandle_.erase(fw.handle);
  frameworks_.erase(it);
  allocationPending_ = true;
}

// ------------------------------------------------------------------ agents

Status Master::authorizeAgent(const PeerLink& link, const wire::RegisterAgent& m) {
  const std::string& principal = link.auth.principal;
  size_t agentsMax = options_.acls.agentsMax(principal);
  if (agentsMax == 0) return Error{"principal '" + principal + "' may not register agents"};
  const std::string& id = m.info().id();
  bool known = !id.empty() && agents_.contains(id);
  if (!known && agents_.size() >= limits::kAgentsMax) {
    return Error{"the master holds " + std::to_string(limits::kAgentsMax) + " agents already"};
  }
  Status st = peers_.mayTakeOver(IdKind::kAgent, id, link.auth, m.agent_secret());
  if (!st) return st;
  return peers_.withinLimit(IdKind::kAgent, id, principal, agentsMax);
}

void Master::onRegisterAgent(PeerId peer, const wire::RegisterAgent& m) {
  auto total = Resources::fromWire(m.info().resources());
  if (!total) return sendError(peer, "RegisterAgent: resources: " + total.error().describe(), true);
  const PeerLink& link = *peers_.link(peer);
  if (auto st = authorizeAgent(link, m); !st) {
    LOG_WARNING("peer " << peer << ": RegisterAgent refused: " << st.error().describe());
    return sendError(peer, "RegisterAgent: not authorized: " + st.error().describe(), true);
  }
  std::string id = m.info().id().empty() ? newId('A') : m.info().id();
  if (const std::string previous = link.id; !previous.empty() && previous != id) {
    AgentRecord* old = agents_.find(previous);
    if (old != nullptr && old->peer == peer) disconnectAgent(*old);
  }
  bool inserted = false;
  AgentRecord& agent = agents_.add(id, &inserted);
  if (!inserted) {
    // Re-registration: forget the old accounting, rebuild it from the message.
    recoverAgentHoldings(agent);
    if (agent.peer && *agent.peer != peer) {
      peers_.bind(*agent.peer, "");
      outbox_.close(*agent.peer, "agent " + id + " re-registered on a new connection");
    }
    allocator_->removeAgent(agent.handle());
  }
  // A new id gets a new secret; an id this master does not know (it is a
  // new leader) keeps the secret its agent presents.
  const IdOwner& owner = peers_.claim(IdKind::kAgent, id, link.auth.principal,
                                      m.info().id().empty() ? "" : m.agent_secret(), ids_);
  agent.info = m.info();
  agent.info.set_id(id);
  agents_.setHandle(agent, allocator_->addAgent(*total));
  if (agent.draining()) allocator_->setAgentActive(agent.handle(), false);
  agent.peer = peer;
  agent.lastSeen = clock_.now();
  agents_.recheckAt(agent, agent.lastSeen + options_.agentTimeout);
  peers_.bind(peer, id);
  if (auto st = adoptAgentTasks(agent, m); !st) LOG_WARNING("agent " << id << ": " << st.error().describe());
  if (auto naming = filtersNaming_.find(id); naming != filtersNaming_.end()) {
    for (const auto& fid : naming->second) applyStandingFilters(frameworks_.at(fid));
  }
  allocationPending_ = true;
  LOG_INFO("agent " << id << " (" << m.info().hostname() << ") "
                    << (inserted ? "registered" : "re-registered") << " with "
                    << total->toString());
  wire::Envelope reply;
  auto* r = reply.mutable_agent_registered();
  r->set_agent_id(id);
  r->set_master_id(options_.masterId);
  r->set_heartbeat_interval_s(toSeconds(options_.heartbeatInterval));
  r->set_agent_secret(owner.secret);
  r->set_acls_from_file(options_.acls.fromFile());
  for (const auto& p : options_.acls.operatePrincipals()) r->add_operate_principals(p);
  outbox_.send(peer, reply);
}

// Rebuilds the agent's tasks from what it reports; tasks the master thought
// were there and the agent does not report are lost.
Status Master::adoptAgentTasks(AgentRecord& agent, const wire::RegisterAgent& m) {
  adoptAgentFrameworks(m);
  std::unordered_map<std::string, std::unordered_set<std::string>> reported;
  std::string problems;
  for (const auto& ex : m.executors()) adoptExecutor(agent, ex, &reported, &problems);
  loseUnreported(agent, reported);
  if (!problems.empty()) return Error{"ignored" + problems};
  return okStatus();
}

// An agent may introduce a framework this master has not seen (it failed
// over), never rewrite one: the framework's own registration is the truth.
void Master::adoptAgentFrameworks(const wire::RegisterAgent& m) {
  for (const auto& info : m.frameworks()) {
    if (info.id().empty() || frameworks_.count(info.id())) continue;
    if (frameworks_.size() >= limits::kFrameworksMax) break;
    wire::FrameworkInfo known;
    known.set_id(info.id());
    known.set_name(info.name());
    known.set_failover_timeout_s(info.failover_timeout_s());
    allocator_->setActive(ensureFramework(known).handle, false);
  }
}

void Master::adoptExecutor(AgentRecord& agent, const wire::ExecutorState& ex, TaskIdsByFramework* reported,
                           std::string* problems) {
  const std::string& fid = ex.info().framework_id();
  auto fwIt = frameworks_.find(fid);
  if (fwIt == frameworks_.end() && !fid.empty() && !removedFrameworks_.count(fid) &&
      frameworks_.size() < limits::kFrameworksMax) {
    // A framework the agent did not list (only ended tasks left): known
    // by id alone until its scheduler registers, like the listed ones.
    wire::FrameworkInfo known;
    known.set_id(fid);
    allocator_->setActive(ensureFramework(known).handle, false);
    fwIt = frameworks_.find(fid);
  }
  if (fwIt == frameworks_.end()) {
    *problems += " executor " + ex.info().executor_id() + " of unknown framework " + fid + ";";
    return;
  }
  FrameworkRecord& fw = fwIt->second;
  agent.executors[fid].insert(ex.info().executor_id());
  fw.executorAgents.insert(agent.id);
  for (int i = 0; i < ex.tasks_size(); ++i) {
    const wire::TaskInfo& t = ex.tasks(i);
    wire::TaskStatus latest = i < ex.latest_size() ? ex.latest(i) : wire::TaskStatus();
    if (isTerminal(latest.state()) && latest.task_id() == t.task_id()) continue;
    auto charged = Resources::fromWire(t.resources());
    if (!charged) continue;
    (*reported)[fid].insert(t.task_id());
    const TaskRecord* known = tasks_.find(fid, t.task_id());
    if (known == nullptr && tasks_.countOfFramework(fid) >= limits::kTasksPerFrameworkMax) continue;
    wire::TaskInfo info = t;
    info.set_agent_id(agent.id);
    if (!tasks_.adopt(fid, info, *charged, latest)) {
      *problems += " task " + t.task_id() + " runs on agent " + known->info.agent_id() + ";";
      continue;
    }
    allocator_->allocateUsed(fw.handle, agent.handle(), *charged);
  }
}

void Master::loseUnreported(AgentRecord& agent, const TaskIdsByFramework& reported) {
  static const std::unordered_set<std::string> kNone;
  std::vector<std::pair<std::string, std::string>> gone;  // framework id, task id
  for (const auto& [fid, taskIds] : tasks_.onAgent(agent.id)) {
    auto r = reported.find(fid);
    const auto& kept = r == reported.end() ? kNone : r->second;
    for (const auto& tid : taskIds) {
      if (!kept.count(tid)) gone.emplace_back(fid, tid);
    }
  }
  for (const auto& [fid, tid] : gone) {
    std::optional<wire::TaskInfo> info = tasks_.drop(fid, tid);
    auto fwIt = frameworks_.find(fid);
    if (!info || fwIt == frameworks_.end()) continue;
    sendMasterUpdate(fwIt->second, *info, wire::TASK_LOST, wire::REASON_AGENT_RESTARTED,
                     "agent " + agent.id + " re-registered without this task");
  }
}

// Returns everything allocated on the agent (its offers, rescinded, and its
// tasks' resources) to the allocator, before the agent's handle goes away.
void Master::recoverAgentHoldings(AgentRecord& agent) {
  removeOffers(offers_.ofAgent(agent.id), true, true);
  for (const auto& [fid, taskIds] : tasks_.onAgent(agent.id)) {
    auto fw = frameworks_.find(fid);
    if (fw == frameworks_.end()) continue;
    for (const auto& tid : taskIds) {
      const TaskRecord* task = tasks_.find(fid, tid);
      if (task == nullptr) continue;
      allocator_->recover(fw->second.handle, agent.handle(), task->charged, std::nullopt, clock_.now());
    }
  }
}

void Master::onHeartbeat(PeerId peer, AgentRecord& agent, const wire::Heartbeat& m) {
  wire::Envelope e;
  e.mutable_heartbeat_ack()->set_sequence(m.sequence());
  outbox_.send(peer, e);
}

void Master::onUsageReport(AgentRecord& agent, const wire::UsageReport& m) {
  agent.usage.clear();
  for (const auto& u : m.executors()) {
    agent.usage[u.framework_id() + "/" + u.executor_id()] = u.usage();
    LOG_DEBUG("usage from agent " << agent.id << ": " << u.framework_id() << "/" << u.executor_id()
                                  << " cpu_s=" << u.usage().cpu_time_s()
                                  << " mem_bytes=" << u.usage().mem_bytes()
                                  << " mem_peak_bytes=" << u.usage().mem_peak_bytes()
                                  << " processes=" << u.usage().processes()
                                  << " disk_bytes=" << u.usage().disk_bytes());
  }
}

std::optional<wire::ResourceUsage> Master::executorUsage(const std::string& agentId,
                                                         const std::string& frameworkId,
                                                         const std::string& executorId) const {
  const AgentRecord* agent = agents_.find(agentId);
  if (agent == nullptr) return std::nullopt;
  auto it = agent->usage.find(frameworkId + "/" + executorId);
  if (it == agent->usage.end()) return std::nullopt;
  return it->second;
}

void Master::disconnectAgent(AgentRecord& agent) {
  LOG_INFO("agent " << agent.id << " disconnected; removed unless it re-registers within "
                    << toSeconds(options_.agentTimeout) << " s");
  agent.peer.reset();
  removeOffers(offers_.ofAgent(agent.id), true, true);
  allocator_->setAgentActive(agent.handle(), false);
}

void Master::removeAgent(const std::string& agentId, const std::string& why) {
  AgentRecord* found = agents_.find(agentId);
  if (found == nullptr) return;
  AgentRecord& agent = *found;
  LOG_WARNING("removing agent " << agentId << ": " << why);
  recoverAgentHoldings(agent);
  for (const auto& [fid, info] : tasks_.dropAgent(agentId)) {
    auto fwIt = frameworks_.find(fid);
    if (fwIt == frameworks_.end()) continue;
    sendMasterUpdate(fwIt->second, info, wire::TASK_LOST, wire::REASON_AGENT_LOST,
                     "agent " + agentId + " removed: " + why);
  }
  if (agent.peer) {
    peers_.bind(*agent.peer, "");
    outbox_.close(*agent.peer, "agent removed: " + why);
  }
  peers_.forget(IdKind::kAgent, agentId);
  allocator_->removeAgent(agent.handle());
  agents_.remove(agentId);
  wire::Envelope lost;
  lost.mutable_agent_lost()->set_agent_id(agentId);
  for (auto& [fid, fw] : frameworks_) {
    if (fw.peer) outbox_.send(*fw.peer, lost);
  }
}

// ------------------------------------------------------------------ time

// Looks only at the agents whose recheck time passed (the registry's
// silence watch), so a tick costs what is due, not a pass over every agent.
// Each agent looked at is either removed or queued again later than `now`,
// so none is looked at twice in one tick.
void Master::checkAgentSilence(TimePoint now) {
  size_t removed = 0;
  for (size_t looked = 0; looked < kAgentSilenceLooksPerTickMax; ++looked) {
    AgentRecord* agent = agents_.dueFirst(now);
    if (agent == nullptr) return;
    if (std::optional<TimePoint> next = nextSilenceLook(*agent, now)) {
      agents_.recheckAt(*agent, *next);
      continue;
    }
    if (removed == kAgentRemovalsPerTickMax) return;  // the next tick goes on
    ++removed;
    std::string id = agent->id;  // removeAgent() destroys the record
    removeAgent(id, "nothing heard from it for " + std::to_string(toSeconds(options_.agentTimeout)) + " s");
  }
}

// When to look at a due agent again (never before `now`); nullopt when it
// is silent. Its silence ends where the master stopped reading its link
// (Outbox::heardUpTo), forgiving at most one agent timeout of lateness: a
// link that stops reporting cannot keep its agents forever.
std::optional<TimePoint> Master::nextSilenceLook(const AgentRecord& agent, TimePoint now) const {
  const Duration timeout = options_.agentTimeout;
  if (now - agent.lastSeen <= timeout) return agent.lastSeen + timeout;  // heard since
  TimePoint upTo = agent.peer ? outbox_.heardUpTo(*agent.peer, now) : now;
  upTo = std::max(upTo, now - timeout);
  if (upTo - agent.lastSeen > timeout) return std::nullopt;
  // Forgiven for now. Its link's reading may catch up at any time, so look
  // again a tenth of a timeout on, and at the latest when nothing forgives
  // it any more (now <= lastSeen + 2 timeouts here).
  return std::min(now + timeout / kForgivenLooksPerTimeout, agent.lastSeen + 2 * timeout);
}

// O(frameworks), so paced by tick() rather than run every tick.
void Master::checkFailoverTimeouts(TimePoint now) {
  std::vector<std::string> expired;
  for (const auto& [id, fw] : frameworks_) {
    if (!fw.peer && now - fw.disconnectedAt > failoverTimeoutOf(fw.info)) expired.push_back(id);
  }
  for (const auto& id : expired) removeFramework(id, "failover timeout expired");
  if (size_t n = peers_.dropKeptBefore(now, [&](const std::string& id) { return frameworks_.count(id) > 0; })) {
    LOG_INFO(n << " kept framework identities were not claimed within their failover timeout; dropped");
  }
}

Duration Master::failoverTimeoutOf(const wire::FrameworkInfo& info) const {
  return info.failover_timeout_s() > 0 ? secondsToDuration(info.failover_timeout_s())
                                       : options_.failoverTimeoutDefault;
}

void Master::tick() {
  TimePoint now = clock_.now();
  if (peers_.identitiesPending() && !identitiesReading_ && now >= nextIdentityRead_) readIdentities();
  expireOffers(now);
  closeUnregistered(now);
  checkAgentSilence(now);
  // Failover timeouts need a pass over the frameworks: ten times per agent
  // timeout is precise enough, and a long timeout is not paid for with a
  // pass a second.
  if (now >= nextTimeoutCheck_) {
    nextTimeoutCheck_ = now + options_.agentTimeout / 10;
    checkFailoverTimeouts(now);
  }
  if (now >= nextFullCycle_) {
    nextFullCycle_ = now + options_.allocationInterval;
    allocateRound(true);
  }
  sendShareUpdates();
}

}  // namespace allot
