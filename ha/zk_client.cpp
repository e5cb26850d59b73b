// The real ZkSession over the multi-threaded ZooKeeper C client
// (libzookeeper_mt, docs/decisions.md says why mt and not st).
//
// The C client runs two threads of its own: one does the socket I/O, the
// other runs every completion and watcher. Each of those callbacks copies
// what it was given (the client frees it on return) and posts it to the
// daemon's io_context; only the posted handler touches allot state. One
// completion thread posting to a one-thread io_context keeps ZooKeeper's
// order. A Shared block outlives the handle: posted handlers hold it and do
// nothing once `closed` is set (on the loop thread, by the destructor).
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/log.h"
#include "ha/zk_session.h"

namespace allot {

namespace {

ZkRc toRc(int rc) {
  switch (rc) {
    case ZOK: return ZkRc::kOk;
    case ZNONODE: return ZkRc::kNoNode;
    case ZNODEEXISTS: return ZkRc::kNodeExists;
    case ZBADVERSION: return ZkRc::kBadVersion;
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
    case ZINVALIDSTATE: return ZkRc::kConnectionLoss;
    case ZSESSIONEXPIRED: return ZkRc::kSessionExpired;
    case ZCLOSING: return ZkRc::kClosing;
    case ZNOAUTH:
    case ZINVALIDACL:  // an "auth" ACL without authentication
    case ZAUTHFAILED: return ZkRc::kNoAuth;
    default: return ZkRc::kOther;
  }
}

ZkStat toStat(const Stat* stat) {
  ZkStat s;
  if (stat != nullptr) {
    s.czxid = stat->czxid;
    s.ephemeralOwner = stat->ephemeralOwner;
    s.version = stat->version;
  }
  return s;
}

// The C client's own log lines go to ours, at debug level: its connection
// errors repeat every few milliseconds while servers are down, and the
// contender and detector log each state change once, in words.
// One exception: "Exceeded deadline by N ms" means the client's I/O thread
// ran late (starved of CPU, docs/decisions.md), which is what a fenced
// leader's operator needs to see.
void zkLog(const char* message) {
  if (std::strstr(message, "Exceeded deadline") != nullptr) {
    LOG_WARNING("zookeeper client thread ran late: " << message);
    return;
  }
  LOG_DEBUG("zookeeper: " << message);
}

// Lowers the calling thread's nice value by `boost` for its lifetime, so the
// threads zookeeper_init starts inherit it (on Linux the nice value is per
// thread and a new thread starts with its creator's), then restores it
// (raising one's own nice value needs no privilege).
class InheritedPriority {
 public:
  explicit InheritedPriority(int boost) {
    if (boost <= 0) return;
    tid_ = static_cast<id_t>(gettid());
    errno = 0;
    int current = getpriority(PRIO_PROCESS, tid_);
    if (current == -1 && errno != 0) return;
    int wanted = std::max(-20, current - boost);
    if (setpriority(PRIO_PROCESS, tid_, wanted) != 0) {
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true)) {
        LOG_WARNING("cannot run the ZooKeeper client's threads at nice " << wanted << ": "
                    << std::strerror(errno) << "; give the process CAP_SYS_NICE or "
                    << "LimitNICE=" << wanted << " (systemd): under CPU load its session may "
                    << "lapse, and a leader then fences itself");
      }
      return;
    }
    before_ = current;
    applied_ = true;
  }
  ~InheritedPriority() {
    if (applied_) setpriority(PRIO_PROCESS, tid_, before_);
  }
  InheritedPriority(const InheritedPriority&) = delete;
  InheritedPriority& operator=(const InheritedPriority&) = delete;

 private:
  id_t tid_ = 0;
  int before_ = 0;
  bool applied_ = false;
};

// The ACL of every znode an authenticated session creates: everything for
// the identities this ZooKeeper session authenticated as (ZooKeeper's "auth" scheme,
// expanded by the server to digest:user:hash), reading for anyone, so that
// clients that only read need no secret.
struct RestrictedAcl {
  RestrictedAcl() {
    entries[0] = ACL{ZOO_PERM_ALL, Id{const_cast<char*>("auth"), const_cast<char*>("")}};
    entries[1] = ACL{ZOO_PERM_READ, Id{const_cast<char*>("world"), const_cast<char*>("anyone")}};
    vector = ACL_vector{2, entries};
  }
  ACL entries[2];
  ACL_vector vector;
};

struct Shared : std::enable_shared_from_this<Shared> {
  explicit Shared(asio::io_context& ioContext) : io(ioContext) {}
  asio::io_context& io;
  ZkSession::EventFn onEvent;
  bool closed = false;  // loop thread only

