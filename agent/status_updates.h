// UpdateStore: the agent's persistent queue of status updates that the
// framework has not acknowledged yet (SPEC section 4: at-least-once).
//
// One append-only log per framework under `dir` (<framework>.updates): an
// add appends the update, an acknowledgement appends a tombstone; the log
// is rewritten (temp file + rename) when tombstones outnumber live entries.
// Every record reaches the kernel before the call returns (an agent crash
// loses nothing). Terminal updates are also fdatasync'd: they must survive
// a node crash, since the framework learns how its task ended from nothing
// else. A non-terminal update or a tombstone lost with the node is harmless
// (the task died with the node; a lost tombstone means one more resend). load() rebuilds the queue
// after a restart; a torn last record (crash mid-append) is dropped.
//
// Bounded: past updatesPerFrameworkMax pending updates of one framework,
// the oldest is dropped with a warning (the framework still gets the newer
// state of that task). Thread: the agent's loop thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "proto/allot.pb.h"

namespace allot {

inline constexpr size_t kUpdatesPerFrameworkMax = 100000;

class UpdateStore {
 public:
  explicit UpdateStore(std::string dir, size_t updatesPerFrameworkMax = kUpdatesPerFrameworkMax);

  // Creates the directory and reads every framework's log.
  Status load();

  // Persists one update (framework_id and update_id must be set). Adding an
  // update_id already pending is a no-op.
  Status add(const wire::TaskStatus& status);

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
    UniqueFd log;  // opened for append
  };

  std::string pathOf(const std::string& frameworkId) const;
  Status loadFile(const std::string& path);
  Status append(Queue& q, const std::string& frameworkId, const wire::Envelope& record, bool durable);
  Status rewrite(Queue& q, const std::string& frameworkId);
  void insert(Queue& q, const wire::TaskStatus& status);
  void erase(Queue& q, const std::string& updateId);

  std::string dir_;
  size_t perFrameworkMax_;
  std::map<std::string, Queue> queues_;
};

// A file-name-safe spelling of an id: [A-Za-z0-9._-] kept, the rest %XX.
std::string fileSafeId(const std::string& id);

// Writes `data` to `path` atomically: temp file, (fdatasync when durable),
// rename. Without durable a crash of the agent still leaves the old or the
// new file; only a crash of the node may lose the new one.
Status writeFileAtomically(const std::string& path, const std::string& data, bool durable = true);

}  // namespace allot
