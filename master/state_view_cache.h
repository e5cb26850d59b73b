// StateCache: GET /state rendered once and served to many. The master's
// loop copies its records in slices of at most kSliceBudget
// (MasterStateView); one worker thread of its own turns the copies into
// JSON pieces; every reader streams the same pieces (shared, never
// copied), as soon as each exists.
//
// Which document a request gets (docs/decisions.md, "/state: render once"):
//  - the newest complete one, while it is younger than the time its own
//    rendering took (at most maxAge): /state costs the loop at most about
//    half its time however many clients ask, and no reader sees data older
//    than about two renderings;
//  - else the rendering in progress, if it started after the latest
//    invalidate() (operator actions call it: allotctl drain, then
//    allotctl agents, shows the drain);
//  - else a new rendering, started at once (or, while two documents are
//    alive, when a reader of the older one lets go).
// Limits: at most clientsMax readers at once (open() refuses more: the
// HTTP side answers 503 with Retry-After), at most kDocumentsMax documents
// alive (the one being served, the one being rendered), at most
// kBatchesInFlight batches between the loop and the worker.
//
// Thread: the master's loop, except the worker's rendering of batches.
// The Master must outlive the cache; stop() before destroying the Master.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>

#include "base/asio.h"
#include "base/clock.h"
#include "diag/loop_sections.h"
#include "base/worker_pool.h"
#include "http/server.h"
#include "master/state_view.h"

namespace allot {

struct StateCacheOptions {
  size_t clientsMax = 8;
  Duration maxAge = std::chrono::seconds(1);
  // Where the loop's slices and the pieces' hand-over are timed (none: null).
  LoopSections* sections = nullptr;
  LoopSections::Id sliceSection = 0;
  LoopSections::Id piecesSection = 0;
};

class StateDocument;
class StateReader;
class StateRendering;

class StateCache {
 public:
  static constexpr std::chrono::microseconds kSliceBudget{1000};
  static constexpr size_t kDocumentsMax = 2;
  static constexpr size_t kBatchesInFlight = 4;
  // The rendering worker runs under SCHED_IDLE (WorkerPoolOptions::
  // idlePolicy): the loop (offers) takes the CPU from it the moment it
  // wakes, and it never takes the CPU from the loop. Ten nice levels down
  // were not enough: under the kernel's EEVDF scheduler the niced worker
  // still preempted the loop (68 times in one 12 s state_probe window,
  // perf sched trace, docs/benchmarks.md). The cost: on a busy machine a
  // rendering waits until a CPU has nothing else to run.

  using ViewFactory = std::function<std::unique_ptr<MasterStateView>()>;
  StateCache(asio::io_context& io, ViewFactory makeView, StateCacheOptions options);
  ~StateCache();
  StateCache(const StateCache&) = delete;
  StateCache& operator=(const StateCache&) = delete;

  // A reader of the document the rules above pick; null when clientsMax
  // readers are open.
  std::shared_ptr<StateReader> open();
  // Documents started before now are no longer handed to new readers.
  void invalidate();
  // Ends the rendering in progress and forgets waiting readers (their
  // connections close). Nothing touches the Master afterwards.
  void stop();

  // Introspection (tests, the bench).
  uint64_t renderingsStarted() const;
  size_t documentsAlive() const;
  size_t readersOpen() const;

  struct Core;  // state_view_cache.cpp

 private:
  std::shared_ptr<Core> core_;
};

// One client's position in a document. Thread: the loop.
class StateReader : public std::enable_shared_from_this<StateReader> {
 public:
  ~StateReader();
  // Hands the next piece to `sink` (at once, or when it is rendered).
  void pull(http::PieceSink sink);

 private:
  friend struct StateCache::Core;
  friend class StateDocument;
  StateReader() = default;
  std::weak_ptr<StateCache::Core> core_;
  std::shared_ptr<StateDocument> document_;  // null while waiting for a rendering
  size_t next_ = 0;
  http::PieceSink pending_;  // a pull that waits
};

}  // namespace allot
