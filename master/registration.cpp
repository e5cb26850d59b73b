// A framework's registration (master.h: registration.cpp) and the reading
// of the identity store it depends on: a framework's binding is in the
// store before FrameworkRegistered goes out, so a leader that dies just
// after answering leaves nothing unbound for the next one.
#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "master/master.h"

namespace allot {

void Master::keepIdentities(std::unique_ptr<IdentityStore> store, std::function<void()> firstRead) {
  CHECK(identityStore_ == nullptr && store != nullptr);
  identityStore_ = std::move(store);
  firstIdentityRead_ = std::move(firstRead);
  peers_.useIdentityStore(identityStore_.get());
  readIdentities();
}

void Master::readIdentities() {
  identitiesReading_ = true;
  identityStore_->load([this](Result<StoredIdentities> loaded) { identitiesAnswered(std::move(loaded)); });
}

void Master::identitiesAnswered(Result<StoredIdentities> loaded) {
  identitiesReading_ = false;
  TimePoint now = clock_.now();
  if (loaded) {
    LOG_INFO(loaded->size() << " framework identities kept in " << identityStore_->describe());
    peers_.identitiesLoaded(std::move(*loaded), now);
  } else {
    nextIdentityRead_ = now + identityRetry_;
    LOG_ERROR("framework identities in " << identityStore_->describe() << ": " << loaded.error().describe()
                                         << "; re-registrations of frameworks this master does not own are "
                                            "refused until they are read (next attempt in "
                                         << std::chrono::duration<double>(identityRetry_).count() << " s)");
    identityRetry_ = std::min<Duration>(identityRetry_ * 2, kIdentityLoadRetryMax);
  }
  if (auto first = std::exchange(firstIdentityRead_, nullptr)) first();
}

void Master::onRegisterFramework(PeerId peer, const wire::RegisterFramework& m) {
  if (registering_.count(peer) > 0) {
    return sendError(peer, "RegisterFramework: this connection's registration is under way", false);
  }
  registerFramework(peer, Registration{m, m.info().id().empty(), ""});
}

void Master::registerFramework(PeerId peer, Registration r) {
  wire::FrameworkInfo& info = *r.m.mutable_info();
  if (auto g = Resources::fromWire(info.guaranteed()); !g) {
    return sendError(peer, "RegisterFramework: guaranteed: " + g.error().describe(), true);
  }
  const PeerLink& link = *peers_.link(peer);
  if (!r.freshId && peers_.awaitsIdentities(info.id())) {
    return refuseForNow(peer, "RegisterFramework: framework " + info.id() + ": this master has not read the "
                              "frameworks' identities yet (" + identityStore_->describe() + ")");
  }
  auto grant = authorizeFramework(link, r.m);
  if (!grant) {
    LOG_WARNING("peer " << peer << ": RegisterFramework refused: " << grant.error().describe());
    return sendError(peer, "RegisterFramework: not authorized: " + grant.error().describe(), true);
  }
  if (r.freshId && info.id().empty()) info.set_id(newId('F'));
  if (registeringIds_.count(info.id()) > 0) {
    return refuseForNow(peer, "RegisterFramework: framework " + info.id() + " is registering on another connection");
  }
  if (r.secret.empty()) r.secret = peers_.secretFor(info.id(), r.freshId ? "" : r.m.framework_secret(), ids_);
  if (peers_.claimNeedsStore(info.id(), link.auth.principal, r.secret)) return storeThenRegister(peer, std::move(r));
  completeRegistration(peer, r, *grant);
}

void Master::storeThenRegister(PeerId peer, Registration r) {
  const std::string id = r.m.info().id();
  const PeerLink& link = *peers_.link(peer);
  Status st = peers_.storeAhead(id, link.auth.principal, r.secret, failoverTimeoutOf(r.m.info()),
                                [this, peer, id](Status written) { identityStored(peer, id, std::move(written)); });
  if (!st) return refuseForNow(peer, "RegisterFramework: framework " + id + ": its identity cannot be kept: " + st.error().describe());
  registeringIds_[id] = peer;
  registering_[peer] = std::move(r);
}

void Master::identityStored(PeerId peer, const std::string& frameworkId, Status written) {
  auto r = registering_.find(peer);
  if (r == registering_.end() || r->second.m.info().id() != frameworkId) {
    peers_.dropAhead(frameworkId);  // the link closed meanwhile
    return;
  }
  Registration registration = std::move(r->second);
  registering_.erase(r);
  registeringIds_.erase(frameworkId);
  if (!written) {
    return refuseForNow(peer, "RegisterFramework: framework " + frameworkId + ": its identity could not be kept in " +
                              identityStore_->describe() + ": " + written.error().describe());
  }
  // Everything is checked again on the state of now: the claim binds what
  // the store holds, or a refusal drops it.
  registerFramework(peer, std::move(registration));
  peers_.dropAhead(frameworkId);
  outbox_.changedOutsideEvent();
}

void Master::completeRegistration(PeerId peer, const Registration& r, const FrameworkGrant& grant) {
  const wire::RegisterFramework& m = r.m;
  const PeerLink& link = *peers_.link(peer);
  bool reregistered = !r.freshId;
  // One connection speaks for one framework: registering another id on it
  // disconnects the first (its failover timer starts).
  if (const std::string previous = link.id; !previous.empty() && previous != m.info().id()) {
    auto old = frameworks_.find(previous);
    if (old != frameworks_.end() && old->second.peer == peer) disconnectFramework(old->second);
  }
  FrameworkRecord& fw = ensureFramework(m.info(), &grant);
  // A new id gets a new secret; an id this master knows only from agents
  // (it is a new leader) keeps the secret its scheduler presents.
  const IdOwner& owner = peers_.claim(IdKind::kFramework, fw.id, link.auth.principal, r.secret, ids_);
  if (fw.peer && *fw.peer != peer) {
    sendError(*fw.peer, "framework " + fw.id + " failed over to another scheduler", true);
    peers_.bind(*fw.peer, "");
  }
  fw.peer = peer;
  peers_.bind(peer, fw.id);
  fw.needsOffers = m.needs_offers();
  setAgentFilters(fw, {m.filters().agent_ids().begin(), m.filters().agent_ids().end()});
  if (auto f = Resources::fromWire(m.filters().min_free()); f) fw.minFree = *f;
  applyStandingFilters(fw);
  allocator_->setActive(fw.handle, fw.needsOffers);
  allocationPending_ = true;
  fw.lastSentShare = -1;
  LOG_INFO("framework " << fw.id << " (" << m.info().name() << ") " << (reregistered ? "re-registered" : "registered"));
  wire::Envelope reply;
  auto* registered = reply.mutable_framework_registered();
  registered->set_framework_id(fw.id);
  registered->set_master_id(options_.masterId);
  registered->set_reregistered(reregistered);
  registered->set_framework_secret(owner.secret);
  outbox_.send(peer, reply);
  while (!fw.pending.empty()) {
    outbox_.send(peer, fw.pending.front());
    fw.pending.pop_front();
  }
  sendShareUpdate(fw, allocator_->totalResources());
}

void Master::refuseForNow(PeerId peer, const std::string& why) {
  LOG_WARNING("peer " << peer << ": " << why << "; refused for now");
  sendError(peer, why + "; try again", false);
  outbox_.close(peer, why);
}

}  // namespace allot
