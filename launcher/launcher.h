// Launcher: starts executor processes and tells the agent when they end.
//
// launch() starts processes with a vfork-style clone (CLONE_VM |
// CLONE_VFORK | CLONE_PIDFD: no page tables copied), through clone3 with
// CLONE_INTO_CGROUP when a cgroup2 directory is given. Where clone3 is
// refused, glibc's clone(), and the child joins the cgroup2 directory by a
// cgroup.procs write. Exits are observed by a poll on each pidfd through UringPoller (io_uring),
// then reaped with waitid(P_PIDFD). No SIGCHLD handler, no waitpid loops, no
// zombies. The agent is made a child subreaper so orphaned grandchildren
// come back to it and are reaped too. (An Asio signal_set on SIGCHLD only
// triggers that orphan reaping, which does nothing unless the process is a
// subreaper: see becomeSubreaper below.)
//
// startOffLoop() makes launch()'s vfork-style clone on the launcher's own
// thread (the "allot-clone" thread), which alone waits for the child's
// setup and exec: the agent's loop never waits for cgroup_mutex
// (CLONE_INTO_CGROUP), the tasklist lock a fork bomb hammers, or the
// child's cgroup joins; the pid (or what failed) comes back on the loop.
//
// Thread: everything on the daemon's io_context thread; callbacks too.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/asio.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "base/uring_poller.h"

