#include "launcher/launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <sched.h>

#include <cerrno>
#include <cstdio>
#include <csignal>
#include <cstring>
#include <unordered_map>

#include "base/log.h"
#include "base/unique_fd.h"
#include "base/worker_pool.h"
#include "launcher/clone_vm.h"
#include "launcher/process_tree.h"

namespace allot {
namespace {

// What the child reports through the close-on-exec pipe when a step fails.
enum class Step : int {
  kSignals = 1, kSetsid, kStdin, kStdout, kStderr, kChdir, kCgroup, kNetns,
  kSetgroups, kSetgid, kSetuid, kNoNewPrivs, kSeccomp, kExec, kCapBound, kCaps,
  kMountNs, kCgroupNs, kReadOnly, kReadOnlyHost, kMountProc, kWritable, kShm, kNice,
};

const char* stepName(Step step) {
  switch (step) {
    case Step::kSignals: return "reset signals";
    case Step::kSetsid: return "setsid";
    case Step::kStdin: return "open /dev/null as stdin";
    case Step::kStdout: return "open stdout file";
    case Step::kStderr: return "open stderr file";
    case Step::kChdir: return "chdir to the working directory";
    case Step::kCgroup: return "join cgroup";
    case Step::kNetns: return "setns into the network namespace";
    case Step::kSetgroups: return "setgroups";
    case Step::kSetgid: return "setgid";
    case Step::kSetuid: return "setuid";
    case Step::kNoNewPrivs: return "prctl(PR_SET_NO_NEW_PRIVS)";
    case Step::kSeccomp: return "install the seccomp filter";
    case Step::kExec: return "exec";
    case Step::kCapBound: return "drop the capability bounding set";
    case Step::kCaps: return "clear the capability sets";
    case Step::kMountNs: return "unshare a private mount namespace";
    case Step::kCgroupNs: return "unshare a cgroup namespace";
    case Step::kReadOnly: return "make read-only (mount_setattr)";
    case Step::kReadOnlyHost: return "make the host's mounts read-only (mount_setattr / recursive)";
    case Step::kMountProc: return "mount /proc for the PID namespace";
    case Step::kWritable: return "bind-mount a writable directory";
    case Step::kShm: return "mount a private tmpfs at /dev/shm";
    case Step::kNice: return "take the agent's nice value back (setpriority)";
  }
  return "setup";
}

struct ChildFailure {
  Step step;
  int errnum;
  int index;  // which cgroup file (kCgroup), read-only path (kReadOnly) or writable bind (kWritable)
};

// What a confined root task sees read-only (launcher.h, confineRoot). /proc
// entries are bind-mounted onto themselves first: they are not mount points.
// An optional one may be missing (/proc/sysrq-trigger without
// CONFIG_MAGIC_SYSRQ).
struct ReadOnlyPath {
  const char* path;
  bool bindFirst;
  bool optional;
};
constexpr ReadOnlyPath kRootReadOnlyPaths[] = {
    {"/sys", false, false}, {"/proc/sys", true, false}, {"/proc/sysrq-trigger", true, true}};

// A confined root task always gets its own PID namespace (launcher.h).
bool newPidNamespace(const ChildSetup& setup) {
  return setup.newPidNamespace || (setup.confineRoot && !setup.dropCapabilities);
}

// Everything the child needs, prepared before clone so the child only
// makes async-signal-safe calls.
struct Prepared {
  // Set by startChild() when the clone could not put the child into
  // ChildSetup::cgroupDirFd itself (no CLONE_INTO_CGROUP): the child writes
  // its pid into that directory's cgroup.procs before anything else.
  bool joinCgroupDir = false;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::vector<std::string> storage;
  const LaunchSpec* spec = nullptr;
  // Signals whose disposition is not SIG_DFL in the agent (ignored or
  // caught): the child resets them before it unblocks signals.
  std::vector<int> nonDefaultSignals;
  int capLastCap = 0;  // /proc/sys/kernel/cap_last_cap, read before clone
  std::string workDirPath;  // spec.workDir, for the child to write into (makeDirs)
  std::string keepVisiblePath;  // setup.keepVisibleDir when it lies under /tmp
  // The nice value the child takes before anything else: the launcher's
  // creator's (the loop's), not the niced clone thread's it would inherit.
  int nice = 0;
  char pidText[24] = {};
};

int readCapLastCap() {
  int last = CAP_LAST_CAP;
  if (FILE* f = std::fopen("/proc/sys/kernel/cap_last_cap", "re")) {
    if (std::fscanf(f, "%d", &last) != 1) last = CAP_LAST_CAP;
    std::fclose(f);
  }
  return last;
}

Prepared prepare(const LaunchSpec& spec, int nice) {
  Prepared p;
  p.spec = &spec;
  p.nice = nice;
  p.storage.reserve(spec.argv.size() + spec.env.size());
  for (const auto& a : spec.argv) p.storage.push_back(a);
  for (const auto& e : spec.env) p.storage.push_back(e);
  size_t i = 0;
  for (; i < spec.argv.size(); ++i) p.argv.push_back(p.storage[i].data());
  p.argv.push_back(nullptr);
  for (; i < p.storage.size(); ++i) p.envp.push_back(p.storage[i].data());
  p.envp.push_back(nullptr);
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction action {};
    if (sigaction(sig, nullptr, &action) == 0 && action.sa_handler != SIG_DFL) {
      p.nonDefaultSignals.push_back(sig);
    }
  }
  if (spec.setup.dropCapabilities || spec.setup.confineRoot) p.capLastCap = readCapLastCap();
  p.workDirPath = spec.workDir;
  if (spec.setup.keepVisibleDir.rfind("/tmp/", 0) == 0) p.keepVisiblePath = spec.setup.keepVisibleDir;
  return p;
}

// Where the child reports a failed step: straight into the parent's memory
// when it shares it (the vfork-style clone: the parent reads it once clone
// returns, with no extra wake-up), else a close-on-exec pipe.
struct FailureSink {
  int pipeFd = -1;
  ChildFailure* shared = nullptr;
};

[[noreturn]] void childFail(const FailureSink& sink, Step step, int index = 0) {
  ChildFailure f{step, errno, index};
  if (sink.shared) {
    *sink.shared = f;
  } else {
    ssize_t ignored = write(sink.pipeFd, &f, sizeof f);
    (void)ignored;
  }
  _exit(127);
}

void formatPid(char* out) {
  pid_t pid = getpid();
  char digits[16];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + pid % 10);
    pid /= 10;
  } while (pid > 0);
  for (int i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  out[n] = '\n';
  out[n + 1] = '\0';
}

