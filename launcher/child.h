// The launcher's child side (internal to launcher/): what a child does
// between clone and exec, and how it is cloned. Everything the child needs
// is prepared before the clone (prepare()), so that the child makes only
// async-signal-safe calls; a step that fails is reported through a
// FailureSink (the parent's memory, which the vfork-style child shares)
// and named by describeFailure().
// Thread: any; a Prepared and its ChildArgs belong to the thread that
// clones with them.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/child_rootfs.h"
#include "launcher/launcher.h"

namespace allot::launch_child {

// What the child reports when a step fails.
enum class Step : int {
  kSignals = 1, kSetsid, kStdin, kStdout, kStderr, kChdir, kCgroup, kNetns,
  kSetgroups, kSetgid, kSetuid, kNoNewPrivs, kSeccomp, kExec, kCapBound, kCaps,
  kMountNs, kCgroupNs, kReadOnly, kReadOnlyHost, kMountProc, kWritable, kShm, kNice, kRootfs,
};

struct ChildFailure {
  Step step;
  int errnum;
  int index;  // which cgroup file (kCgroup), read-only path (kReadOnly), writable bind (kWritable) or rootfs step (kRootfs)
};

// Everything the child needs, prepared before clone so the child only
// makes async-signal-safe calls.
constexpr size_t kMaxKeptPaths = 2;

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
  // What a confined root task keeps seeing (read-only, at its own path)
  // below its private /tmp: setup.keepVisibleDir and the program it execs
  // (argv[0]) when they lie under /tmp, at most kMaxKeptPaths.
  struct KeptPath {
    std::string path;
    bool file = false;  // a bind of one file (the program), else a directory tree
    int failureIndex = 0;  // ChildFailure::index for kWritable
  };
  std::vector<KeptPath> kept;
  // The nice value the child takes before anything else: the launcher's
  // creator's (the loop's), not the niced clone thread's it would inherit.
  int nice = 0;
  RootfsPlan rootfs;  // setup.rootfs, planned (child_rootfs.h)
  char pidText[24] = {};
};

// Copies what the child needs out of `spec` (which must outlive the
// Prepared); `nice` is the nice value the child takes first.
Prepared prepare(const LaunchSpec& spec, int nice);

// Where the child reports a failed step: straight into the parent's memory,
// which it shares (the vfork-style clone: the parent reads it once clone
// returns, with no extra wake-up).
struct FailureSink {
  ChildFailure* shared = nullptr;
};

// What childMain gets: the clone passes one pointer.
struct ChildArgs {
  Prepared* prepared;
  FailureSink sink;
};

// Starts the child with a pidfd by a vfork-style clone (see child.cpp): it
// returns once the child has exec'd or failed a step. Returns its pid, or
// -1 with errno set.
pid_t startChild(ChildArgs* args, int* pidfd);

// What a failed child reported, as launch() and startOffLoop() say it.
std::string describeFailure(const ChildFailure& failure, const LaunchSpec& spec);

}  // namespace allot::launch_child