namespace allot {

// What the child does between clone and exec, in this order (runc's):
// signals, setsid, stdio, chdir, cgroup, netns, mount namespace (the
// host's mounts read-only for a root task, a new /proc for a PID namespace,
// the writable directories, /proc/sys read-only), cgroup namespace,
// capability bounding set, setgroups/setgid/setuid, the other capability
// sets, no_new_privs, seccomp, exec. A PID namespace is made by the clone
// itself (CLONE_NEWPID). Filled in by the agent and by isolators' prepare(); everything here
// is async-signal-safe in the child (no allocation after fork; raw syscalls
// for the credential changes, since glibc's setuid() would broadcast to the
// agent's threads from a child sharing its memory).
// A path of the host mounted inside a root filesystem of its own
// (RootfsSetup): a directory (recursively) or a file, nosuid and nodev.
struct RootfsBind {
  std::string source;  // absolute host path
  std::string target;  // absolute path inside the root (made if missing)
  bool readOnly = true;
};

// A root filesystem of its own (the filesystem/linux isolator): the child
// enters a private mount namespace, mounts an overlay of the image's layers
// (read-only) under a writable layer of its own at mountPoint, pivot_roots
// into it with its own /proc, a minimal /dev, /sys read-only, the kernel's
// sensitive paths masked as runc masks them, a private /tmp and `binds`,
// and starts in workingDir (launcher/child_rootfs.h says how). Implies a
// private mount namespace; a PID namespace's /proc is the one mounted
// here. Needs the launcher to run as root.
struct RootfsSetup {
  std::string layersDir;               // the layer store; lowerDirs are relative to it
  std::vector<std::string> lowerDirs;  // top layer first; empty: no root of its own
  std::string upperDir;                // the writable layer and overlay's work dir,
  std::string workDir;                 //   on one file system, neither shared
  std::string mountPoint;              // an empty directory the root is assembled on
  std::vector<RootfsBind> binds;
  std::string workingDir = "/";        // absolute inside the root
  // Absolute, "" for none: a read-only directory stacked above the image's
  // layers that holds the root's mount points (/proc, /dev, /etc/hosts...)
  // so the child mounts on them instead of making each in the writable
  // layer (filesystem/linux uses it when the image has none of them as
  // another kind of file).
  std::string mountPointsDir;
  bool enabled() const { return !lowerDirs.empty(); }
};

struct ChildSetup {
  // v2: a cgroup directory fd for CLONE_INTO_CGROUP (the child is born in
  // it; where clone3 is refused, it writes its pid into the directory's
  // cgroup.procs first thing).
  int cgroupDirFd = -1;
  // v1: "cgroup.procs" files the child writes its pid into.
  std::vector<std::string> cgroupProcsFiles;
  // A network namespace to setns() into (-1: stay in the agent's).
  int netnsFd = -1;
  // A seccomp BPF program (struct sock_filter array) installed last, after
  // no_new_privs. Empty: none.
  std::vector<char> seccompBpf;
  bool noNewPrivs = false;
  // Run as this user and group (-1: stay root), with these supplementary
  // groups (set whenever gid is; empty: none).
  int uid = -1;
  int gid = -1;
  std::vector<gid_t> groups;
  // Environment isolators add ("NAME=value", e.g. the executor's network
  // address); the agent appends it to LaunchSpec::env before launching.
  std::vector<std::string> env;
  // Empty every capability set (bounding, inheritable, ambient; effective
  // and permitted go with the switch to a non-zero uid) before exec.
  bool dropCapabilities = false;
  // Start the child as pid 1 of a new PID namespace, in a private mount
  // namespace (no propagation back to the host) with a /proc of its own: it
  // sees and can signal only the processes it starts, and when it exits the
  // kernel kills every process left in the namespace. The launcher and the
  // agent keep naming it by its host pid and pidfd. As a namespace's init
  // it gets, from outside, only SIGKILL, SIGSTOP and the signals it has a
  // handler for, and it inherits the namespace's orphans (it should reap
  // them). Set by the namespaces/pid isolator; implied by confineRoot.
  // Needs the launcher to run as root.
  bool newPidNamespace = false;
  // For a child that runs as uid 0 (root allowed by the master's ACLs, or an
  // operator's root --default-user): keep only kRootTaskCapabilities in the
  // bounding, permitted and effective sets (inheritable and ambient empty),
  // and start it in its own PID namespace (newPidNamespace) and a private
  // mount namespace where every host mount is read-only (so DAC_OVERRIDE
  // cannot write root-owned host files), except the working directory and
  // privateTmpDir bind-mounted at /tmp (both nosuid, nodev: no device node it
  // makes there opens) and a private 64 MiB tmpfs at /dev/shm; /proc/sys and
  // /proc/sysrq-trigger of its own /proc are read-only too. And in a new
  // cgroup namespace rooted at the cgroup it joined: it cannot write its pid
  // into another cgroup, remount, load modules or trace processes outside
  // its own privileges. Needs the launcher to run as root on Linux 5.12+
  // (mount_setattr). Ignored when dropCapabilities is set.
  bool confineRoot = false;
  // confineRoot: the directory bind-mounted at /tmp (created mode 1777 if
  // missing; "": /tmp stays read-only like the rest of the host).
  std::string privateTmpDir;
  // confineRoot: a host directory the child keeps seeing read-only at its
  // own path even when it lies under /tmp, below the private /tmp (the
  // agent's work dir, with the executor socket; "": none).
  std::string keepVisibleDir;
  // A root filesystem of its own (see RootfsSetup); confineRoot's host
  // view then does not apply: the host is out of sight.
  RootfsSetup rootfs;
};

// The capabilities a confined root task keeps: Docker's default set
// (CHOWN, DAC_OVERRIDE, FSETID, FOWNER, MKNOD, NET_RAW, SETGID, SETUID,
// SETFCAP, SETPCAP, NET_BIND_SERVICE, SYS_CHROOT, KILL, AUDIT_WRITE), as a
// mask of CAP_* bits. Not in it, among others: SYS_ADMIN, SYS_MODULE,
// SYS_PTRACE, NET_ADMIN, SYS_RAWIO, SYS_TIME, SYS_BOOT, DAC_READ_SEARCH, BPF.
extern const uint64_t kRootTaskCapabilities;

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is an absolute path or found in PATH
  std::vector<std::string> env;   // "NAME=value"; the child gets exactly these
  std::string workDir;            // chdir before exec
  std::string stdoutPath;         // created/appended; empty: /dev/null
  std::string stderrPath;
  ChildSetup setup;
};

