// FakeIdentityStore: an in-memory IdentityStore (master/identity_store.h)
// for unit tests of PeerTable and Master: it keeps what was put, in order,
// so a test sees exactly which bindings a leader would leave behind, and
// answers a put() only when the test says so (answer()), as a real store
// answers later. load() answers at once: `loadError` set, with that error.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "master/identity_store.h"

namespace allot::testing {

class FakeIdentityStore final : public IdentityStore {
 public:
  void load(LoadFn done) override {
    ++loads;
    if (loadError) return done(Error{*loadError});
    done(stored);
  }
  void put(const std::string& frameworkId, const StoredIdentity& identity, DoneFn done) override {
    log.push_back("put " + frameworkId);
    unanswered.push_back(Put{frameworkId, identity, std::move(done)});
  }
  void remove(const std::string& frameworkId) override {
    stored.erase(frameworkId);
    log.push_back("remove " + frameworkId);
  }
  std::string describe() const override { return "fake"; }

  // Answers the oldest put() not answered yet: kept, or `failure`.
  void answer(Status failure = okStatus()) {
    if (unanswered.empty()) return;
    Put put = std::move(unanswered.front());
    unanswered.pop_front();
    if (failure) stored[put.frameworkId] = put.identity;
    put.done(std::move(failure));
  }
  void answerAll() {
    while (!unanswered.empty()) answer();
  }

  struct Put {
    std::string frameworkId;
    StoredIdentity identity;
    DoneFn done;
  };
  StoredIdentities stored;
  std::vector<std::string> log;
  std::deque<Put> unanswered;
  std::optional<std::string> loadError;
  int loads = 0;
};

}  // namespace allot::testing