  // Runs `fn` on the loop unless the session was closed meanwhile.
  template <typename Fn>
  void post(Fn fn) {
    asio::post(io, [self = shared_from_this(), fn = std::move(fn)]() mutable {
      if (!self->closed) fn();
    });
  }
};

// One in-flight call: owns the caller's callback until the completion.
template <typename Fn>
struct Call {
  std::shared_ptr<Shared> shared;
  Fn done;
};

void watcher(zhandle_t* zh, int type, int state, const char* path, void* context) {
  auto* shared = static_cast<Shared*>(context);
  ZkEvent event;
  if (type == ZOO_SESSION_EVENT) {
    event.kind = ZkEvent::Kind::kSession;
    if (state == ZOO_CONNECTED_STATE) {
      event.state = ZkState::kConnected;
      event.negotiatedTimeout = Millis(zoo_recv_timeout(zh));
    } else if (state == ZOO_EXPIRED_SESSION_STATE) {
      event.state = ZkState::kExpired;
    } else if (state == ZOO_AUTH_FAILED_STATE) {
      event.state = ZkState::kAuthFailed;
    } else {
      event.state = ZkState::kConnecting;
    }
  } else if (type == ZOO_CREATED_EVENT) {
    event.kind = ZkEvent::Kind::kCreated;
  } else if (type == ZOO_DELETED_EVENT) {
    event.kind = ZkEvent::Kind::kDeleted;
  } else if (type == ZOO_CHANGED_EVENT) {
    event.kind = ZkEvent::Kind::kDataChanged;
  } else if (type == ZOO_CHILD_EVENT) {
    event.kind = ZkEvent::Kind::kChildrenChanged;
  } else {
    return;  // ZOO_NOTWATCHING_EVENT: we never remove watches
  }
  if (path != nullptr) event.path = path;
  Shared* raw = shared;
  shared->post([raw, event] {
    if (raw->onEvent) raw->onEvent(event);
  });
}

class ZooKeeperSession final : public ZkSession {
 public:
  ZooKeeperSession(asio::io_context& io, std::string servers, Duration timeout,
                   ZkClientOptions options)
      : shared_(std::make_shared<Shared>(io)),
        servers_(std::move(servers)),
        timeout_(timeout),
        options_(options) {}

  ~ZooKeeperSession() override {
    shared_->closed = true;
    // Blocking, but short: it sends CLOSE when connected (so our ephemeral
    // znodes go at once) and joins the client's threads.
    if (zh_ != nullptr) zookeeper_close(zh_);
  }

  void start(EventFn onEvent) override {
    shared_->onEvent = std::move(onEvent);
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    int timeoutMs = static_cast<int>(std::chrono::duration_cast<Millis>(timeout_).count());
    {
      InheritedPriority priority(options_.priorityBoost);
      zh_ = zookeeper_init2(servers_.c_str(), watcher, timeoutMs, nullptr, shared_.get(), 0, zkLog);
    }
    if (zh_ != nullptr && !options_.credentials.empty()) authenticate();
    if (zh_ == nullptr) {
      // Only a malformed server list gets here (unreachable servers do not):
      // report it as a dead session so the owner logs it and retries.
      LOG_ERROR("ZooKeeper " << servers_ << ": cannot create a client: " << std::strerror(errno));
      ZkEvent expired;
      expired.state = ZkState::kExpired;
      shared_->post([shared = shared_.get(), expired] { shared->onEvent(expired); });
    }
  }

  void create(const std::string& path, const std::string& data, bool ephemeralSequential,
              CreateFn done) override {
    auto* call = new Call<CreateFn>{shared_, std::move(done)};
    int mode = ephemeralSequential ? ZOO_EPHEMERAL_SEQUENTIAL : ZOO_PERSISTENT;
    int rc = zh_ == nullptr ? ZINVALIDSTATE
                            : zoo_acreate2(zh_, path.c_str(), data.data(),
                                           static_cast<int>(data.size()), acl(), mode, onCreated,
                                           call);
    if (rc != ZOK) onCreated(rc, nullptr, nullptr, call);
  }

  void children(const std::string& path, bool watch, ChildrenFn done) override {
    auto* call = new Call<ChildrenFn>{shared_, std::move(done)};
    int rc = zh_ == nullptr ? ZINVALIDSTATE
                            : zoo_aget_children(zh_, path.c_str(), watch ? 1 : 0, onChildren, call);
    if (rc != ZOK) onChildren(rc, nullptr, call);
  }

