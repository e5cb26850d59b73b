// Flood: one scheduler connection that floods a master with frames from a
// thread of its own, while a second thread reads and drops the answers
// (so the master's queue to it never fills); and ReconcileProbe: another
// framework's Reconcile round trips, timed. The flood test
// (tests/trust/flood_test.cpp) and bench/trust/flood_bench.cpp share them.
//
// Kinds of flood:
//   kRegistrations  the flooder's own re-registrations and reconciles,
//                   alternating (valid frames, the costliest a framework
//                   may send at will);
//   kRefused        Reconciles one task id over kReconcileTasksMax, each
//                   refused with an ErrorMessage after validation.
//
// Thread: construct, start() and stop() on one thread; the counters may be
// read from any.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "proto/input_limits.h"
#include "tests/common/raw_peer.h"

namespace allot::testing {

class Flood {
 public:
  enum class Kind { kRegistrations, kRefused };
  // Frames written per send: many small valid ones, a few refused ones
  // (each about 100 KB).
  static constexpr size_t kValidFramesPerBatch = 256;
  static constexpr size_t kRefusedFramesPerBatch = 4;

  Flood(uint16_t port, Kind kind)
      : peer_(port, wire::ROLE_SCHEDULER, std::chrono::milliseconds(100)), kind_(kind) {}
  ~Flood() { stop(); }

  // Registers the flooder, then floods until stop(). False when the master
  // did not register it.
  bool start() {
    peer_.setReadTimeout(std::chrono::seconds(5));
    if (!peer_.send(registerFramework())) return false;
    auto reg = peer_.waitFor(wire::Envelope::kFrameworkRegistered);
    if (!reg) return false;
    peer_.setReadTimeout(std::chrono::milliseconds(100));
    std::string batch = makeBatch(reg->framework_registered().framework_id(),
                                  reg->framework_registered().framework_secret());
    sender_ = std::thread([this, batch] {
      while (!stop_ && peer_.sendRaw(batch)) framesSent_ += framesPerBatch();
    });
    reader_ = std::thread([this] {
      while (!stop_) {
        if (auto e = peer_.waitFor(answerKind())) ++answers_;
      }
    });
    return true;
  }
  void stop() {
    stop_ = true;
    peer_.shutdown();  // a send blocked on a full socket returns
    if (sender_.joinable()) sender_.join();
    if (reader_.joinable()) reader_.join();
  }
  uint64_t framesSent() const { return framesSent_; }
  // FrameworkRegistered (kRegistrations) or ErrorMessage (kRefused) frames
  // read back: frames the master has handled.
  uint64_t answers() const { return answers_; }

 private:
  size_t framesPerBatch() const {
    return kind_ == Kind::kRefused ? kRefusedFramesPerBatch : kValidFramesPerBatch;
  }
  wire::Envelope::BodyCase answerKind() const {
    return kind_ == Kind::kRegistrations ? wire::Envelope::kFrameworkRegistered : wire::Envelope::kError;
  }
  std::string makeBatch(const std::string& id, const std::string& secret) const {
    std::string bytes;
    wire::Envelope reg = registerFramework(id, secret);
    wire::Envelope reconcile;
    reconcile.mutable_reconcile();
    wire::Envelope refused;
    for (size_t i = 0; i <= limits::kReconcileTasksMax; ++i) {
      refused.mutable_reconcile()->add_tasks()->set_task_id("t" + std::to_string(i));
    }
    for (size_t i = 0; i < framesPerBatch(); ++i) {
      const wire::Envelope& e = kind_ == Kind::kRefused ? refused : i % 2 == 0 ? reg : reconcile;
      if (!appendFrame(e, &bytes).ok()) std::abort();  // every frame here is within the frame limit
    }
    return bytes;
  }

  RawPeer peer_;
  Kind kind_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> framesSent_{0};
  std::atomic<uint64_t> answers_{0};
  std::thread sender_;
  std::thread reader_;
};

// A framework of its own that reconciles one unknown task id at a time and
// times each answer (TASK_LOST from the master).
class ReconcileProbe {
 public:
  explicit ReconcileProbe(uint16_t port) : peer_(port, wire::ROLE_SCHEDULER) {}

  bool registered() {
    if (!peer_.send(registerFramework())) return false;
    return peer_.waitFor(wire::Envelope::kFrameworkRegistered).has_value();
  }
  // One round trip in milliseconds; nullopt when no answer came within the
  // read timeout (5 s).
  std::optional<double> roundTripMs() {
    std::string taskId = "probe-" + std::to_string(++sent_);
    wire::Envelope e;
    e.mutable_reconcile()->add_tasks()->set_task_id(taskId);
    auto start = std::chrono::steady_clock::now();
    if (!peer_.send(e)) return std::nullopt;
    while (auto u = peer_.waitFor(wire::Envelope::kStatusUpdate)) {
      if (u->status_update().status().task_id() != taskId) continue;
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    return std::nullopt;
  }

 private:
  RawPeer peer_;
  uint64_t sent_ = 0;
};

}  // namespace allot::testing
