// FakeRoleStore: an in-memory RoleStore (master/role_store.h) for unit
// tests of RoleSettingsKeeper. It keeps the contract (completions posted to
// the loop, never inline) and lets the test fail loads and saves, and hold
// saves to see that the keeper writes one at a time and answers only after
// the store has.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "master/role_store.h"

namespace allot::testing {

class FakeRoleStore final : public RoleStore {
 public:
  struct Shared {
    RoleSettings stored;
    std::optional<Error> loadError;  // load() fails with this
    std::optional<Error> saveError;  // every save() fails with this
    bool holdSaves = false;          // saves wait for releaseSaves()
    std::vector<std::function<void()>> heldSaves;
    int loads = 0;
    int saves = 0;
    int savesInFlight = 0;
    int savesInFlightMax = 0;
  };

  FakeRoleStore(asio::io_context& io, std::shared_ptr<Shared> shared) : io_(io), s_(std::move(shared)) {}

  void load(LoadFn done) override {
    ++s_->loads;
    Result<RoleSettings> result = s_->loadError ? Result<RoleSettings>(*s_->loadError)
                                                : Result<RoleSettings>(s_->stored);
    asio::post(io_, [done = std::move(done), result]() mutable { done(std::move(result)); });
  }

  void save(const RoleSettings& settings, SaveFn done) override {
    ++s_->saves;
    s_->savesInFlightMax = std::max(s_->savesInFlightMax, ++s_->savesInFlight);
    auto finish = [shared = s_, settings, done = std::move(done)] {
      --shared->savesInFlight;
      if (shared->saveError) return done(*shared->saveError);
      shared->stored = settings;
      done(okStatus());
    };
    if (s_->holdSaves) return s_->heldSaves.push_back(std::move(finish));
    asio::post(io_, std::move(finish));
  }

  std::string describe() const override { return "fake"; }

  static void releaseSaves(asio::io_context& io, Shared& shared) {
    shared.holdSaves = false;
    for (auto& fn : shared.heldSaves) asio::post(io, std::move(fn));
    shared.heldSaves.clear();
  }

 private:
  asio::io_context& io_;
  std::shared_ptr<Shared> s_;
};

}  // namespace allot::testing
