#include "launcher/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>

#include <cerrno>
#include <cstdio>
#include <csignal>
#include <cstring>
#include <unordered_map>

#include "base/log.h"
#include "base/unique_fd.h"
#include "base/worker_pool.h"
#include "launcher/child.h"
#include "launcher/process_tree.h"

namespace allot {
namespace {

using launch_child::ChildArgs;
using launch_child::ChildFailure;
using launch_child::Prepared;
using launch_child::describeFailure;
using launch_child::prepare;
using launch_child::startChild;

ExitInfo exitInfoFrom(pid_t pid, const siginfo_t& info) {
  ExitInfo e;
  e.pid = pid;
  e.statusKnown = true;
  if (info.si_code == CLD_EXITED) {
    e.exited = true;
    e.exitCode = info.si_status;
  } else {
    e.signal = info.si_status;
    e.coreDumped = info.si_code == CLD_DUMPED;
  }
  return e;
}

// The calling thread's nice value (the launcher's creator: the loop's).
int ownNice() {
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, 0);
  return errno == 0 ? nice : 0;
}

// Whether this process may lower a nice value back to `nice` (CAP_SYS_NICE,
// or RLIMIT_NICE's floor of 20 - its value): the clone thread is niced only
// then, since every child it clones must take `nice` back.
bool mayLowerNiceTo(int nice) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, caps) == 0 &&
      (caps[CAP_TO_INDEX(CAP_SYS_NICE)].effective & CAP_TO_MASK(CAP_SYS_NICE)) != 0) {
    return true;
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NICE, &limit) != 0) return false;
  return limit.rlim_cur == RLIM_INFINITY || 20 - static_cast<long long>(limit.rlim_cur) <= nice;
}

// Bounds one reaping pass (the rest waits for the next exit or SIGCHLD).
constexpr int kMaxReapsPerPass = 4096;

class RealLauncher final : public Launcher {
 public:
  RealLauncher(asio::io_context& io, UringPoller& poller)
      : poller_(poller),
        sigchld_(io, SIGCHLD),
        childNice_(ownNice()),
        // Niced: woken by the loop, the clone thread must not preempt it
        // on its CPU (a sleeper's wake-up preemption would put the clone
        // back on the loop's time); it competes only with the agent's own
        // threads, which leave it the CPU whenever the loop waits. Its
        // children take childNice_ back (runChild); where the process may
        // not lower a nice value, the thread is not niced.
        clones_(std::make_unique<WorkerPool>(
            io, WorkerPoolOptions{.threads = 1, .queueMax = 4096,
                                  .niceness = mayLowerNiceTo(childNice_) ? kBackgroundNiceness : 0,
                                  .name = "allot-clone"})) {
    waitForOrphans();
  }

  ~RealLauncher() override {
    // First: a clone under way finishes; its child, never handed over, is
    // killed with its result (~Started).
    clones_.reset();
    for (auto& [pid, child] : children_) poller_.cancel(child.watch);
  }

  // The clone thread's vfork-style clone (cloneUntilExec), on the caller's
  // thread: the child has exec'd or failed a step when it returns, so "no
  // such executable" is an error here instead of an exit 127.
  Result<pid_t> launch(const LaunchSpec& spec, ExitCallback onExit) override {
    if (spec.argv.empty()) return Error{"launch: empty argv"};
    if (std::string why = launch_child::planRootfsError(spec.setup.rootfs); !why.empty()) return Error{why};
    return superviseStarted(cloneUntilExec(spec, childNice_), std::move(onExit));
  }

  void startOffLoop(const LaunchSpec& spec, ExitCallback onExit, StartCallback onStarted) override {
    if (spec.argv.empty()) return onStarted(Error{"launch: empty argv"});
    if (std::string why = launch_child::planRootfsError(spec.setup.rootfs); !why.empty()) return onStarted(Error{why});
    // The copy's descriptors are its own: the caller may close its.
    auto copy = std::make_shared<LaunchSpec>(spec);
    auto owned = std::make_shared<std::vector<UniqueFd>>();
    for (int* fd : {&copy->setup.cgroupDirFd, &copy->setup.netnsFd}) {
      if (*fd < 0) continue;
      UniqueFd dup(::fcntl(*fd, F_DUPFD_CLOEXEC, 0));
      if (!dup) return onStarted(Error::fromErrno("dup a descriptor of the child's setup"));
      *fd = dup.get();
      owned->push_back(std::move(dup));
    }
    std::shared_ptr<const LaunchSpec> spawned = copy;
    ++startsUnderWay_;
    Status queued = clones_->submit<Started>(
        [spawned, owned, nice = childNice_] {
          Started started = cloneUntilExec(*spawned, nice);
          if (started.pid > 0) started.startTime = processStartTimeOf(started.pid);
          return started;
        },
        [this, spawned, owned, onExit = std::move(onExit), onStarted](Started started) mutable {
          owned->clear();
          auto pid = superviseStarted(std::move(started), std::move(onExit));
          startFinished();
          onStarted(std::move(pid));
        });
    if (!queued) {
      startFinished();
      onStarted(queued.error());
    }
  }

