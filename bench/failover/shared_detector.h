// SharedDetector: one LeaderDetector (one ZooKeeper session) fanned out to
// many ReconnectingLinks in one emulator process.
//
// A real agent or scheduler runs one ZooKeeper detector of its own; an
// emulator hosting thousands of them in one process cannot (one more fd and
// one more session per peer, and the ZooKeeper server on the same 2 cores).
// Each link still gets its own LeaderDetector (view()), fed the same
// reports in the same order, so the reconnect policy that runs is the
// production ReconnectingLink's, unchanged. A report reaches the views a
// chunk at a time, one posted handler per pass of the loop, each chunk twice
// the one before after the first few, so the first links act on it (their timers fire, they
// connect) while the rest are still told, as separate hosts would, and the
// last hear within a few passes.
//
// Thread: the io_context thread. Views may outlive nothing: destroy every
// view (its link) before the SharedDetector.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/asio.h"
#include "proto/leader.h"

namespace allot {

class SharedDetector {
 public:
  static constexpr size_t kChunk = 32;  // views in a report's first chunks, by default
  static constexpr size_t kEqualPasses = 4;  // chunks of `chunk` views before they double, by default

  // `chunk`: views told in each of a report's first `equalPasses` posted
  // handlers, then twice as many in each next one (0: all in one handler).
  SharedDetector(asio::io_context& io, std::unique_ptr<LeaderDetector> inner,
                 size_t chunk = kChunk, size_t equalPasses = kEqualPasses);
  ~SharedDetector();

  // Starts the inner detector; call once, before or after making views.
  void start();
  // A detector for one link: reports the current leader (posted) when
  // started, then every change.
  std::unique_ptr<LeaderDetector> view();
  // Called when every view (that existed when a report came) has been told
  // of it: how long the fan-out took.
  void onToldAll(std::function<void(const std::optional<Leader>&)> hook) { toldAll_ = std::move(hook); }

 private:
  class View;
  // A report on its way to the views that existed when it came.
  struct Delivery {
    std::optional<Leader> leader;
    std::vector<uint64_t> ids;  // in start order
    size_t next = 0;            // the first not told yet
    size_t chunk = 0;           // views in its next chunk
    size_t passes = 0;          // chunks told so far
  };
  void onLeader(const std::optional<Leader>& leader);
  void postChunk();  // tells the next chunk of the front delivery

  asio::io_context& io_;
  std::unique_ptr<LeaderDetector> inner_;
  size_t chunk_;
  size_t equalPasses_;
  std::unordered_map<uint64_t, LeaderDetector::Callback> subscribers_;
  uint64_t nextId_ = 1;
  bool known_ = false;  // the inner detector has reported at least once
  std::optional<Leader> current_;
  std::deque<Delivery> deliveries_;
  std::function<void(const std::optional<Leader>&)> toldAll_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace allot
