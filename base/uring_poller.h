// UringPoller: readiness of file descriptors (pidfds, eventfds, inotify fds)
// observed through one io_uring (liburing POLL_ADD), bridged into the
// daemon's Asio io_context through an eventfd registered with the ring.
//
//   auto poller = UringPoller::create(io);          // once per daemon
//   auto id = poller->watch(pidfd, POLLIN, false, [](uint32_t revents) {...});
//   poller->cancel(*id);                            // callback never fires after
//
// One-shot watches fire once (a process exits once). Multishot watches
// (eventfd counters, inotify) fire on every readiness until cancelled; the
// callback must drain the fd. When io_uring is unavailable (EPERM from a
// container's seccomp profile, ENOSYS) create() falls back to Asio's own
// epoll reactor on the same fds and says so in the log; callers see no
// difference.
//
// Thread: create, watch, cancel and every callback run on the io_context
// thread. The poller must outlive its watches' fds being open: cancel before
// closing the fd.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/asio.h"
#include "base/result.h"

namespace allot {

class UringPoller {
 public:
  using WatchId = uint64_t;
  using Callback = std::function<void(uint32_t revents)>;

  virtual ~UringPoller() = default;

  static Result<std::unique_ptr<UringPoller>> create(asio::io_context& io);
  // The epoll fallback on its own (what create() returns when io_uring is
  // refused); tests use it to check both backends behave the same.
  static Result<std::unique_ptr<UringPoller>> createEpoll(asio::io_context& io,
                                                          std::string reason = "requested");

  // Starts watching `fd` for `events` (POLLIN, ...).
  virtual Result<WatchId> watch(int fd, uint32_t events, bool multishot, Callback callback) = 0;
  // Stops a watch; a no-op for an unknown or already fired one-shot id.
  virtual void cancel(WatchId id) = 0;

  virtual size_t watchCount() const = 0;
  // "io_uring" or "epoll (io_uring unavailable: ...)".
  virtual std::string backend() const = 0;
};

}  // namespace allot
