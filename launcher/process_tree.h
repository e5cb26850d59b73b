// Process-tree kill through pidfds: signals a process and every process it
// started (descendants by parent pid and, when it leads its own session,
// every member of that session: tasks that setsid'd or double-forked and
// were re-parented keep their session), without ever signalling a recycled
// pid.
//
// The root is signalled first (right after the first /proc scan), then
// everything under it, so a root that exits when its children die (a shell
// waiting for them) still dies by the signal. Each process is signalled
// through a pidfd: the root through a pidfd the
// caller kept since it started it (Launcher::pidfdOf), every other process
// through a pidfd opened after the /proc scan and checked against the start
// time the scan saw (a pid recycled in between has another start time and
// is skipped). A pidfd always names the process it was opened for, so the
// signal reaches that process or nothing.
//
// Best effort against a tree that forks while it is being killed: the scan
// is repeated (up to kTreeKillRoundsMax rounds) until a round finds nobody
// new. Containment that holds whatever a task does is the executor's cgroup
// (isolators/); this is the kill that needs no cgroup.
//
// Blocking (reads /proc): call it on a worker pool, not on a daemon's loop.
// Thread: any.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace allot {

inline constexpr int kTreeKillRoundsMax = 4;

// Signals the process `root` (through `rootPidfd`, a pidfd of it) and every
// process below it with `sig`. Returns how many processes were signalled.
size_t killProcessTree(int rootPidfd, pid_t root, int sig = SIGKILL);

// The same for a process the caller holds no pidfd of (test clean-up, a
// process found by pid): the root's pidfd is opened here, so a root that is
// already gone (or recycled since the caller learned its pid) is reported
// as 0 signalled only if the caller passes the start time it knew.
size_t killProcessTree(pid_t root, std::optional<uint64_t> rootStartTime = std::nullopt, int sig = SIGKILL);

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot), or
// nullopt when there is no such process.
std::optional<uint64_t> processStartTimeOf(pid_t pid);

// Signals `pid` only if it is still the process that started at
// `startTime`: opens a pidfd, then checks the start time. False when it was
// not signalled (gone, recycled, or not ours to signal).
bool signalIfSame(pid_t pid, uint64_t startTime, int sig);

}  // namespace allot
