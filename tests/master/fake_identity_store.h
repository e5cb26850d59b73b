// FakeIdentityStore: an in-memory IdentityStore (master/identity_store.h)
// for unit tests of PeerTable and Master: it keeps what was put, in order,
// so a test sees exactly which bindings a leader would leave behind.
#pragma once

#include <string>
#include <vector>

#include "master/identity_store.h"

namespace allot::testing {

class FakeIdentityStore final : public IdentityStore {
 public:
  void load(LoadFn done) override { done(stored); }
  void put(const std::string& frameworkId, const StoredIdentity& identity) override {
    stored[frameworkId] = identity;
    log.push_back("put " + frameworkId);
  }
  void remove(const std::string& frameworkId) override {
    stored.erase(frameworkId);
    log.push_back("remove " + frameworkId);
  }
  std::string describe() const override { return "fake"; }

  StoredIdentities stored;
  std::vector<std::string> log;
};

}  // namespace allot::testing
