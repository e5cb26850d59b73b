// ZkSessionCycle: one ZooKeeper session at a time for a watcher that makes
// a new session when the old one expires (the detectors, ha/zk_detector.h
// and ha/zk_shard_detector.h), and the guard that keeps the old session's
// answers out: a callback wrapped by guard() runs only while the session
// it was made for is the current one and the cycle is not destroyed.
//
// Thread: the io_context thread, like the session itself.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "ha/zk_session.h"

namespace allot {

class ZkSessionCycle {
 public:
  explicit ZkSessionCycle(ZkSessionFactory sessions) : sessions_(std::move(sessions)) {}
  ~ZkSessionCycle() {
    stopped_ = true;
    session_.reset();
  }
  ZkSessionCycle(const ZkSessionCycle&) = delete;
  ZkSessionCycle& operator=(const ZkSessionCycle&) = delete;

  // `fn`, to run only while the session current now is, and the cycle lives.
  template <typename Fn>
  auto guard(Fn fn) {
    return [this, generation = generation_, fn = std::move(fn)](auto&&... args) {
      if (generation != generation_ || stopped_) return;
      fn(std::forward<decltype(args)>(args)...);
    };
  }

  // Drops the current session (its pending answers with it) and starts a
  // new one whose events go to `onEvent`.
  void renew(std::function<void(const ZkEvent&)> onEvent) {
    ++generation_;
    session_ = sessions_();
    session_->start(guard(std::move(onEvent)));
  }

  // The current session; renew() first.
  ZkSession& session() { return *session_; }

 private:
  ZkSessionFactory sessions_;
  std::unique_ptr<ZkSession> session_;
  uint64_t generation_ = 0;
  bool stopped_ = false;
};

}  // namespace allot