  Status watch(pid_t pid, ExitCallback onExit) override {
    UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    if (pidfd.get() < 0) return Error::fromErrno("pidfd_open for pid " + std::to_string(pid));
    return supervise(pid, std::move(pidfd), false, std::move(onExit));
  }

  Status signal(pid_t pid, int sig) override {
    auto it = children_.find(pid);
    if (it == children_.end()) return Error{"pid " + std::to_string(pid) + " is not supervised"};
    if (syscall(SYS_pidfd_send_signal, it->second.pidfd.get(), sig, nullptr, 0) != 0) {
      return Error::fromErrno("pidfd_send_signal " + std::to_string(sig) + " to pid " +
                              std::to_string(pid));
    }
    return okStatus();
  }

  Result<UniqueFd> pidfdOf(pid_t pid) override {
    auto it = children_.find(pid);
    if (it == children_.end()) return Error{"pid " + std::to_string(pid) + " is not supervised"};
    UniqueFd copy(::fcntl(it->second.pidfd.get(), F_DUPFD_CLOEXEC, 0));
    if (!copy) return Error::fromErrno("dup pidfd of pid " + std::to_string(pid));
    return copy;
  }

  std::optional<uint64_t> startTimeOf(pid_t pid) const override {
    auto it = children_.find(pid);
    if (it != children_.end() && it->second.startTime) return it->second.startTime;
    return Launcher::startTimeOf(pid);
  }

  size_t supervisedCount() const override { return children_.size(); }
  uint64_t orphansReaped() const override { return orphansReaped_; }

 private:
  struct Child {
    UniqueFd pidfd;
    UringPoller::WatchId watch = 0;
    bool ourChild = false;
    ExitCallback onExit;
    std::optional<uint64_t> startTime;  // startOffLoop(): read off the loop
  };

  // A child cloned and exec'd (on any thread), not yet supervised. A
  // Started that never reaches the loop (the launcher went first) kills
  // its child.
  struct Started {
    pid_t pid = -1;
    UniqueFd pidfd;
    std::string error;  // the clone or a step of the child failed (pid -1)
    int errnum = 0;
    std::optional<uint64_t> startTime;  // read where it was cloned (startOffLoop)
    Started() = default;
    Started(Started&&) = default;
    Started& operator=(Started&&) = default;
    ~Started() {
      if (pidfd) (void)syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
    }
  };

  // No signal handler may run in the child before it has reset them.
  static pid_t cloneWithSignalsBlocked(ChildArgs* args, int* pidfd) {
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t pid = startChild(args, pidfd);
    int cloneErrno = errno;
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    errno = cloneErrno;
    return pid;
  }