int openOutput(const std::string& path) {
  if (path.empty()) return open("/dev/null", O_WRONLY | O_CLOEXEC);
  return open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
}

// While still privileged (PR_CAPBSET_DROP needs CAP_SETPCAP): no later
// execve can gain a capability back. EINVAL: a capability this kernel lacks.
void dropBoundingSet(int capLastCap, uint64_t keep, const FailureSink& sink) {
  for (int cap = 0; cap <= capLastCap; ++cap) {
    if (cap < 64 && (keep >> cap & 1)) continue;
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) childFail(sink, Step::kCapBound);
  }
}

// After the uid switch: effective and permitted are empty already for a
// non-zero uid (no keep-caps); for uid 0 they shrink to `keep` here (an
// execve as root gets the bounding set, which holds no more). Inheritable
// and ambient are cleared.
void setCapabilities(uint64_t keep, const FailureSink& sink) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; ++i) {
    data[i].permitted = data[i].effective = static_cast<uint32_t>(keep >> (32 * i));
  }
  if (syscall(SYS_capset, &header, data) != 0) childFail(sink, Step::kCaps);
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    childFail(sink, Step::kCaps);
  }
}

// The host's mounts read-only for a confined root task, in its own mount
// namespace only: one recursive mount_setattr on / (crun and bubblewrap
// remount each submount MS_BIND|MS_REMOUNT|MS_RDONLY; mount_setattr does the
// whole tree at once, and atomically). Files the child opened before (its
// stdout and stderr) stay writable: they belong to the host's mounts.
void makeHostReadOnly(const FailureSink& sink) {
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &attr, sizeof attr) != 0) {
    childFail(sink, Step::kReadOnlyHost);
  }
}

