#include "master/role_store_zk.h"

#include <optional>

#include "base/log.h"

namespace allot {

std::string roleSettingsPath(const std::string& groupPath) { return groupPath + "/roles"; }

namespace {

class ZooKeeperRoleStore final : public RoleStore {
  // Completions are dropped once the store is gone. (Defined first: the
  // members below use their deduced types.)
  template <typename Fn>
  auto guard(Fn fn) {
    return [alive = alive_, fn = std::move(fn)](auto&&... args) mutable {
      if (*alive) fn(std::forward<decltype(args)>(args)...);
    };
  }
  template <typename Fn>
  void post(Fn fn) {
    asio::post(retry_.get_executor(), guard(std::move(fn)));
  }

 public:
  ZooKeeperRoleStore(asio::io_context& io, ZkSession& session, std::string groupPath, uint64_t epoch)
      : session_(session),
        path_(roleSettingsPath(groupPath)),
        epoch_(epoch),
        retry_(io),
        alive_(std::make_shared<bool>(true)) {}
  ~ZooKeeperRoleStore() override { *alive_ = false; }

  void load(LoadFn done) override {
    loadDone_ = std::move(done);
    attempts_ = 0;
    restrictThenRead();
  }

  void save(const RoleSettings& settings, SaveFn done) override {
    if (!version_) {
      return post([done = std::move(done)] {
        done(Error{"the role settings in ZooKeeper were not read by this leader: not overwriting them"});
      });
    }
    std::string data = encodeRoleSettings(settings, epoch_);
    session_.set(path_, data, *version_, guard([this, done = std::move(done)](ZkRc rc, const ZkStat& stat) {
      if (rc == ZkRc::kOk) {
        version_ = stat.version;
        return done(okStatus());
      }
      if (rc == ZkRc::kBadVersion) {
        version_.reset();  // someone else writes here now: never again from this master
        return done(Error{"the role settings in ZooKeeper (" + path_ +
                          ") were changed by another master (a newer leader?): not applied"});
      }
      done(Error{"cannot write " + path_ + " in ZooKeeper: " + zkRcName(rc)});
    }));
  }

  std::string describe() const override { return "zookeeper " + path_; }

 private:
  // With credentials, the znode (if it exists: a new one is created with
  // the masters' ACL) is locked to the masters' identity before it is read.
  void restrictThenRead() {
    session_.restrict(path_, guard([this](ZkRc rc) {
      if (rc == ZkRc::kOk || rc == ZkRc::kNoNode) return read();
      if (rc == ZkRc::kNoAuth) {
        return finish(Error{path_ + " in ZooKeeper: another identity owns it (its ACL): "
                            "check --zk-credentials"});
      }
      again(std::string("cannot set its ACL: ") + zkRcName(rc));
    }));
  }

  void read() {
    session_.get(path_, guard([this](ZkRc rc, const std::string& data, const ZkStat& stat) {
      if (rc == ZkRc::kNoNode) return createEmpty();
      if (rc != ZkRc::kOk) return again(std::string("cannot read: ") + zkRcName(rc));
      Result<RoleSettings> settings = decode(data);
      std::string claimed = settings ? encodeRoleSettings(*settings, epoch_) : data;
      claim(stat.version, claimed, std::move(settings));
    }));
  }

  Result<RoleSettings> decode(const std::string& data) const {
    auto decoded = decodeRoleSettings(data);
    if (!decoded) return Error{path_ + " in ZooKeeper: " + decoded.error().message};
    if (decoded->epoch > epoch_) {
      LOG_WARNING(path_ << " was written by a leader of epoch " << decoded->epoch
                        << ", newer than this one's (" << epoch_ << ")");
    }
    return decoded->settings;
  }

  // Writes back what was read (re-encoded under our epoch; corrupt data
  // byte for byte) so that older leaders' versions are stale from now on.
  void claim(int32_t version, const std::string& data, Result<RoleSettings> settings) {
    session_.set(path_, data, version,
                 guard([this, settings = std::move(settings)](ZkRc rc, const ZkStat& stat) mutable {
                   if (rc == ZkRc::kBadVersion) return again("changed while this leader read it");
                   if (rc != ZkRc::kOk) return again(std::string("cannot claim: ") + zkRcName(rc));
                   version_ = stat.version;
                   finish(std::move(settings));
                 }));
  }

  void createEmpty() {
    session_.create(path_, encodeRoleSettings({}, epoch_), /*ephemeralSequential=*/false,
                    guard([this](ZkRc rc, const std::string&, const ZkStat& stat) {
                      if (rc == ZkRc::kNodeExists) return again("created by another master meanwhile");
                      if (rc != ZkRc::kOk) return again(std::string("cannot create: ") + zkRcName(rc));
                      version_ = stat.version;
                      finish(RoleSettings());
                    }));
  }

  void again(const std::string& why) {
    if (++attempts_ >= kRoleStoreLoadAttemptsMax) {
      return finish(Error{path_ + " in ZooKeeper: " + why + " (" + std::to_string(attempts_) +
                          " attempts)"});
    }
    LOG_INFO(path_ << ": " << why << "; reading again");
    retry_.expires_after(kRoleStoreRetry);
    retry_.async_wait(guard([this](const boost::system::error_code& ec) {
      if (!ec) restrictThenRead();
    }));
  }

  void finish(Result<RoleSettings> result) {
    LoadFn done = std::move(loadDone_);
    loadDone_ = nullptr;
    if (done) done(std::move(result));
  }

  ZkSession& session_;
  std::string path_;
  uint64_t epoch_;
  asio::steady_timer retry_;
  std::shared_ptr<bool> alive_;
  LoadFn loadDone_;
  int attempts_ = 0;
  // The znode version this leader last read (and claimed) or wrote; none
  // before load() or after another master wrote.
  std::optional<int32_t> version_;
};

}  // namespace

std::unique_ptr<RoleStore> makeZooKeeperRoleStore(asio::io_context& io, ZkSession& session,
                                                  std::string groupPath, uint64_t epoch) {
  return std::make_unique<ZooKeeperRoleStore>(io, session, std::move(groupPath), epoch);
}

}  // namespace allot