  // The vfork-style clone (CLONE_VM | CLONE_VFORK, into a cgroup2
  // directory through clone3) of launch(), on its caller's thread, and of
  // startOffLoop(), on the clone thread: no page tables copied and no
  // mmap_lock taken for writing (a fork-like clone on the clone thread made
  // the loop's page faults wait for it, and the loop paid the copy-on-write
  // after it); the calling thread alone waits for the child's setup and
  // exec, and a failed step is an error here (the child reaped). The child
  // shares memory only with the caller's job (on the clone thread: one the
  // loop does not touch).
  static Started cloneUntilExec(const LaunchSpec& spec, int nice) {
    Started out;
    Prepared prepared = prepare(spec, nice);
    ChildFailure failure{};
    ChildArgs args{&prepared, {}};
    args.sink.shared = &failure;
    int pidfd = -1;
    pid_t pid = cloneWithSignalsBlocked(&args, &pidfd);
    if (pid < 0) {
      out.errnum = errno;
      out.error = "clone3/clone for " + spec.argv[0];
      return out;
    }
    UniqueFd pidfdOwner(pidfd);
    if (static_cast<int>(failure.step) != 0) {
      siginfo_t info{};
      while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED) != 0 && errno == EINTR) {
      }
      out.errnum = failure.errnum;
      out.error = describeFailure(failure, spec);
      return out;
    }
    if (pidfd < 0) {
      out.errnum = errno;
      out.error = "pidfd_open for pid " + std::to_string(pid);
      (void)::kill(pid, SIGKILL);  // our unreaped child: its pid is not reused
      return out;
    }
    out.pid = pid;
    out.pidfd = std::move(pidfdOwner);
    return out;
  }

  // On the loop: the started child supervised. Its pid, or why it could not
  // be supervised (killed then).
  Result<pid_t> superviseStarted(Started started, ExitCallback onExit) {
    if (started.pid < 0) return Error{started.error, started.errnum};
    pid_t pid = started.pid;
    UniqueFd pidfd(::fcntl(started.pidfd.get(), F_DUPFD_CLOEXEC, 0));
    if (!pidfd) return Error::fromErrno("dup pidfd of pid " + std::to_string(pid));  // ~Started kills it
    Status st = supervise(pid, std::move(pidfd), true, std::move(onExit));
    if (!st) return st.error();  // ~Started kills it
    started.pidfd.reset();       // supervised: it lives
    children_.at(pid).startTime = started.startTime;
    return pid;
  }

  Status supervise(pid_t pid, UniqueFd pidfd, bool ourChild, ExitCallback onExit) {
    int fd = pidfd.get();
    auto id = poller_.watch(fd, POLLIN, false, [this, pid](uint32_t) {
      onExited(pid);
      reapOrphans();
    });
    if (!id) return id.error();
    children_[pid] = Child{std::move(pidfd), *id, ourChild, std::move(onExit)};
    return okStatus();
  }

  void onExited(pid_t pid) {
    auto it = children_.find(pid);
    if (it == children_.end()) return;
    Child child = std::move(it->second);
    children_.erase(it);
    poller_.cancel(child.watch);  // a no-op when the watch is what fired
    siginfo_t info{};
    ExitInfo exit;
    exit.pid = pid;
    // Our own children (and adopted orphans) can be reaped for a status;
    // processes of an earlier agent run cannot (ECHILD).
    if (waitid(static_cast<idtype_t>(P_PIDFD), child.pidfd.get(), &info, WEXITED | WNOHANG) == 0 &&
        info.si_pid == pid) {
      exit = exitInfoFrom(pid, info);
    }
    child.pidfd.reset();
    child.onExit(exit);
  }

  // Orphans re-parented to the agent (when it is a subreaper) are reaped
  // after every supervised exit and on SIGCHLD (delivered through Asio's
  // signal_set, so no handler races with the loop). Zombies are peeked
  // with WNOWAIT first: a supervised child's status is never taken from
  // its watch; one found dead here is reported through it right away.
  void waitForOrphans() {
    sigchld_.async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;
      reapOrphans();
      waitForOrphans();
    });
  }

  // A start is handed back: orphan reaping left for it goes on.
  void startFinished() {
    if (--startsUnderWay_ == 0 && orphansWaiting_) {
      orphansWaiting_ = false;
      reapOrphans();
    }
  }

  void reapOrphans() {
    // A child cloned off the loop and not yet supervised would be taken
    // for an orphan (its exit status lost): later, once none is under way.
    if (startsUnderWay_ > 0) {
      orphansWaiting_ = true;
      return;
    }
    int subreaper = 0;
    if (prctl(PR_GET_CHILD_SUBREAPER, &subreaper, 0, 0, 0) != 0 || !subreaper) return;
    for (int reaped = 0; reaped < kMaxReapsPerPass; ++reaped) {
      siginfo_t info{};
      if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
      if (children_.count(info.si_pid)) {
        onExited(info.si_pid);
        continue;
      }
      siginfo_t status{};
      waitid(P_PID, info.si_pid, &status, WEXITED | WNOHANG);
      ++orphansReaped_;
    }
  }

  UringPoller& poller_;
  asio::signal_set sigchld_;
  uint64_t orphansReaped_ = 0;
  std::unordered_map<pid_t, Child> children_;
  size_t startsUnderWay_ = 0;   // startOffLoop()s not handed back yet
  bool orphansWaiting_ = false;  // reapOrphans() deferred by them
  int childNice_ = 0;            // every child's nice value: the loop's
  std::unique_ptr<WorkerPool> clones_;  // the clone thread; destroyed first
};

}  // namespace

const uint64_t kRootTaskCapabilities = [] {
  uint64_t mask = 0;
  for (int cap : {CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FSETID, CAP_FOWNER, CAP_MKNOD, CAP_NET_RAW, CAP_SETGID,
                  CAP_SETUID, CAP_SETFCAP, CAP_SETPCAP, CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT, CAP_KILL,
                  CAP_AUDIT_WRITE}) {
    mask |= uint64_t{1} << cap;
  }
  return mask;
}();

std::optional<uint64_t> Launcher::startTimeOf(pid_t pid) const { return processStartTimeOf(pid); }

Result<std::unique_ptr<Launcher>> Launcher::create(asio::io_context& io, UringPoller& poller) {
  return std::unique_ptr<Launcher>(new RealLauncher(io, poller));
}

Status becomeSubreaper() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    return Error::fromErrno("prctl(PR_SET_CHILD_SUBREAPER)");
  }
  return okStatus();
}

}  // namespace allot
