// LoopSections: where a daemon's loop thread spent its time, by named
// section, since the last look. A LoopStallMeter (diag/loop_stall_meter.h)
// says that the loop ran late; this says what ran meanwhile: handlers that
// may run long time themselves with a Timer, and the daemon, at each tick
// of its stall meter, takes the sums since the previous tick.
//
//   LoopSections sections({"message", "allocate", "state slice"});
//   { auto timed = sections.time(kAllocate); master.allocate(); }
//   ... at each tick: auto since = sections.take();   // and resets
//
// A Timer costs two reads of the steady clock. Sections may nest: by
// default each counts its own wall time (the outer one includes the inner
// one's); with Nesting::kExclusive an outer section counts only the time no
// inner one was timed (a handler and the kernel calls it makes, each
// charged for its own part, so the biggest section names the call that
// blocked). Timers end in the reverse order of their start (scopes).
//
// Besides the sums since the last look, each section keeps, since its
// start, how many of its runs fell in each of kRunBucketsMs (a histogram of
// single runs, exported e.g. as allot_agent_loop_section_seconds): the
// distribution of one call's time (a launcher's start, a prepare()) over a
// benchmark's phase, by the difference of two looks. One increment per run.
// Thread: the loop's (one thread; no locking).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <iterator>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace allot {

class LoopSections {
 public:
  using Id = size_t;
  enum class Nesting { kInclusive, kExclusive };

  explicit LoopSections(std::vector<std::string> names, Nesting nesting = Nesting::kInclusive)
      : names_(std::move(names)), spent_(names_.size()), runs_(names_.size()), nesting_(nesting) {}

  class Timer {
   public:
    // Times nothing when owner is null.
    Timer(LoopSections* owner, Id id)
        : owner_(owner && id < owner->spent_.size() ? owner : nullptr),
          id_(id),
          start_(std::chrono::steady_clock::now()) {
      if (owner_) {
        if (!owner_->innermost_ && owner_->onOutermostStart_) owner_->onOutermostStart_();
        outer_ = owner_->innermost_;
        owner_->innermost_ = this;
      }
    }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;
    ~Timer() {
      if (!owner_) return;
      owner_->innermost_ = outer_;
      auto wall = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count());
      uint64_t ns = wall;
      if (owner_->nesting_ == Nesting::kExclusive) {
        ns = wall > innerNs_ ? wall - innerNs_ : 0;
        if (outer_) outer_->innerNs_ += wall;
      }
      Spent& s = owner_->spent_[id_];
      s.ns += ns;
      s.longestNs = std::max(s.longestNs, ns);
      ++s.count;
      owner_->runs_[id_].add(ns);
    }

   private:
    LoopSections* owner_;
    Id id_;
    std::chrono::steady_clock::time_point start_;
    Timer* outer_ = nullptr;  // the enclosing timer of the same owner
    uint64_t innerNs_ = 0;    // wall time of the timers nested in this one
  };

  // Times the caller's scope as section `id` (an index into the names).
  Timer time(Id id) { return Timer(this, id); }

  struct Spent {
    uint64_t ns = 0;         // wall time summed over the section's runs
    uint64_t longestNs = 0;  // its longest single run
    uint64_t count = 0;      // runs
  };
  struct Taken {
    // Sections that ran, the most time first: (name, spent).
    std::vector<std::pair<std::string, Spent>> sections;
    double totalMs() const;
    // "allocate 6.1 ms (1 run, longest 6.1 ms), message 2.0 ms (140 runs,
    // longest 0.1 ms)": the first `max` sections; "nothing timed" when none.
    std::string describe(size_t max = 3) const;
  };
  // The sums since the previous take(), then zero.
  Taken take();
  // Zero, without looking (cheaper than take()).
  void reset();

  // Upper bounds (ms, inclusive) of the run histogram's buckets; a last
  // bucket takes the runs past the last bound.
  static constexpr double kRunBucketsMs[] = {0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 20, 50, 100, 250};
  static constexpr size_t kRunBuckets = std::size(kRunBucketsMs) + 1;
  // One section's runs since the start (never reset by take() or reset()).
  struct Runs {
    uint64_t count = 0;
    uint64_t ns = 0;
    uint64_t longestNs = 0;
    std::array<uint64_t, kRunBuckets> buckets{};  // per bucket, not cumulative
    void add(uint64_t runNs);
  };
  const std::vector<Runs>& runs() const { return runs_; }

  const std::vector<std::string>& names() const { return names_; }

  // Runs `f` as each outermost section starts (not a nested one): the loop
  // has work (a resting LoopStallMeter's wake()). One call per handler.
  void onOutermostStart(std::function<void()> f) { onOutermostStart_ = std::move(f); }

 private:
  std::vector<std::string> names_;
  std::vector<Spent> spent_;
  std::vector<Runs> runs_;
  Nesting nesting_;
  Timer* innermost_ = nullptr;  // the timer running now, if any
  std::function<void()> onOutermostStart_;
};

}  // namespace allot
