// ZkSession: the seam between allot's election code and ZooKeeper.
//
// One ZooKeeper session (one client handle) as the contender and the
// detector (ha/contender.h, ha/zk_detector.h) need it: a few asynchronous
// calls and one stream of events. The real implementation
// (makeZooKeeperSession, ha/zk_client.cpp) drives the ZooKeeper C client;
// tests/ha/fake_zookeeper.h is an in-memory twin for unit tests.
//
// Contract, for every implementation:
//   - start() once; nothing happens before it.
//   - Every completion and every event runs on the io_context thread, never
//     inside the call that started it, in the order ZooKeeper produced them.
//   - A call made while disconnected completes with kConnectionLoss.
//   - A watch (watch = true) fires once, as an event of kind kCreated,
//     kDeleted, kDataChanged or kChildrenChanged for that path.
//   - Session events: kConnected after each (re)connection, kConnecting when
//     the link to the server is lost (the session may still be alive),
//     kExpired once the cluster has ended the session (final: the session is
//     dead, make a new one), kAuthFailed once the servers refused the
//     session's credentials (final: a new session with the same credentials
//     fares no better).
//   - A write the znode's ACL forbids completes with kNoAuth.
//   - After the destructor returns no callback runs. Destroying a connected
//     session closes it, so its ephemeral znodes go at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/asio.h"
#include "base/clock.h"
#include "base/result.h"

namespace allot {

enum class ZkRc {
  kOk,
  kNoNode,
  kNodeExists,
  kBadVersion,  // set(): the znode's version is not the one given
  kConnectionLoss,
  kSessionExpired,
  kClosing,
  kNoAuth,  // the znode's ACL forbids it to this ZooKeeper session's identity
  kOther
};
const char* zkRcName(ZkRc rc);

enum class ZkState { kConnecting, kConnected, kExpired, kAuthFailed };
const char* zkStateName(ZkState state);

struct ZkEvent {
  enum class Kind { kSession, kCreated, kDeleted, kDataChanged, kChildrenChanged };
  Kind kind = Kind::kSession;
  ZkState state = ZkState::kConnecting;  // kSession only
  std::string path;                      // watch events only
  Duration negotiatedTimeout{};          // kSession + kConnected only
};

struct ZkStat {
  int64_t czxid = 0;           // zxid of the create: global, increasing
  int64_t ephemeralOwner = 0;  // session id owning an ephemeral node, else 0
  int32_t version = 0;         // data version: 0 at create, +1 per set
};

class ZkSession {
 public:
  using EventFn = std::function<void(const ZkEvent&)>;
  using CreateFn = std::function<void(ZkRc, const std::string& createdPath, const ZkStat&)>;
  using ChildrenFn = std::function<void(ZkRc, const std::vector<std::string>& children)>;
  using StatFn = std::function<void(ZkRc, const ZkStat&)>;
  using DataFn = std::function<void(ZkRc, const std::string& data, const ZkStat&)>;
  using DoneFn = std::function<void(ZkRc)>;

  virtual ~ZkSession() = default;

  virtual void start(EventFn onEvent) = 0;
  // mode: persistent, or ephemeral + sequential (the name gets a 10-digit
  // suffix and `createdPath` says which).
  virtual void create(const std::string& path, const std::string& data, bool ephemeralSequential,
                      CreateFn done) = 0;
  virtual void children(const std::string& path, bool watch, ChildrenFn done) = 0;
  // kNoNode when absent; a watch is set either way (it fires on creation).
  virtual void exists(const std::string& path, bool watch, StatFn done) = 0;
  virtual void get(const std::string& path, DataFn done) = 0;
  // Replaces the data of `path` if its version is `version` (-1: any);
  // kBadVersion when another write came first. The stat is the new one.
  virtual void set(const std::string& path, const std::string& data, int32_t version,
                   StatFn done) = 0;
  virtual void remove(const std::string& path, DoneFn done) = 0;
  // With credentials (ZkClientOptions::credentials): sets the ACL of `path`
  // to the one this ZooKeeper session creates znodes with (only its
  // identity writes, anyone reads), so a znode made open by someone else is locked too;
  // kNoAuth when its ACL does not let this identity change it. Without
  // credentials: kOk, nothing changes.
  virtual void restrict(const std::string& path, DoneFn done) = 0;
  // The servers and timeout, for log lines.
  virtual std::string describe() const = 0;
};

// Makes a fresh session each time (a new one after expiry).
using ZkSessionFactory = std::function<std::unique_ptr<ZkSession>()>;

// "zk://host:port[,host:port...]/path" split into its parts.
struct ZkUrl {
  std::string servers;  // "host:port,host:port", as the C client wants it
  std::string path;     // "/allot"; never "/" or empty, no trailing '/'
};
Result<ZkUrl> parseZkUrl(const std::string& text);

// How the real client's own threads are scheduled.
struct ZkClientOptions {
  // Run the C client's I/O and completion threads this many nice levels
  // above the calling thread (0: as the caller). A session lives on the I/O
  // thread's pings and the completion thread's delivery of CONNECTED: when
  // thousands of peers reconnect to a leader on a small host, those threads
  // compete with the leader's loop and every other process, and a leader
  // whose link lapses for 2/3 + 1/3 of its session fences itself
  // (docs/decisions.md). Lowering a nice value needs CAP_SYS_NICE or an
  // RLIMIT_NICE that allows it; without, one warning and no boost.
  int priorityBoost = 0;
  // "user:password": the session authenticates with ZooKeeper's digest
  // scheme, and every znode it creates gets an ACL that lets only that
  // identity write (create, delete, set, change the ACL) and anyone read.
  // Empty: no authentication, znodes open to all (a client that only reads
  // needs nothing more: the masters' znodes are world-readable).
  std::string credentials;
};
// The largest credentials file read (one "user:password" line).
constexpr size_t kMaxZkCredentialsBytes = 1024;

// The digest credentials in `path`: one line "user:password" (a trailing
// newline is fine). Errors name the file and what is wrong; a file others
// may read is accepted with a warning.
Result<std::string> readZkCredentials(const std::string& path);
constexpr int kMaxZkPriorityBoost = 39;  // nice runs from 19 down to -20

// The real ZooKeeper client (zookeeper_mt; every callback is posted to `io`).
// `timeout` is the requested session timeout; the servers clamp it.
Result<ZkSessionFactory> zooKeeperSessionFactory(asio::io_context& io, std::string servers,
                                                 Duration timeout, ZkClientOptions options = {});

}  // namespace allot