// A detached copy of the mount at `path` (open_tree), writable again but
// nosuid and nodev: with CAP_MKNOD a root task could otherwise make a block
// device node there and write the host's disks. Taken before anything
// covers `path` (the private /tmp covers a working directory under /tmp).
int writableTree(const char* path, int index, const FailureSink& sink) {
  int tree = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0) childFail(sink, Step::kWritable, index);
  mount_attr attr{};
  attr.attr_clr = MOUNT_ATTR_RDONLY;
  attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
    childFail(sink, Step::kWritable, index);
  }
  return tree;
}

// mkdir -p of `path` (a buffer the child may write into; restored).
void makeDirs(char* path) {
  for (char* slash = std::strchr(path + 1, '/'); slash; slash = std::strchr(slash + 1, '/')) {
    *slash = '\0';
    mkdir(path, 0755);
    *slash = '/';
  }
  mkdir(path, 0755);
}

// A root task's writable places: its working directory, its private /tmp
// and a private /dev/shm (Docker's 64 MiB; tmpfs pages are charged to the
// task's memory cgroup). Everything else stays read-only. The working
// directory is attached last, at its own path (made inside the private
// /tmp when it lies under /tmp), and entered again: the cwd the child took
// before is the read-only copy.
void mountWritable(Prepared& p, const FailureSink& sink) {
  const LaunchSpec& spec = *p.spec;
  const std::string& tmp = spec.setup.privateTmpDir;
  int workTree = spec.workDir.empty() ? -1 : writableTree(spec.workDir.c_str(), 0, sink);
  int keptTree = -1;
  if (!tmp.empty() && !p.keepVisiblePath.empty()) {
    keptTree = open_tree(AT_FDCWD, p.keepVisiblePath.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (keptTree < 0) childFail(sink, Step::kWritable, 2);
  }
  if (!tmp.empty()) {
    int tmpTree = writableTree(tmp.c_str(), 1, sink);
    if (move_mount(tmpTree, "", AT_FDCWD, "/tmp", MOVE_MOUNT_F_EMPTY_PATH) != 0) childFail(sink, Step::kWritable, 1);
    close(tmpTree);
  }
  if (keptTree >= 0) {
    makeDirs(p.keepVisiblePath.data());
    if (move_mount(keptTree, "", AT_FDCWD, p.keepVisiblePath.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) {
      childFail(sink, Step::kWritable, 2);
    }
    close(keptTree);
  }
  if (workTree >= 0) {
    makeDirs(p.workDirPath.data());
    if (move_mount(workTree, "", AT_FDCWD, spec.workDir.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0 ||
        chdir(spec.workDir.c_str()) != 0) {
      childFail(sink, Step::kWritable, 0);
    }
    close(workTree);
  }
  if (mount("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=65536k") != 0 &&
      errno != ENOENT) {
    childFail(sink, Step::kShm);
  }
}

// /sys is read-only with the rest of the host; /proc/sys and
// /proc/sysrq-trigger are on the task's own (writable) /proc.
void makeProcReadOnly(const FailureSink& sink) {
  for (size_t i = 0; i < std::size(kRootReadOnlyPaths); ++i) {
    const ReadOnlyPath& ro = kRootReadOnlyPaths[i];
    if (ro.bindFirst && mount(ro.path, ro.path, nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      if (ro.optional && errno == ENOENT) continue;
      childFail(sink, Step::kReadOnly, static_cast<int>(i));
    }
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_RDONLY;
    if (syscall(SYS_mount_setattr, AT_FDCWD, ro.path, AT_RECURSIVE, &attr, sizeof attr) != 0) {
      childFail(sink, Step::kReadOnly, static_cast<int>(i));
    }
  }
}

// The child's own view of the system (launcher.h, newPidNamespace and
// confineRoot): its mounts stop propagating to the host (slave: the host's
// still reach it); a confined root task gets the host read-only, then a
// /proc of its PID namespace (mounted after, so /proc/self stays writable),
// its writable directories, /proc/sys read-only, and a cgroup namespace
// rooted where it now is. While still holding CAP_SYS_ADMIN, i.e. before
// the bounding set and capsets shrink.
void setUpMountNamespace(Prepared& p, bool confine, bool newPid, const FailureSink& sink) {
  const std::string& tmp = p.spec->setup.privateTmpDir;
  if (confine && !tmp.empty()) {
    if (mkdir(tmp.c_str(), 0700) == 0) {
      if (chmod(tmp.c_str(), 01777) != 0) childFail(sink, Step::kWritable, 1);
    } else if (errno != EEXIST) {
      childFail(sink, Step::kWritable, 1);
    }
  }
  if (unshare(CLONE_NEWNS) != 0) childFail(sink, Step::kMountNs);
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) childFail(sink, Step::kMountNs);
  if (confine) makeHostReadOnly(sink);
  if (newPid && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    childFail(sink, Step::kMountProc);
  }
  if (!confine) return;
  mountWritable(p, sink);
  makeProcReadOnly(sink);
  // Kernels without cgroup namespaces (before 4.6) say EINVAL: the
  // read-only hierarchies above are what keeps the task in place anyway.
  if (unshare(CLONE_NEWCGROUP) != 0 && errno != EINVAL) childFail(sink, Step::kCgroupNs);
}

// Runs in the child between clone and exec: async-signal-safe calls only.
[[noreturn]] void runChild(Prepared& p, const FailureSink& sink) {
  const LaunchSpec& spec = *p.spec;
  const ChildSetup& setup = spec.setup;
  // The parent blocked every signal around clone. Ignored signals would
  // stay ignored across exec (the agent ignores SIGPIPE), and a caught one
  // would run the agent's handler in this child (it shares the agent's
  // memory until exec): both go back to SIG_DFL before the mask is cleared.
  for (int sig : p.nonDefaultSignals) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, nullptr) != 0) childFail(sink, Step::kSignals);
  // A child of the clone thread inherits its nice value: executors and
  // their tasks would all run niced. Before setuid, which could take away
  // the right to lower it (the launcher niced that thread only with it).
  if (setpriority(PRIO_PROCESS, 0, p.nice) != 0) childFail(sink, Step::kNice);
  if (setsid() < 0) childFail(sink, Step::kSetsid);
  int in = open("/dev/null", O_RDONLY);
  if (in < 0 || dup2(in, 0) < 0) childFail(sink, Step::kStdin);
  int out = openOutput(spec.stdoutPath);
  if (out < 0 || dup2(out, 1) < 0) childFail(sink, Step::kStdout);
  int err = openOutput(spec.stderrPath);
  if (err < 0 || dup2(err, 2) < 0) childFail(sink, Step::kStderr);
  if (!spec.workDir.empty() && chdir(spec.workDir.c_str()) != 0) childFail(sink, Step::kChdir);
  formatPid(p.pidText);
  if (p.joinCgroupDir) {
    int fd = openat(setup.cgroupDirFd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, p.pidText, strlen(p.pidText)) < 0) childFail(sink, Step::kCgroup, -1);
    close(fd);
  }
  for (size_t i = 0; i < setup.cgroupProcsFiles.size(); ++i) {
    int fd = open(setup.cgroupProcsFiles[i].c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, p.pidText, strlen(p.pidText)) < 0) {
      childFail(sink, Step::kCgroup, static_cast<int>(i));
    }
    close(fd);
  }
  if (setup.netnsFd >= 0 && setns(setup.netnsFd, CLONE_NEWNET) != 0) childFail(sink, Step::kNetns);
  bool confine = setup.confineRoot && !setup.dropCapabilities;
  uint64_t keep = confine ? kRootTaskCapabilities : 0;
  if (confine || newPidNamespace(setup)) setUpMountNamespace(p, confine, newPidNamespace(setup), sink);
  if (setup.dropCapabilities || confine) dropBoundingSet(p.capLastCap, keep, sink);
  if (setup.gid >= 0) {
    if (syscall(SYS_setgroups, setup.groups.size(), setup.groups.data()) != 0) childFail(sink, Step::kSetgroups);
    if (syscall(SYS_setresgid, setup.gid, setup.gid, setup.gid) != 0) childFail(sink, Step::kSetgid);
  }
  if (setup.uid >= 0 && syscall(SYS_setresuid, setup.uid, setup.uid, setup.uid) != 0) {
    childFail(sink, Step::kSetuid);
  }
  if (setup.dropCapabilities || confine) setCapabilities(keep, sink);
  if ((setup.noNewPrivs || !setup.seccompBpf.empty()) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    childFail(sink, Step::kNoNewPrivs);
  }
  if (!setup.seccompBpf.empty()) {
    sock_fprog prog{};
    prog.len = static_cast<unsigned short>(setup.seccompBpf.size() / sizeof(sock_filter));
    prog.filter = reinterpret_cast<sock_filter*>(const_cast<char*>(setup.seccompBpf.data()));
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) childFail(sink, Step::kSeccomp);
  }
  // Every fd of the agent stays behind (sockets, the ring, cgroup files).
  syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  execvpe(p.argv[0], p.argv.data(), p.envp.data());
  childFail(sink, Step::kExec);
}

