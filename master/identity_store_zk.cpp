#include "master/identity_store_zk.h"

#include "base/log.h"

namespace allot {

std::string identitiesPath(const std::string& groupPath) { return groupPath + "/frameworks"; }

namespace {

class ZooKeeperIdentityStore final : public IdentityStore {
  // Completions are dropped once the store is gone.
  template <typename Fn>
  auto guard(Fn fn) {
    return [alive = alive_, fn = std::move(fn)](auto&&... args) mutable {
      if (*alive) fn(std::forward<decltype(args)>(args)...);
    };
  }

 public:
  ZooKeeperIdentityStore(ZkSession& session, std::string groupPath)
      : session_(session), path_(identitiesPath(groupPath)), alive_(std::make_shared<bool>(true)) {}
  ~ZooKeeperIdentityStore() override { *alive_ = false; }

  void load(LoadFn done) override {
    loadDone_ = std::move(done);
    loaded_.clear();
    pending_ = 0;
    session_.restrict(path_, guard([this](ZkRc rc) {
      if (rc == ZkRc::kOk) return list();
      if (rc == ZkRc::kNoNode) return makeParent();
      if (rc == ZkRc::kNoAuth) return finish(Error{path_ + ": another identity owns it (its ACL): check --zk-credentials"});
      finish(Error{path_ + ": cannot set its ACL: " + zkRcName(rc)});
    }));
  }

  void put(const std::string& frameworkId, const StoredIdentity& identity, DoneFn done) override {
    std::string path = nodeOf(frameworkId);
    std::string data = encodeIdentity(identity);
    auto answer = std::make_shared<DoneFn>(std::move(done));
    session_.create(path, data, false, guard([this, path, data, answer](ZkRc rc, const std::string&, const ZkStat&) {
      if (rc == ZkRc::kOk) return (*answer)(okStatus());
      if (rc != ZkRc::kNodeExists) return (*answer)(failed("create", path, rc));
      session_.set(path, data, -1, guard([this, path, answer](ZkRc rc, const ZkStat&) {
        (*answer)(rc == ZkRc::kOk ? okStatus() : failed("set", path, rc));
      }));
    }));
  }

  void remove(const std::string& frameworkId) override {
    std::string path = nodeOf(frameworkId);
    session_.remove(path, guard([this, path](ZkRc rc) {
      if (rc != ZkRc::kOk && rc != ZkRc::kNoNode) {
        LOG_ERROR(failed("delete", path, rc).describe() << " (a binding nobody holds stays until it is claimed)");
      }
    }));
  }

  std::string describe() const override { return "zookeeper " + path_; }

 private:
  std::string nodeOf(const std::string& frameworkId) const { return path_ + "/" + identityKey(frameworkId); }

  static Error failed(const char* what, const std::string& path, ZkRc rc) {
    return Error{"cannot " + std::string(what) + " " + path + " in ZooKeeper: " + zkRcName(rc)};
  }

  void makeParent() {
    session_.create(path_, "", false, guard([this](ZkRc rc, const std::string&, const ZkStat&) {
      if (rc != ZkRc::kOk && rc != ZkRc::kNodeExists) {
        return finish(Error{"cannot create " + path_ + ": " + zkRcName(rc)});
      }
      list();
    }));
  }

  void list() {
    session_.children(path_, false, guard([this](ZkRc rc, const std::vector<std::string>& children) {
      // Without credentials restrict() answers kOk for a missing znode too.
      if (rc == ZkRc::kNoNode) return makeParent();
      if (rc != ZkRc::kOk) return finish(Error{"cannot list " + path_ + ": " + zkRcName(rc)});
      size_t wanted = std::min(children.size(), kStoredIdentitiesMax);
      if (children.size() > wanted) {
        LOG_WARNING(path_ << ": " << children.size() - wanted << " identities beyond "
                          << kStoredIdentitiesMax << " left unread");
      }
      pending_ = wanted;
      if (pending_ == 0) return finish(StoredIdentities());
      for (size_t i = 0; i < wanted; ++i) readOne(children[i]);
    }));
  }

  void readOne(const std::string& key) {
    std::string path = path_ + "/" + key;
    session_.get(path, guard([this, key, path](ZkRc rc, const std::string& data, const ZkStat&) {
      auto id = frameworkIdOfKey(key);
      auto identity = rc == ZkRc::kOk ? decodeIdentity(data) : Result<StoredIdentity>(Error{zkRcName(rc)});
      if (id && identity) {
        loaded_[*id] = std::move(*identity);
      } else if (rc != ZkRc::kNoNode) {
        LOG_WARNING(path << ": " << (id ? identity.error().describe() : id.error().describe()) << "; ignored");
      }
      if (--pending_ == 0) finish(std::move(loaded_));
    }));
  }

  void finish(Result<StoredIdentities> result) {
    LoadFn done = std::move(loadDone_);
    loadDone_ = nullptr;
    if (done) done(std::move(result));
  }

  ZkSession& session_;
  std::string path_;
  std::shared_ptr<bool> alive_;
  LoadFn loadDone_;
  StoredIdentities loaded_;
  size_t pending_ = 0;
};

}  // namespace

std::unique_ptr<IdentityStore> makeZooKeeperIdentityStore(asio::io_context&, ZkSession& session,
                                                          std::string groupPath) {
  return std::make_unique<ZooKeeperIdentityStore>(session, std::move(groupPath));
}

}  // namespace allot
