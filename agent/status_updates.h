// UpdateStore: the agent's persistent queue of status updates that the
// framework has not acknowledged yet (SPEC section 4: at-least-once).
//
// One append-only log per framework under `dir` (<escapeId(framework)>.updates,
// base/files.h; a log found under another name, as older agents spelled it,
// is moved to that name by load()): an
// add appends the update, an acknowledgement appends a tombstone; the log
// is rewritten (temp file + rename, fdatasync'd) when tombstones outnumber
// live entries, past the bound below, and (removed) when a framework is
// forgotten.
// Every record reaches the kernel before its `durable` runs (the agent
// forwards an update only then, so an agent crash loses nothing anyone
// saw). Terminal updates are also fdatasync'd: they must survive a node
// crash, since the framework learns how its task ended from nothing else.
// A non-terminal update or a tombstone lost with the node is harmless (the
// task died with the node; a lost tombstone means one more resend).
//
// With an io_context, the loop never waits for the disk: one file thread
// creates each framework's log (its records wait in memory until it is
// open: creating an inode on a busy ext4 can take 100 ms), rewrites and
// removes logs, and runs the fdatasyncs (one covers every record written
// before it); it does them in the order asked for and posts the results
// back to the loop. Appends to an open log are write()s on the loop. A
// non-terminal update's `durable` runs at once when its log is open.
// Without an io_context everything runs inline, and every record reaches
// the kernel before add() returns. load() (before the loop runs) is
// inline either way; it rebuilds the queue after a restart; a torn last
// record (crash mid-append) is dropped.
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
#include "diag/loop_sections.h"
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
  ~UpdateStore();
  // The file thread's results, run on the loop, are timed as `section` of
  // `sections` (the agent's late-tick attribution). Set before load().
  void timeResultsAs(LoopSections* sections, LoopSections::Id section) {
    sections_ = sections;
    section_ = section;
  }  // finishes the file thread's jobs; pending `durable` callbacks are dropped

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
  struct Waiting {
    Durable durable;
    bool terminal = false;  // fdatasync'd before `durable` runs
  };
  struct Queue {
    std::map<uint64_t, wire::TaskStatus> bySequence;
    std::unordered_map<std::string, uint64_t> sequenceOf;  // update_id -> sequence
    uint64_t nextSequence = 0;
    size_t tombstones = 0;
    std::shared_ptr<UniqueFd> log;  // opened for append; shared with the file thread
    // Set when its log is (re)opened or rewritten: the result of an older
    // open is dropped.
    uint64_t generation = 0;
    bool opening = false;             // an open is queued on the file thread
    std::string unwritten;            // frames waiting for that open
    std::vector<Waiting> waiting;     // their callbacks
  };

  // A job of the file thread; `done` runs on the loop with its result.
  struct FileJob {
    enum class Kind { kOpen, kSync, kReplace };
    Kind kind;
    std::string path;
    std::shared_ptr<UniqueFd> fd;  // kSync: the log to fdatasync
    std::string data;              // kReplace: the new content; empty: remove the log
    std::function<void(Status, std::shared_ptr<UniqueFd>)> done;
  };

  std::string pathOf(const std::string& frameworkId) const;
  Queue& queueOf(const std::string& frameworkId);  // made on first use
  Status loadFile(const std::string& fileName);  // a log in dir_
  Status append(Queue& q, const std::string& frameworkId, const wire::Envelope& record, Waiting waiting);
  Status appendInline(Queue& q, const std::string& path, const std::string& frame, Waiting& waiting);
  void openLater(Queue& q, const std::string& frameworkId);
  void onOpened(const std::string& frameworkId, uint64_t generation, Status st, std::shared_ptr<UniqueFd> fd);
  void afterWrite(Queue& q, const std::string& path, Status st, Waiting waiting);
  // Replaces the log with exactly the pending updates (removes it when
  // there are none); `waiting` (and every callback waiting for an open)
  // runs once that is durable. `now`: inline even with an io_context.
  Status rewrite(Queue& q, const std::string& frameworkId, Durable durable = nullptr, bool now = false);
  std::string encodeQueue(const Queue& q, Status* st) const;
  void insert(Queue& q, const wire::TaskStatus& status);
  void erase(Queue& q, const std::string& updateId);

  void enqueue(FileJob job);
  void fileLoop(std::weak_ptr<int> alive);
  static std::pair<Status, std::shared_ptr<UniqueFd>> perform(const FileJob& job,
                                                              std::map<const UniqueFd*, Status>& synced);

  std::string dir_;
  size_t perFrameworkMax_;
  asio::io_context* io_;
  LoopSections* sections_ = nullptr;
  LoopSections::Id section_ = 0;
  std::map<std::string, Queue> queues_;
  uint64_t generations_ = 0;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<FileJob> fileJobs_;
  bool stopping_ = false;
  std::thread fileThread_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace allot
