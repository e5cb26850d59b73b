#include "master/role_settings.h"

#include "base/check.h"
#include "base/log.h"
#include "master/master.h"

namespace allot {

RoleSettingsKeeper::RoleSettingsKeeper(asio::io_context& io, Master& master)
    : io_(io), master_(master) {}

void RoleSettingsKeeper::load(std::unique_ptr<RoleStore> store, std::function<void()> done) {
  CHECK(!store_);
  store_ = std::move(store);
  store_->load([this, done = std::move(done)](Result<RoleSettings> loaded) {
    if (!loaded) {
      LOG_ERROR("role settings: " << loaded.error().describe()
                                  << "; running on the flags' weights and quotas until an "
                                     "operator sets a role again (which replaces what is stored)");
    } else if (Status st = master_.applyRoleSettings(*loaded); !st) {
      LOG_ERROR("role settings from " << store_->describe() << ": " << st.error().describe()
                                      << " (the other roles are applied)");
    } else {
      LOG_INFO("role settings: " << loaded->size() << " role(s) from " << store_->describe()
                                 << (store_->persistent() ? "" : ": run-time changes are not kept"));
    }
    ready_ = true;
    writeNext();
    done();
  });
}

void RoleSettingsKeeper::set(const std::string& role, const RoleSetting& change, SetFn done) {
  if (Status st = master_.checkRoleSetting(role, change); !st) {
    return reply(std::move(done), SetError{Refusal::kInvalid, st.error().message});
  }
  if (!ready_) {
    return reply(std::move(done),
                 SetError{Refusal::kUnavailable,
                          "this master is not leading (or is still reading the stored role settings)"});
  }
  if (pending_.size() >= kRoleWritesPendingMax) {
    return reply(std::move(done), SetError{Refusal::kUnavailable,
                                           "too many role changes waiting to be stored (" +
                                               std::to_string(kRoleWritesPendingMax) + ")"});
  }
  pending_.push_back(Pending{role, change, std::move(done)});
  writeNext();
}

// The role's new setting merged into what is applied now, stored whole.
// Checked again at its turn: an earlier change in the queue may have used
// the last free role slot.
void RoleSettingsKeeper::writeNext() {
  if (writing_ || !ready_ || pending_.empty()) return;
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  RoleSettings next = master_.roleSettings();
  RoleSetting& merged = next[p.role];
  if (p.change.weight) merged.weight = p.change.weight;
  if (p.change.quota) merged.quota = p.change.quota;
  Status valid = master_.checkRoleSetting(p.role, merged);
  if (valid && encodeRoleSettings(next, 0).size() > kRoleSettingsBytesMax) {
    valid = Error{"the stored role settings would exceed " + std::to_string(kRoleSettingsBytesMax) +
                  " bytes"};
  }
  if (!valid) {
    reply(std::move(p.done), SetError{Refusal::kInvalid, valid.error().message});
    return writeNext();
  }
  writing_ = true;
  store_->save(next, [this, role = p.role, merged, done = std::move(p.done)](Status saved) {
    writing_ = false;
    if (!saved) {
      LOG_ERROR("role '" << role << "' not changed: " << saved.error().describe());
      reply(done, SetError{Refusal::kUnavailable, saved.error().message});
    } else if (Status st = master_.applyRoleSetting(role, merged); !st) {
      // checkRoleSetting passed just before: only the allocator's own limit
      // can refuse here, and the stored copy is applied at the next load.
      LOG_ERROR("role '" << role << "' stored but not applied: " << st.error().describe());
      reply(done, SetError{Refusal::kInvalid, st.error().message});
    } else {
      reply(done, std::nullopt);
    }
    writeNext();
  });
}

void RoleSettingsKeeper::reply(SetFn done, std::optional<SetError> error) {
  asio::post(io_, [done = std::move(done), error = std::move(error)] { done(error); });
}

}  // namespace allot