struct ChildArgs {
  Prepared* prepared;
  FailureSink sink;
};

int childMain(void* arg) {
  auto* a = static_cast<ChildArgs*>(arg);
  runChild(*a->prepared, a->sink);
}

// clone3 said it cannot do what was asked: no clone3 (ENOSYS, before Linux
// 5.3, or a seccomp filter's answer), no CLONE_INTO_CGROUP (E2BIG, 5.3-5.6)
// or refused by a filter (EPERM). The fallbacks then join the cgroup2
// directory by a cgroup.procs write in the child.
bool clone3Refused(int err) { return err == ENOSYS || err == E2BIG || err == EPERM; }

// Starts the child with a pidfd. When the caller waits for the exec anyway
// (`vforkOk`), a vfork-style clone (CLONE_VM | CLONE_VFORK, as posix_spawn
// does: no page tables copied, the parent resumes once the child has
// exec'd or failed), through clone3 with CLONE_INTO_CGROUP when a cgroup2
// directory is given, else glibc's clone(). Otherwise a fork-like clone3
// (with CLONE_INTO_CGROUP for a cgroup2 directory). Where clone3 is
// refused, the vfork-style clone(), or a fork-like clone (with the PID
// namespace, if one is asked for) + pidfd_open, and the child writes its
// pid into the cgroup2 directory. The child of CLONE_NEWPID is pid 1 of the
// new namespace; clone returns its pid in ours.
pid_t startChild(ChildArgs* args, int* pidfd, bool vforkOk) {
  const ChildSetup& setup = args->prepared->spec->setup;
  const int newPid = newPidNamespace(setup) ? CLONE_NEWPID : 0;
  constexpr size_t kStackBytes = 256 * 1024;
  static thread_local std::vector<char> stack(kStackBytes);
  // The child's stack pointer starts at its top: 16-byte aligned.
  char* stackTop = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(stack.data()) + stack.size()) & ~uintptr_t{15});
  const bool intoCgroup = setup.cgroupDirFd >= 0;
  clone_args ca{};
  ca.flags = CLONE_PIDFD | static_cast<uint64_t>(newPid);
  ca.pidfd = reinterpret_cast<uint64_t>(pidfd);
  ca.exit_signal = SIGCHLD;
  if (intoCgroup) {
    ca.flags |= CLONE_INTO_CGROUP;
    ca.cgroup = static_cast<uint64_t>(setup.cgroupDirFd);
  }
  if (vforkOk) {
    if (intoCgroup) {
      ca.flags |= CLONE_VM | CLONE_VFORK;
      ca.stack = reinterpret_cast<uint64_t>(stack.data());
      ca.stack_size = static_cast<uint64_t>(stackTop - stack.data());
      pid_t pid = clone3SharingMemory(&ca, childMain, args);
      if (pid >= 0 || !clone3Refused(errno)) return pid;
      args->prepared->joinCgroupDir = true;
    }
    return clone(childMain, stackTop, CLONE_VM | CLONE_VFORK | CLONE_PIDFD | newPid | SIGCHLD, args, pidfd);
  }
  long pid = syscall(SYS_clone3, &ca, sizeof ca);
  if (pid == 0) runChild(*args->prepared, args->sink);
  if (pid >= 0 || !clone3Refused(errno)) return static_cast<pid_t>(pid);
  args->prepared->joinCgroupDir = intoCgroup;
  // Without CLONE_VM the child runs on its own copy of `stack`.
  pid = newPid ? clone(childMain, stackTop, newPid | SIGCHLD, args) : fork();
  if (pid == 0) runChild(*args->prepared, args->sink);
  if (pid > 0) *pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  return static_cast<pid_t>(pid);
}

