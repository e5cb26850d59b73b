// Run-time role settings: the weights and quotas an operator set
// through HTTP / allotctl, and where a master keeps them so that a restarted
// master or a newly elected leader applies them again.
//
// RoleStore is the seam: one small asynchronous interface with three
// implementations —
//   makeFileRoleStore        a file in --work-dir, replaced by atomic rename
//                            (a master without --zk);
//   makeZooKeeperRoleStore   one versioned znode under the --zk path
//                            (master/role_store_zk.h, the leader's session);
//   makeUnpersistedRoleStore nothing kept (no --zk, no --work-dir);
// and a fake for unit tests (tests/master/fake_role_store.h).
//
// Precedence: the flags (--role-weight, --quota) give each role its
// defaults; a stored setting overrides them field by field (a stored weight
// replaces the flag's weight and leaves the flag's quota, and the reverse).
//
// Contract, for every implementation:
//   - load() at most once, before save(); save() only after load() has
//     completed and never with another save() in flight (RoleSettingsKeeper
//     serializes them).
//   - Every completion runs on the io_context thread, never inside the call.
//   - load() yields the stored settings (empty when none were ever stored)
//     or an error that says what was wrong (unreadable, oversized, corrupt);
//     the caller then runs on flags. A store whose data was corrupt still
//     accepts save(), which replaces it.
//   - save() completes OK only once the settings are durable in the store
//     (fsync'd file, ZooKeeper quorum); on error the stored data is the old.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "proto/resources.h"

// master.h includes this header for the types; the factories only need the
// name of the loop (base/asio.h is heavy).
namespace boost::asio {
class io_context;
}

namespace allot {

// One role's stored overrides. A field that is unset keeps the flag's value;
// a quota that is set and empty removes the flag's quota.
struct RoleSetting {
  std::optional<double> weight;
  std::optional<Resources> quota;
  bool operator==(const RoleSetting&) const = default;
};
using RoleSettings = std::map<std::string, RoleSetting>;

// Stored settings are at most this large (encoded): well below ZooKeeper's
// default 1 MB znode limit (jute.maxbuffer), and a loaded file or znode
// larger than this is refused before it is parsed.
constexpr size_t kRoleSettingsBytesMax = 512 * 1024;

// The stored form, a small text file an operator can read:
//   allot-role-settings 1
//   epoch 4294967342
//   role batch weight=2 quota=cpus:10;mem:10240
//   role web quota=none
// Role names are percent-escaped (bytes outside '!'..'~' and '%' as %XX,
// the empty default role as a lone %); a quota is written with its exact
// milli-units; "quota=none" stores the removal of a quota. `epoch` is the
// leader epoch of the master that wrote it (0 without ZooKeeper), for logs.
std::string encodeRoleSettings(const RoleSettings& settings, uint64_t epoch);
struct StoredRoleSettings {
  RoleSettings settings;
  uint64_t epoch = 0;
};
// Refuses (with the line and what is wrong) anything that is not exactly
// that form: oversized, unknown version or key, a duplicate role, a name
// validateRoleName() refuses, a weight outside (0, kRoleWeightMax], a quota
// that is not scalars, more than kConfiguredRolesMax roles.
Result<StoredRoleSettings> decodeRoleSettings(std::string_view text);

class RoleStore {
 public:
  using LoadFn = std::function<void(Result<RoleSettings>)>;
  using SaveFn = std::function<void(Status)>;

  virtual ~RoleStore() = default;
  virtual void load(LoadFn done) = 0;
  virtual void save(const RoleSettings& settings, SaveFn done) = 0;
  // Where the settings live, for logs and GET /roles ("file /var/...").
  virtual std::string describe() const = 0;
  // False for the unpersisted store.
  virtual bool persistent() const { return true; }
};

// <path>: read at load() (absent: nothing stored), written at save() as
// <path>.tmp, fsync'd and renamed over <path> (base/files.h). The file is
// tiny and written at operator rate, so the write runs on the loop.
std::unique_ptr<RoleStore> makeFileRoleStore(boost::asio::io_context& io, std::string path);

// Keeps nothing: load() yields no settings, save() succeeds. For a master
// with neither --zk nor --work-dir (its changes last until it stops).
std::unique_ptr<RoleStore> makeUnpersistedRoleStore(boost::asio::io_context& io);

}  // namespace allot
