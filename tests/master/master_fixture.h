// The master unit tests' fixture: a master on a fake clock whose messages
// land in a RecordingOutbox, with helpers that play agents and schedulers.
// Shared by master_test.cpp (offers, tasks, failover), master_trust_test.cpp
// (secrets, principals, ACLs, input limits) and policy_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "base/clock.h"
#include "master/master.h"

namespace allot::testing {

using namespace std::chrono_literals;

class RecordingOutbox final : public Outbox {
 public:
  void send(PeerId peer, const wire::Envelope& e) override { sent[peer].push_back(e); }
  void close(PeerId peer, const std::string& reason) override { closed[peer] = reason; }
  TimePoint heardUpTo(PeerId peer, TimePoint now) const override {
    auto it = heard.find(peer);
    return it == heard.end() ? now : it->second;
  }

  // Takes every message of one kind sent to `peer` so far.
  std::vector<wire::Envelope> take(PeerId peer, wire::Envelope::BodyCase kind) {
    std::vector<wire::Envelope> out, rest;
    for (auto& e : sent[peer]) (e.body_case() == kind ? out : rest).push_back(e);
    sent[peer] = rest;
    return out;
  }

  std::map<PeerId, std::vector<wire::Envelope>> sent;
  std::map<PeerId, std::string> closed;
  // heardUpTo() of a peer whose link the master is late reading (others: now).
  std::map<PeerId, TimePoint> heard;
};

constexpr PeerId kAgentPeer = 1;
constexpr PeerId kFrameworkPeer = 2;
constexpr PeerId kOtherFrameworkPeer = 3;

inline PeerIdentity tlsPeer(const std::string& principal) {
  PeerIdentity id;
  id.tls = true;
  id.principal = principal;
  return id;
}

class MasterTest : public ::testing::Test {
 protected:
  void SetUp() override { master_ = makeMaster("m1"); }

  std::unique_ptr<Master> makeMaster(const std::string& id) {
    MasterOptions options;
    options.masterId = id;
    options.offerTimeout = 30s;
    options.agentTimeout = 15s;
    options.refuseDefault = 5s;
    options.failoverTimeoutDefault = 60s;
    options.minOffer = *Resources::parse("cpus:0.01;mem:32");
    auto m = Master::create(options, clock_, outbox_);
    EXPECT_TRUE(m.ok());
    return std::move(*m);
  }

  void hello(PeerId peer, wire::Role role, const PeerIdentity& auth = {}) {
    wire::Hello h;
    h.set_role(role);
    master_->peerConnected(peer, h, auth);
  }

  std::string registerAgent(PeerId peer = kAgentPeer, const char* resources = "cpus:4;mem:4096",
                            const std::string& id = "") {
    hello(peer, wire::ROLE_AGENT);
    wire::Envelope e;
    e.mutable_register_agent()->mutable_info()->set_hostname("node");
    e.mutable_register_agent()->mutable_info()->set_id(id);
    Resources::parse(resources)->toWire(e.mutable_register_agent()->mutable_info()->mutable_resources());
    master_->peerMessage(peer, e);
    auto replies = outbox_.take(peer, wire::Envelope::kAgentRegistered);
    EXPECT_EQ(replies.size(), 1u);
    if (!replies.empty()) agentSecret_ = replies[0].agent_registered().agent_secret();
    return replies.empty() ? "" : replies[0].agent_registered().agent_id();
  }

  std::string registerFramework(PeerId peer = kFrameworkPeer, const std::string& id = "",
                                const std::string& secret = "") {
    hello(peer, wire::ROLE_SCHEDULER);
    wire::Envelope e;
    e.mutable_register_framework()->mutable_info()->set_name("test");
    e.mutable_register_framework()->mutable_info()->set_id(id);
    e.mutable_register_framework()->set_needs_offers(true);
    e.mutable_register_framework()->set_framework_secret(secret);
    master_->peerMessage(peer, e);
    auto replies = outbox_.take(peer, wire::Envelope::kFrameworkRegistered);
    EXPECT_EQ(replies.size(), 1u);
    if (!replies.empty()) frameworkSecret_ = replies[0].framework_registered().framework_secret();
    return replies.empty() ? "" : replies[0].framework_registered().framework_id();
  }

  std::vector<wire::Offer> offersTo(PeerId peer) {
    std::vector<wire::Offer> offers;
    for (auto& e : outbox_.take(peer, wire::Envelope::kResourceOffers)) {
      for (auto& o : e.resource_offers().offers()) offers.push_back(o);
    }
    return offers;
  }

  std::vector<wire::TaskStatus> updatesTo(PeerId peer) {
    std::vector<wire::TaskStatus> out;
    for (auto& e : outbox_.take(peer, wire::Envelope::kStatusUpdate)) out.push_back(e.status_update().status());
    return out;
  }

  wire::TaskInfo task(const std::string& id, const char* resources) {
    wire::TaskInfo t;
    t.set_task_id(id);
    t.mutable_command()->set_shell("true");
    Resources::parse(resources)->toWire(t.mutable_resources());
    return t;
  }

  void accept(PeerId peer, const std::string& offerId, std::vector<wire::TaskInfo> tasks,
              std::optional<double> refuse = std::nullopt) {
    wire::Envelope e;
    e.mutable_accept_offers()->add_offer_ids(offerId);
    for (auto& t : tasks) *e.mutable_accept_offers()->add_tasks() = t;
    if (refuse) e.mutable_accept_offers()->mutable_filters()->set_refuse_seconds(*refuse);
    master_->peerMessage(peer, e);
  }

  void agentUpdate(const wire::TaskStatus& status) {
    wire::Envelope e;
    *e.mutable_status_update()->mutable_status() = status;
    master_->peerMessage(kAgentPeer, e);
  }

  FakeClock clock_;
  RecordingOutbox outbox_;
  std::unique_ptr<Master> master_;
  std::string frameworkSecret_;  // from the latest FrameworkRegistered
  std::string agentSecret_;      // from the latest AgentRegistered
};


}  // namespace allot::testing
