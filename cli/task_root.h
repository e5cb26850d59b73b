// How the built-in executor starts a task inside its image's root
// filesystem. The executor itself stays on the node's filesystem (it is
// dynamically linked, and reaches the agent's socket there); the agent
// gives it the root's plan (ALLOT_ROOTFS, launcher/rootfs_env.h) and the
// tasks' run-as user (ALLOT_TASK_USER "uid:gid:g1,g2,..."), and runs it
// as root so that each task child can mount the root and then switch user:
//   task child:    enterRootfs (own mount namespace, overlay, pivot_root,
//                  /proc, /dev, /sys, masks, binds) and chdir
//   its checks:    setns into the task's mount namespace, chdir
//   then both:     the run-as user (setgroups, setgid, setuid), or for uid 0
//                  the capabilities of a confined root task only
//                  (kRootTaskCapabilities); last the seccomp filter the
//                  agent moved from the executor to its tasks
//                  (ALLOT_TASK_SECCOMP, hex of the BPF program).
// Thread: taskRootFromEnvironment() before the executor's loop runs;
// enterTaskRoot() in a forked child only (async-signal-safe calls).
#pragma once

#include <sys/types.h>

#include <optional>
#include <vector>

#include "base/result.h"
#include "launcher/child_rootfs.h"

namespace allot {

inline constexpr const char* kTaskUserEnv = "ALLOT_TASK_USER";
inline constexpr const char* kTaskSeccompEnv = "ALLOT_TASK_SECCOMP";
// BPF_MAXINSNS (4096) instructions of 8 bytes.
inline constexpr size_t kTaskSeccompBytesMax = 4096 * 8;

struct TaskRoot {
  launch_child::RootfsPlan plan;
  int uid = -1;  // -1: stay root
  int gid = -1;
  std::vector<gid_t> groups;
  std::vector<char> seccompBpf;  // struct sock_filter array; empty: none
};

// The root the executor's tasks enter, nullopt when it has none; both
// variables are removed from the environment (the tasks never see them).
Result<std::optional<TaskRoot>> taskRootFromEnvironment();

// In the task's (mntNsFd < 0) or a check's (the task's mount namespace)
// child: enters the root, then switches user. Calls fail(step) on error,
// which must not return; stepName() names the step.
void enterTaskRoot(TaskRoot& root, int mntNsFd, void (*fail)(int step, void* context), void* context);

// Steps enterTaskRoot() reports are at or above this.
inline constexpr int kTaskRootStepBase = 100;
const char* taskRootStepName(int step);

}  // namespace allot