  void exists(const std::string& path, bool watch, StatFn done) override {
    auto* call = new Call<StatFn>{shared_, std::move(done)};
    int rc = zh_ == nullptr ? ZINVALIDSTATE
                            : zoo_aexists(zh_, path.c_str(), watch ? 1 : 0, onStat, call);
    if (rc != ZOK) onStat(rc, nullptr, call);
  }

  void get(const std::string& path, DataFn done) override {
    auto* call = new Call<DataFn>{shared_, std::move(done)};
    int rc = zh_ == nullptr ? ZINVALIDSTATE : zoo_aget(zh_, path.c_str(), 0, onData, call);
    if (rc != ZOK) onData(rc, nullptr, 0, nullptr, call);
  }

  void set(const std::string& path, const std::string& data, int32_t version,
           StatFn done) override {
    auto* call = new Call<StatFn>{shared_, std::move(done)};
    int rc = zh_ == nullptr ? ZINVALIDSTATE
                            : zoo_aset(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                                       version, onStat, call);
    if (rc != ZOK) onStat(rc, nullptr, call);
  }

  void remove(const std::string& path, DoneFn done) override {
    auto* call = new Call<DoneFn>{shared_, std::move(done)};
    int rc = zh_ == nullptr ? ZINVALIDSTATE : zoo_adelete(zh_, path.c_str(), -1, onVoid, call);
    if (rc != ZOK) onVoid(rc, call);
  }

  void restrict(const std::string& path, DoneFn done) override {
    auto* call = new Call<DoneFn>{shared_, std::move(done)};
    if (options_.credentials.empty()) return onVoid(ZOK, call);
    int rc = zh_ == nullptr ? ZINVALIDSTATE
                            : zoo_aset_acl(zh_, path.c_str(), -1, acl(), onVoid, call);
    if (rc != ZOK) onVoid(rc, call);
  }

  std::string describe() const override {
    return servers_ + " (session timeout " +
           std::to_string(std::chrono::duration_cast<Millis>(timeout_).count()) + " ms)";
  }

 private:
  // Completions: copy, delete the call, post.
  static void onCreated(int rc, const char* value, const Stat* stat, const void* data) {
    std::unique_ptr<Call<CreateFn>> call(static_cast<Call<CreateFn>*>(const_cast<void*>(data)));
    std::string path = value != nullptr ? value : "";
    call->shared->post([done = std::move(call->done), rc, path, s = toStat(stat)] {
      done(toRc(rc), path, s);
    });
  }
  static void onChildren(int rc, const String_vector* strings, const void* data) {
    std::unique_ptr<Call<ChildrenFn>> call(static_cast<Call<ChildrenFn>*>(const_cast<void*>(data)));
    std::vector<std::string> names;
    if (rc == ZOK && strings != nullptr) {
      for (int32_t i = 0; i < strings->count; ++i) names.emplace_back(strings->data[i]);
    }
    call->shared->post([done = std::move(call->done), rc, names = std::move(names)] {
      done(toRc(rc), names);
    });
  }
  static void onStat(int rc, const Stat* stat, const void* data) {
    std::unique_ptr<Call<StatFn>> call(static_cast<Call<StatFn>*>(const_cast<void*>(data)));
    call->shared->post([done = std::move(call->done), rc, s = toStat(stat)] { done(toRc(rc), s); });
  }
  static void onData(int rc, const char* value, int length, const Stat* stat, const void* data) {
    std::unique_ptr<Call<DataFn>> call(static_cast<Call<DataFn>*>(const_cast<void*>(data)));
    std::string bytes = (value != nullptr && length > 0) ? std::string(value, length) : "";
    call->shared->post([done = std::move(call->done), rc, bytes = std::move(bytes),
                        s = toStat(stat)] { done(toRc(rc), bytes, s); });
  }
  static void onVoid(int rc, const void* data) {
    std::unique_ptr<Call<DoneFn>> call(static_cast<Call<DoneFn>*>(const_cast<void*>(data)));
    call->shared->post([done = std::move(call->done), rc] { done(toRc(rc)); });
  }

  // Queued by the client and sent (again after every reconnection) before
  // any other request. Digest authentication itself never fails (the
  // servers attach whatever identity the password hashes to); wrong
  // credentials show as kNoAuth on the first write.
  void authenticate() {
    const std::string& cred = options_.credentials;
    int rc = zoo_add_auth(zh_, "digest", cred.data(), static_cast<int>(cred.size()), onAuth,
                          nullptr);
    if (rc != ZOK) LOG_ERROR("ZooKeeper " << servers_ << ": cannot authenticate: " << zerror(rc));
  }
  static void onAuth(int rc, const void*) {
    if (rc != ZOK) LOG_ERROR("ZooKeeper refused this client's credentials: " << zerror(rc));
  }
  ACL_vector* acl() {
    return options_.credentials.empty() ? &ZOO_OPEN_ACL_UNSAFE : &restricted_.vector;
  }

