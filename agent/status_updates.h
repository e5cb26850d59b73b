// UpdateStore: the agent's persistent queue of status updates that the
// framework has not acknowledged yet (SPEC section 4: at-least-once).
//
// One append-only log per framework under `dir` (<escapeId(framework)>.updates,
// base/files.h; a log found under another name, as older agents spelled it,
// is moved to that name by load()): an
// add appends the update, an acknowledgement appends a tombstone; the log
// is rewritten (temp file + rename) when tombstones outnumber live entries.
// Every record reaches the kernel before add() returns (an agent crash
// loses nothing). Terminal updates are also fdatasync'd: they must survive
// a node crash, since the framework learns how its task ended from nothing
// else. With an io_context the fdatasync runs on a syncer thread (one
// fdatasync covers every record written before it) and `durable` is posted
// back to the loop, so the loop never waits for the disk; without one it
// runs inline. A non-terminal update or a tombstone lost with the node is
// harmless (the task died with the node; a lost tombstone means one more
// resend), so their `durable` runs at once. load() rebuilds the queue
// after a restart; a torn last record (crash mid-append) is dropped.
//
// Bounded: past updatesPerFrameworkMax pending updates of one framework,
// the oldest is dropped with a warning (the framework still gets the newer
// state of that task). Thread: the agent's loop thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/asio.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "proto/allot.pb.h"

namespace allot {

inline constexpr size_t kUpdatesPerFrameworkMax = 100000;

class UpdateStore {
 public:
  using Durable = std::function<void(Status)>;

  explicit UpdateStore(std::string dir, size_t updatesPerFrameworkMax = kUpdatesPerFrameworkMax,
                       asio::io_context* io = nullptr);
  ~UpdateStore();  // waits for the syncer; pending `durable` callbacks are dropped

  // Creates the directory and reads every framework's log.
  Status load();

  // Persists one update (framework_id and update_id must be set). Adding an
  // update_id already pending is a no-op. `durable` (optional) runs once the
  // update may be relied on (see above), with the fdatasync's result.
  Status add(const wire::TaskStatus& status, Durable durable = nullptr);

  // Removes a pending update. Returns false when it was not pending.
  Result<bool> acknowledge(const std::string& frameworkId, const std::string& updateId);

  // Drops every pending update of a framework (and its log).
  Status forgetFramework(const std::string& frameworkId);

  bool contains(const std::string& frameworkId, const std::string& updateId) const;
  // Pending updates, per framework in the order they were added.
  std::vector<wire::TaskStatus> pending() const;
  size_t size() const;

 private:
  struct Queue {
    std::map<uint64_t, wire::TaskStatus> bySequence;
    std::unordered_map<std::string, uint64_t> sequenceOf;  // update_id -> sequence
    uint64_t nextSequence = 0;
    size_t tombstones = 0;
    std::shared_ptr<UniqueFd> log;  // opened for append; shared with the syncer
  };

  std::string pathOf(const std::string& frameworkId) const;
  Status loadFile(const std::string& fileName);  // a log in dir_
  Status append(Queue& q, const std::string& frameworkId, const wire::Envelope& record, bool durable);
  Status rewrite(Queue& q, const std::string& frameworkId);
  void insert(Queue& q, const wire::TaskStatus& status);
  void erase(Queue& q, const std::string& updateId);

  void syncLater(std::shared_ptr<UniqueFd> fd, const std::string& path, Durable durable);
  void syncerLoop();

  std::string dir_;
  size_t perFrameworkMax_;
  asio::io_context* io_;
  std::map<std::string, Queue> queues_;

  struct SyncJob {
    std::shared_ptr<UniqueFd> fd;
    std::string path;
    Durable durable;
  };
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<SyncJob> syncJobs_;
  bool stopping_ = false;
  std::thread syncer_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace allot
