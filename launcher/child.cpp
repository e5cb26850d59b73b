#include "launcher/child.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <csignal>
#include <cstring>

#include "launcher/clone_vm.h"

namespace allot::launch_child {
namespace {

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
    case Step::kRootfs: return "enter the root filesystem";
  }
  return "setup";
}


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


int readCapLastCap() {
  int last = CAP_LAST_CAP;
  if (FILE* f = std::fopen("/proc/sys/kernel/cap_last_cap", "re")) {
    if (std::fscanf(f, "%d", &last) != 1) last = CAP_LAST_CAP;
    std::fclose(f);
  }
  return last;
}

// A private /tmp hides what lies under the host's /tmp: the agent's work
// dir (its executor socket) and the program itself (an executor installed or
// built under /tmp) are bound back at their own paths, read-only like the
// rest of the host. A program inside the kept directory needs no bind.
void keepVisible(const LaunchSpec& spec, Prepared& p) {
  if (!spec.setup.confineRoot || spec.setup.privateTmpDir.empty()) return;
  auto underTmp = [](const std::string& path) { return path.rfind("/tmp/", 0) == 0; };
  const std::string& dir = spec.setup.keepVisibleDir;
  if (underTmp(dir)) p.kept.push_back({dir, false, 2});
  const std::string program = spec.argv.empty() ? "" : spec.argv[0];
  bool inDir = !dir.empty() && program.rfind(dir + "/", 0) == 0;
  if (underTmp(program) && !inDir) p.kept.push_back({program, true, 3});
}

}  // namespace

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
  keepVisible(spec, p);
  p.rootfs = planRootfs(spec.setup.rootfs);
  return p;
}

