#include "base/uring_poller.h"

#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "base/log.h"
#include "base/unique_fd.h"

namespace allot {
namespace {

// The ring's completion queue must hold one entry per live watch (each can
// complete at once: 1,000 executors dying together), plus cancellations.
constexpr unsigned kSubmissionEntries = 256;
constexpr unsigned kCompletionEntries = 16384;
// user_data of a poll_remove request: its own completion is ignored.
constexpr uint64_t kCancelTag = uint64_t{1} << 63;

class IoUringPoller final : public UringPoller {
 public:
  IoUringPoller(asio::io_context& io, io_uring ring, UniqueFd eventFd)
      : ring_(ring), eventFd_(eventFd.get()), descriptor_(io, eventFd.release()) {
    armEventFd();
  }

  ~IoUringPoller() override {
    boost::system::error_code ignored;
    descriptor_.cancel(ignored);
    io_uring_queue_exit(&ring_);
  }

  Result<WatchId> watch(int fd, uint32_t events, bool multishot, Callback callback) override {
    WatchId id = ++lastId_;
    if (Status st = submitPoll(id, fd, events, multishot); !st) return st.error();
    watches_.emplace(id, Watch{fd, events, multishot, std::move(callback)});
    return id;
  }

  void cancel(WatchId id) override {
    if (watches_.erase(id) == 0) return;
    io_uring_sqe* sqe = sqeOrFlush();
    if (!sqe) return;  // the ring is broken; the erased watch can no longer fire
    io_uring_prep_poll_remove(sqe, id);
    io_uring_sqe_set_data64(sqe, id | kCancelTag);
    io_uring_submit(&ring_);
  }

  size_t watchCount() const override { return watches_.size(); }
  std::string backend() const override { return "io_uring"; }

 private:
  struct Watch {
    int fd;
    uint32_t events;
    bool multishot;
    Callback callback;
  };

  io_uring_sqe* sqeOrFlush() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  Status submitPoll(WatchId id, int fd, uint32_t events, bool multishot) {
    io_uring_sqe* sqe = sqeOrFlush();
    if (!sqe) return Error{"io_uring: no submission entry for fd " + std::to_string(fd)};
    if (multishot) {
      io_uring_prep_poll_multishot(sqe, fd, events);
    } else {
      io_uring_prep_poll_add(sqe, fd, events);
    }
    io_uring_sqe_set_data64(sqe, id);
    int rc = io_uring_submit(&ring_);
    if (rc < 0) return Error{"io_uring_submit (poll fd " + std::to_string(fd) + ")", -rc};
    return okStatus();
  }

  void armEventFd() {
    descriptor_.async_wait(asio::posix::descriptor_base::wait_read,
                           [this](const boost::system::error_code& ec) {
                             if (ec) return;
                             uint64_t count = 0;
                             ssize_t ignored = read(eventFd_, &count, sizeof count);
                             (void)ignored;
                             drain();
                             armEventFd();
                           });
  }

  // Completions are collected first and dispatched after: a callback may
  // watch or cancel, which touches the ring.
  void drain() {
    struct Done {
      uint64_t id;
      int32_t res;
      bool more;
    };
    std::vector<Done> done;
    io_uring_cqe* cqe = nullptr;
    while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
      done.push_back({io_uring_cqe_get_data64(cqe), cqe->res, (cqe->flags & IORING_CQE_F_MORE) != 0});
      io_uring_cqe_seen(&ring_, cqe);
    }
    for (const Done& d : done) dispatch(d.id, d.res, d.more);
  }

  void dispatch(uint64_t id, int32_t res, bool more) {
    if (id & kCancelTag) return;
    auto it = watches_.find(id);
    if (it == watches_.end()) return;  // cancelled: never call back
    Watch& w = it->second;
    if (res == -ECANCELED) {
      watches_.erase(it);
      return;
    }
    uint32_t revents = res < 0 ? POLLERR : static_cast<uint32_t>(res);
    if (!w.multishot) {
      Callback callback = std::move(w.callback);
      watches_.erase(it);
      callback(revents);
      return;
    }
    // The kernel ends a multishot poll on its own at times (CQ overflow):
    // re-arm it so the caller sees no difference.
    if (!more) {
      if (Status st = submitPoll(id, w.fd, w.events, true); !st) {
        LOG_ERROR("cannot re-arm poll on fd " << w.fd << ": " << st.error().describe());
      }
    }
    Callback callback = w.callback;  // the callback may cancel its own watch
    callback(revents);
  }