// What a failed child reported, as launch() and ExitInfo::setupError say it.
std::string describeFailure(const ChildFailure& failure, const LaunchSpec& spec) {
  std::string what = stepName(failure.step);
  if (failure.step == Step::kExec) what += " " + spec.argv[0];
  if (failure.step == Step::kCgroup) {
    what += failure.index < 0 ? std::string(" (cgroup.procs of the cgroup2 directory)")
                              : " " + spec.setup.cgroupProcsFiles[failure.index];
  }
  if (failure.step == Step::kReadOnly) what += std::string(" ") + kRootReadOnlyPaths[failure.index].path;
  if (failure.step == Step::kWritable) {
    what += failure.index == 0   ? " " + spec.workDir
            : failure.index == 1 ? " " + spec.setup.privateTmpDir + " at /tmp"
                                 : " " + spec.setup.keepVisibleDir + " under the private /tmp";
  }
  if (failure.step == Step::kChdir) what += " " + spec.workDir;
  if (failure.step == Step::kStdout) what += " " + spec.stdoutPath;
  if (failure.step == Step::kStderr) what += " " + spec.stderrPath;
  return what;
}

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

// The clone thread's nice level above the agent's (startOffLoop).
constexpr int kCloneThreadNiceness = 10;

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
                                  .niceness = mayLowerNiceTo(childNice_) ? kCloneThreadNiceness : 0,
                                  .name = "allot-clone"})) {
    waitForOrphans();
  }

  ~RealLauncher() override {
    // First: a clone under way finishes; its child, never handed over, is
    // killed with its result (~Started).
    clones_.reset();
    for (auto& [pid, child] : children_) poller_.cancel(child.watch);
  }

  Result<pid_t> launch(const LaunchSpec& spec, ExitCallback onExit) override {
    return spawn(spec, std::move(onExit), true);
  }

  Result<pid_t> start(const LaunchSpec& spec, ExitCallback onExit) override {
    return spawn(spec, std::move(onExit), false);
  }

  void startOffLoop(const LaunchSpec& spec, ExitCallback onExit, StartCallback onStarted) override {
    if (spec.argv.empty()) return onStarted(Error{"launch: empty argv"});
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
          auto pid = superviseStarted(std::move(started), std::move(spawned), std::move(onExit));
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
    // start(): the child's failure pipe (non-blocking) and what it ran.
    UniqueFd failurePipe;
    std::shared_ptr<const LaunchSpec> spec;
    std::optional<uint64_t> startTime;  // startOffLoop(): read off the loop
  };

  // launch() (waitForExec) and start(): see launcher.h. launch() makes the
  // clone thread's vfork-style clone (cloneUntilExec) on the caller's
  // thread: the child has exec'd or failed a step when it returns, so "no
  // such executable" is an error of launch() instead of an exit 127.
  Result<pid_t> spawn(const LaunchSpec& spec, ExitCallback onExit, bool waitForExec) {
    if (spec.argv.empty()) return Error{"launch: empty argv"};
    if (waitForExec) return superviseStarted(cloneUntilExec(spec, childNice_), nullptr, std::move(onExit));
    auto spawned = std::make_shared<const LaunchSpec>(spec);
    return superviseStarted(cloneStarted(*spawned, childNice_), spawned, std::move(onExit));
  }

  // start()'s child: cloned (on any thread; the fork-like clone3 shares
  // nothing with its parent), not yet supervised. A Started that never
  // reaches the loop (the launcher went first) kills its child.
  struct Started {
    pid_t pid = -1;
    UniqueFd pidfd;
    UniqueFd failurePipe;  // read end; the child's write end is closed on exec
    std::string error;     // the clone or the pipe failed (pid -1)
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
  static pid_t cloneWithSignalsBlocked(ChildArgs* args, int* pidfd, bool waitForExec) {
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t pid = startChild(args, pidfd, waitForExec);
    int cloneErrno = errno;
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    errno = cloneErrno;
    return pid;
  }

  // start()'s fork-like clone (no shared memory: a close-on-exec pipe
  // carries a failed step, read at the exit). Touches nothing of the
  // launcher: runs on the loop (start()) or the clone thread (startOffLoop()).
  static Started cloneStarted(const LaunchSpec& spec, int nice) {
    Started out;
    auto fail = [&](const std::string& what) {
      out.errnum = errno;
      out.error = what;
      return std::move(out);
    };
    Prepared prepared = prepare(spec, nice);
    int pipeFds[2];
    if (pipe2(pipeFds, O_CLOEXEC | O_NONBLOCK) != 0) return fail("pipe2");
    out.failurePipe = UniqueFd(pipeFds[0]);
    UniqueFd writeEnd(pipeFds[1]);
    ChildArgs args{&prepared, {}};
    args.sink.pipeFd = writeEnd.get();
    int pidfd = -1;
    pid_t pid = cloneWithSignalsBlocked(&args, &pidfd, false);
    if (pid < 0) return fail("clone3/fork for " + spec.argv[0]);
    out.pid = pid;
    out.pidfd = UniqueFd(pidfd);
    if (pidfd < 0) {
      int err = errno;
      (void)::kill(pid, SIGKILL);  // our unreaped child: its pid is not reused
      errno = err;
      out.pid = -1;
      return fail("pidfd_open for pid " + std::to_string(pid));
    }
    return out;
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
    pid_t pid = cloneWithSignalsBlocked(&args, &pidfd, true);
    if (pid < 0) {
      out.errnum = errno;
      out.error = "clone3/fork for " + spec.argv[0];
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

  // On the loop: the started child supervised, its failure pipe (start()'s
  // fork-like clone; none after a vfork-style one) kept for its exit. Its
  // pid, or why it could not be supervised (killed then).
  Result<pid_t> superviseStarted(Started started, std::shared_ptr<const LaunchSpec> spec, ExitCallback onExit) {
    if (started.pid < 0) return Error{started.error, started.errnum};
    pid_t pid = started.pid;
    UniqueFd pidfd(::fcntl(started.pidfd.get(), F_DUPFD_CLOEXEC, 0));
    if (!pidfd) return Error::fromErrno("dup pidfd of pid " + std::to_string(pid));  // ~Started kills it
    Status st = supervise(pid, std::move(pidfd), true, std::move(onExit));
    if (!st) return st.error();  // ~Started kills it
    started.pidfd.reset();       // supervised: it lives
    Child& child = children_.at(pid);
    child.failurePipe = std::move(started.failurePipe);
    child.spec = std::move(spec);
    child.startTime = started.startTime;
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
    if (child.failurePipe) {
      ChildFailure failure{};
      ssize_t n = read(child.failurePipe.get(), &failure, sizeof failure);
      if (n == static_cast<ssize_t>(sizeof failure)) {
        exit.setupError = describeFailure(failure, *child.spec) + ": " + std::strerror(failure.errnum);
      }
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
