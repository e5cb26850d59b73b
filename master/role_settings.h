// RoleSettingsKeeper: the one path of a run-time role change (allotctl role,
// POST /api/v1/roles) from the operator to the store and the allocator:
//
//   load(store, done)   once this master serves (standalone: at start,
//                       before it accepts peers; with --zk: once elected,
//                       while it already serves registrations with offers
//                       held, Master::holdOffers), before its first allocation:
//                       reads the stored settings and applies them over the
//                       flags (Master::applyRoleSettings). A store that
//                       cannot be read or holds corrupt data is logged as an
//                       error and the master runs on its flags; `done` runs
//                       either way.
//   set(role, change)   validates the change (Master::checkRoleSetting),
//                       writes the role's merged setting with all the
//                       others to the store, and only once the store says it
//                       is durable applies it and answers OK. A failed
//                       write changes nothing. Writes go one at a time in
//                       arrival order; at most kRoleWritesPendingMax wait.
//
// Before load() has finished (a standby, a leader still reading) set()
// answers an error: only the leader that read the store may write it.
//
// Thread: the master's loop; `done` callbacks run there, never inside set().
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/asio.h"
#include "master/role_store.h"

namespace allot {

class Master;

constexpr size_t kRoleWritesPendingMax = 64;

class RoleSettingsKeeper {
 public:
  // Why set() failed: the change was refused (400), or the master cannot
  // take changes now (503: not leading yet, the store failed, too busy).
  enum class Refusal { kInvalid, kUnavailable };
  struct SetError {
    Refusal refusal;
    std::string message;
  };
  using SetFn = std::function<void(const std::optional<SetError>& error)>;

  RoleSettingsKeeper(asio::io_context& io, Master& master);

  void load(std::unique_ptr<RoleStore> store, std::function<void()> done);
  void set(const std::string& role, const RoleSetting& change, SetFn done);

  bool ready() const { return ready_; }
  // "file /var/lib/allot-master/role-settings", "zookeeper /allot/roles",
  // "none (...)" once load() has finished; "" before (a standby).
  std::string storeDescription() const { return ready_ ? store_->describe() : ""; }

 private:
  struct Pending {
    std::string role;
    RoleSetting change;
    SetFn done;
  };
  void writeNext();
  void reply(SetFn done, std::optional<SetError> error);

  asio::io_context& io_;
  Master& master_;
  std::unique_ptr<RoleStore> store_;
  bool ready_ = false;
  bool writing_ = false;
  std::deque<Pending> pending_;
};

}  // namespace allot