  io_uring ring_;
  int eventFd_;
  asio::posix::stream_descriptor descriptor_;
  std::unordered_map<WatchId, Watch> watches_;
  WatchId lastId_ = 0;
};

// Asio's own reactor (epoll) on the same fds, for hosts where io_uring is
// refused (container seccomp profiles answer EPERM).
class EpollPoller final : public UringPoller {
 public:
  EpollPoller(asio::io_context& io, std::string reason) : io_(io), reason_(std::move(reason)) {}

  Result<WatchId> watch(int fd, uint32_t events, bool multishot, Callback callback) override {
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return Error::fromErrno("dup fd " + std::to_string(fd) + " for epoll");
    WatchId id = ++lastId_;
    auto w = std::make_shared<Watch>(Watch{asio::posix::stream_descriptor(io_, copy), events,
                                           multishot, std::move(callback)});
    watches_.emplace(id, w);
    arm(id, w);
    return id;
  }

  void cancel(WatchId id) override {
    auto it = watches_.find(id);
    if (it == watches_.end()) return;
    boost::system::error_code ignored;
    it->second->descriptor.cancel(ignored);
    watches_.erase(it);
  }

  size_t watchCount() const override { return watches_.size(); }
  std::string backend() const override { return "epoll (io_uring unavailable: " + reason_ + ")"; }

 private:
  struct Watch {
    asio::posix::stream_descriptor descriptor;
    uint32_t events;
    bool multishot;
    Callback callback;
  };

  void arm(WatchId id, const std::shared_ptr<Watch>& w) {
    auto type = (w->events & POLLPRI) ? asio::posix::descriptor_base::wait_error
                : (w->events & POLLOUT) ? asio::posix::descriptor_base::wait_write
                                        : asio::posix::descriptor_base::wait_read;
    uint32_t revents = (w->events & POLLPRI) ? POLLPRI : (w->events & POLLOUT) ? POLLOUT : POLLIN;
    w->descriptor.async_wait(type, [this, id, w, revents](const boost::system::error_code& ec) {
      if (ec == asio::error::operation_aborted || !watches_.count(id)) return;
      if (!w->multishot) watches_.erase(id);
      w->callback(ec ? POLLERR : revents);
      if (w->multishot && watches_.count(id)) arm(id, w);
    });
  }

  asio::io_context& io_;
  std::string reason_;
  std::unordered_map<WatchId, std::shared_ptr<Watch>> watches_;
  WatchId lastId_ = 0;
};

Result<std::unique_ptr<UringPoller>> createIoUring(asio::io_context& io) {
  io_uring ring{};
  io_uring_params params{};
  params.flags = IORING_SETUP_CQSIZE;
  params.cq_entries = kCompletionEntries;
  int rc = io_uring_queue_init_params(kSubmissionEntries, &ring, &params);
  if (rc < 0) return Error{"io_uring_queue_init", -rc};
  UniqueFd efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (efd.get() < 0) {
    Error e = Error::fromErrno("eventfd");
    io_uring_queue_exit(&ring);
    return e;
  }
  rc = io_uring_register_eventfd(&ring, efd.get());
  if (rc < 0) {
    io_uring_queue_exit(&ring);
    return Error{"io_uring_register_eventfd", -rc};
  }
  return std::unique_ptr<UringPoller>(new IoUringPoller(io, ring, std::move(efd)));
}

}  // namespace

Result<std::unique_ptr<UringPoller>> UringPoller::create(asio::io_context& io) {
  auto uring = createIoUring(io);
  if (uring) return uring;
  LOG_WARNING("io_uring unavailable (" << uring.error().describe()
                                       << "); supervising processes through epoll instead");
  return createEpoll(io, uring.error().describe());
}

Result<std::unique_ptr<UringPoller>> UringPoller::createEpoll(asio::io_context& io,
                                                             std::string reason) {
  return std::unique_ptr<UringPoller>(new EpollPoller(io, std::move(reason)));
}

}  // namespace allot