namespace {

[[noreturn]] void childFail(const FailureSink& sink, Step step, int index = 0) {
  *sink.shared = ChildFailure{step, errno, index};
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

// Attaches a kept tree at its own path inside the private /tmp: the
// directories above it, and an empty file to mount a file on.
void attachKept(Prepared::KeptPath& kept, int tree, const FailureSink& sink) {
  char* path = kept.path.data();
  if (kept.file) {
    char* slash = std::strrchr(path, '/');
    *slash = '\0';
    makeDirs(path);
    *slash = '/';
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
    if (fd >= 0) close(fd);
  } else {
    makeDirs(path);
  }
  if (move_mount(tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) != 0) {
    childFail(sink, Step::kWritable, kept.failureIndex);
  }
  close(tree);
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
  int keptTrees[kMaxKeptPaths];
  size_t kept = tmp.empty() ? 0 : std::min(p.kept.size(), kMaxKeptPaths);
  for (size_t i = 0; i < kept; ++i) {
    unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (p.kept[i].file ? 0 : AT_RECURSIVE);
    keptTrees[i] = open_tree(AT_FDCWD, p.kept[i].path.c_str(), flags);
    if (keptTrees[i] < 0) childFail(sink, Step::kWritable, p.kept[i].failureIndex);
  }
  if (!tmp.empty()) {
    int tmpTree = writableTree(tmp.c_str(), 1, sink);
    if (move_mount(tmpTree, "", AT_FDCWD, "/tmp", MOVE_MOUNT_F_EMPTY_PATH) != 0) childFail(sink, Step::kWritable, 1);
    close(tmpTree);
  }
  for (size_t i = 0; i < kept; ++i) attachKept(p.kept[i], keptTrees[i], sink);
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

// The parent blocked every signal around clone. Ignored signals would
// stay ignored across exec (the agent ignores SIGPIPE), and a caught one
// would run the agent's handler in this child (it shares the agent's
// memory until exec): both go back to SIG_DFL before the mask is cleared.
// Then the loop's nice value and a session of its own.
void resetInherited(Prepared& p, const FailureSink& sink) {
  for (int sig : p.nonDefaultSignals) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, nullptr) != 0) childFail(sink, Step::kSignals);
  // A child of the clone thread inherits its nice value: executors and
  // their tasks would all run niced. Before setuid, which could take away
  // the right to lower it (the launcher niced that thread only with it).
  if (setpriority(PRIO_PROCESS, 0, p.nice) != 0) childFail(sink, Step::kNice);
  if (setsid() < 0) childFail(sink, Step::kSetsid);
}

// stdin from /dev/null, stdout and stderr to their files, the working
// directory.
void setUpFiles(const LaunchSpec& spec, const FailureSink& sink) {
  int in = open("/dev/null", O_RDONLY);
  if (in < 0 || dup2(in, 0) < 0) childFail(sink, Step::kStdin);
  int out = openOutput(spec.stdoutPath);
  if (out < 0 || dup2(out, 1) < 0) childFail(sink, Step::kStdout);
  int err = openOutput(spec.stderrPath);
  if (err < 0 || dup2(err, 2) < 0) childFail(sink, Step::kStderr);
  if (!spec.workDir.empty() && chdir(spec.workDir.c_str()) != 0) childFail(sink, Step::kChdir);
}

// The cgroups the child joins by a write of its pid (the v2 directory when
// the clone could not put it there itself; v1 cgroup.procs files).
void joinCgroups(Prepared& p, const FailureSink& sink) {
  const ChildSetup& setup = p.spec->setup;
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
}

// Runs in the child between clone and exec: async-signal-safe calls only.
[[noreturn]] void runChild(Prepared& p, const FailureSink& sink) {
  const LaunchSpec& spec = *p.spec;
  const ChildSetup& setup = spec.setup;
  resetInherited(p, sink);
  setUpFiles(spec, sink);
  joinCgroups(p, sink);
  if (setup.netnsFd >= 0 && setns(setup.netnsFd, CLONE_NEWNET) != 0) childFail(sink, Step::kNetns);
  bool confine = setup.confineRoot && !setup.dropCapabilities;
  uint64_t keep = confine ? kRootTaskCapabilities : 0;
  if (p.rootfs.enabled) {
    FailureSink rootfsSink = sink;
    enterRootfs(p.rootfs, [](int step, void* c) { childFail(*static_cast<FailureSink*>(c), Step::kRootfs, step); },
                &rootfsSink);
  } else if (confine || newPidNamespace(setup)) {
    setUpMountNamespace(p, confine, newPidNamespace(setup), sink);
  }
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


int childMain(void* arg) {
  auto* a = static_cast<ChildArgs*>(arg);
  runChild(*a->prepared, a->sink);
}

// clone3 said it cannot do what was asked: no clone3 (ENOSYS, before Linux
// 5.3, or a seccomp filter's answer), no CLONE_INTO_CGROUP (E2BIG, 5.3-5.6)
// or refused by a filter (EPERM). The fallbacks then join the cgroup2
// directory by a cgroup.procs write in the child.
bool clone3Refused(int err) { return err == ENOSYS || err == E2BIG || err == EPERM; }

}  // namespace

// Starts the child with a pidfd, by a vfork-style clone (CLONE_VM |
// CLONE_VFORK, as posix_spawn does: no page tables copied, the parent
// resumes once the child has exec'd or failed), through clone3 with
// CLONE_INTO_CGROUP when a cgroup2 directory is given, else glibc's
// clone(). Where clone3 is refused, glibc's clone(), and the child writes
// its pid into the cgroup2 directory. The child of CLONE_NEWPID is pid 1
// of the new namespace; clone returns its pid in ours.
pid_t startChild(ChildArgs* args, int* pidfd) {
  const ChildSetup& setup = args->prepared->spec->setup;
  const int newPid = newPidNamespace(setup) ? CLONE_NEWPID : 0;
  constexpr size_t kStackBytes = 256 * 1024;
  static thread_local std::vector<char> stack(kStackBytes);
  // The child's stack pointer starts at its top: 16-byte aligned.
  char* stackTop = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(stack.data()) + stack.size()) & ~uintptr_t{15});
  if (setup.cgroupDirFd >= 0) {
    clone_args ca{};
    ca.flags = CLONE_PIDFD | CLONE_INTO_CGROUP | CLONE_VM | CLONE_VFORK | static_cast<uint64_t>(newPid);
    ca.pidfd = reinterpret_cast<uint64_t>(pidfd);
    ca.exit_signal = SIGCHLD;
    ca.cgroup = static_cast<uint64_t>(setup.cgroupDirFd);
    ca.stack = reinterpret_cast<uint64_t>(stack.data());
    ca.stack_size = static_cast<uint64_t>(stackTop - stack.data());
    pid_t pid = clone3SharingMemory(&ca, childMain, args);
    if (pid >= 0 || !clone3Refused(errno)) return pid;
    args->prepared->joinCgroupDir = true;
  }
  return clone(childMain, stackTop, CLONE_VM | CLONE_VFORK | CLONE_PIDFD | newPid | SIGCHLD, args, pidfd);
}


// What a failed child reported, as launch() and startOffLoop() say it.
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
            : failure.index == 2 ? " " + spec.setup.keepVisibleDir + " under the private /tmp"
                                 : " " + spec.argv[0] + " (the program) under the private /tmp";
  }
  if (failure.step == Step::kChdir) what += " " + spec.workDir;
  if (failure.step == Step::kRootfs) what += std::string(": ") + rootfsStepName(failure.index);
  if (failure.step == Step::kStdout) what += " " + spec.stdoutPath;
  if (failure.step == Step::kStderr) what += " " + spec.stderrPath;
  return what;
}

}  // namespace allot::launch_child