struct ExitInfo {
  pid_t pid = 0;
  bool statusKnown = false;  // false for processes adopted by watch()
  bool exited = false;       // exited normally with exitCode
  int exitCode = 0;
  int signal = 0;            // killed by this signal
  bool coreDumped = false;
  // Set by a launcher whose child reports a failed setup step or exec only
  // with its exit (exit 127): what failed, with its errno's text. The real
  // launcher's children never do (launch() and startOffLoop() wait for the
  // exec and return the failure as their error).
  std::string setupError;
};

class Launcher {
 public:
  using ExitCallback = std::function<void(const ExitInfo&)>;
  using StartCallback = std::function<void(Result<pid_t>)>;

  virtual ~Launcher() = default;

  // The real launcher. The poller must outlive it.
  static Result<std::unique_ptr<Launcher>> create(asio::io_context& io, UringPoller& poller);

  // Starts a process. Returns its pid once it runs (or an Error if clone,
  // setup or exec failed: the vfork-style child reports its own failure in
  // the memory it shares with the caller, so "no such executable" is an
  // error here, not a mysterious exit 127). The caller's thread waits for
  // the child's setup and exec (it shares the caller's memory until then).
  // onExit fires exactly once.
  virtual Result<pid_t> launch(const LaunchSpec& spec, ExitCallback onExit) = 0;

  // launch() with the clone, the child's setup and its exec waited for off
  // the caller's thread: `onStarted` runs later on the io_context's thread
  // with the pid (the process has exec'd and is supervised from then on:
  // onExit fires once) or the error of the clone or of the step that failed
  // ("exec /no/such/binary": onExit never fires). Exactly once, unless the
  // launcher is destroyed first: a process cloned meanwhile is then killed
  // (SIGKILL through its pidfd) and neither callback runs. The spec is
  // copied (its ChildSetup descriptors duplicated): the caller may close
  // its own at once. While a start is under way the launcher leaves
  // orphan reaping for later, so that a child that exits before it is
  // supervised keeps its exit status.
  // Default (launchers with nothing to wait for, e.g. fakes): onStarted
  // with launch()'s result, before returning.
  virtual void startOffLoop(const LaunchSpec& spec, ExitCallback onExit, StartCallback onStarted) {
    onStarted(launch(spec, std::move(onExit)));
  }

  // A supervised process's start time (field 22 of /proc/<pid>/stat: what
  // guards its pid against reuse after an agent restart), nullopt when
  // unknown. startOffLoop()'s processes had it read off the caller's
  // thread, right after their exec: reading /proc/<pid>/stat waits for the
  // process's exec locks, which a new process preempted mid-exec on a busy
  // CPU holds for as long as it waits (19 ms on the agent's loop once,
  // under the hog's CPU hog). Default: read now, on the caller's thread.
  virtual std::optional<uint64_t> startTimeOf(pid_t pid) const;

  // Supervises a process this launcher did not start (e.g. an executor
  // recovered after an agent restart). Its exit status is unknown.
  virtual Status watch(pid_t pid, ExitCallback onExit) = 0;

  // Sends a signal through the process's pidfd (no pid-reuse race).
  virtual Status signal(pid_t pid, int sig) = 0;

  // A duplicate of the pidfd kept for a supervised process since launch()
  // or watch(): it names that process even after its pid is recycled
  // (killProcessTree() on a worker takes it). Non-pure: a launcher that
  // keeps no pidfds returns an Error and callers fall back to signal().
  virtual Result<UniqueFd> pidfdOf(pid_t) { return Error{"this launcher keeps no pidfds"}; }

  virtual size_t supervisedCount() const = 0;

  // Added: orphans (not supervised, re-parented to this subreaper process)
  // reaped so far. Non-pure so other implementations need not care.
  virtual uint64_t orphansReaped() const { return 0; }
};

// Makes the calling process a child subreaper (prctl PR_SET_CHILD_SUBREAPER):
// processes whose parent dies (a task's children when its executor exits)
// are re-parented to it. In a subreaper process the Launcher reaps every
// exited child it does not supervise (after each supervised exit and on
// SIGCHLD via Asio, peeking with WNOWAIT so supervised statuses stay with
// their watch): code in such a process must not fork and waitpid on its
// own. In a non-subreaper process the Launcher reaps only what it supervises.
Status becomeSubreaper();

}  // namespace allot