  std::shared_ptr<Shared> shared_;
  RestrictedAcl restricted_;
  std::string servers_;
  Duration timeout_;
  ZkClientOptions options_;
  zhandle_t* zh_ = nullptr;
};

}  // namespace

const char* zkRcName(ZkRc rc) {
  switch (rc) {
    case ZkRc::kOk: return "ok";
    case ZkRc::kNoNode: return "no such znode";
    case ZkRc::kNodeExists: return "znode exists";
    case ZkRc::kBadVersion: return "znode changed meanwhile (version)";
    case ZkRc::kConnectionLoss: return "connection loss";
    case ZkRc::kSessionExpired: return "session expired";
    case ZkRc::kClosing: return "closing";
    case ZkRc::kNoAuth: return "not allowed (the znode's ACL)";
    case ZkRc::kOther: return "ZooKeeper error";
  }
  return "?";
}

const char* zkStateName(ZkState state) {
  switch (state) {
    case ZkState::kConnecting: return "connecting";
    case ZkState::kConnected: return "connected";
    case ZkState::kExpired: return "expired";
    case ZkState::kAuthFailed: return "authentication failed";
  }
  return "?";
}

Result<ZkUrl> parseZkUrl(const std::string& text) {
  constexpr size_t kMaxUrlBytes = 4096;
  if (text.rfind("zk://", 0) != 0) return Error{"'" + text + "': a ZooKeeper URL starts with zk://"};
  if (text.size() > kMaxUrlBytes) return Error{"ZooKeeper URL longer than 4096 bytes"};
  std::string rest = text.substr(5);
  auto slash = rest.find('/');
  if (slash == std::string::npos || slash == 0)
    return Error{"'" + text + "': expected zk://host:port[,host:port...]/path"};
  ZkUrl url{rest.substr(0, slash), rest.substr(slash)};
  while (url.path.size() > 1 && url.path.back() == '/') url.path.pop_back();
  if (url.path == "/" || url.path.find("//") != std::string::npos)
    return Error{"'" + text + "': the group path must name a znode below /, like /allot"};
  for (char c : url.servers) {
    if (c == '@' || c == ' ') return Error{"'" + text + "': bad server list '" + url.servers + "'"};
  }
  size_t start = 0;
  while (start <= url.servers.size()) {
    size_t comma = url.servers.find(',', start);
    std::string one = url.servers.substr(start, comma == std::string::npos ? std::string::npos
                                                                            : comma - start);
    auto colon = one.rfind(':');
    if (one.empty() || colon == std::string::npos || colon == 0 || colon + 1 == one.size())
      return Error{"'" + text + "': server '" + one + "' is not host:port"};
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return url;
}

Result<std::string> readZkCredentials(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::fromErrno("cannot read the ZooKeeper credentials file " + path);
  std::string text(kMaxZkCredentialsBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) return Error::fromErrno("cannot read the ZooKeeper credentials file " + path);
  if (text.size() > kMaxZkCredentialsBytes)
    return Error{path + ": a ZooKeeper credentials file holds one user:password line (at most " +
                 std::to_string(kMaxZkCredentialsBytes) + " bytes)"};
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  auto colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size() ||
      text.find_first_of("\n\r") != std::string::npos)
    return Error{path + ": expected one line user:password (digest credentials for ZooKeeper)"};
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 0077) != 0) {
    LOG_WARNING(path << ": the ZooKeeper credentials file may be read by other users (mode "
                     << std::oct << (st.st_mode & 0777) << std::dec << "); chmod 600 it");
  }
  return text;
}

Result<ZkSessionFactory> zooKeeperSessionFactory(asio::io_context& io, std::string servers,
                                                 Duration timeout, ZkClientOptions options) {
  if (servers.empty()) return Error{"no ZooKeeper servers given"};
  if (timeout < Millis(100) || timeout > std::chrono::hours(1))
    return Error{"ZooKeeper session timeout must be between 0.1 s and 1 h"};
  if (options.priorityBoost < 0 || options.priorityBoost > kMaxZkPriorityBoost)
    return Error{"ZooKeeper client priority boost must be between 0 and 39 nice levels"};
  return ZkSessionFactory([&io, servers = std::move(servers), timeout, options] {
    return std::unique_ptr<ZkSession>(new ZooKeeperSession(io, servers, timeout, options));
  });
}

}  // namespace allot
