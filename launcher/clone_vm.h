// clone3 for a child that shares its parent's memory until it execs or
// exits: what glibc's clone() does for posix_spawn (CLONE_VM |
// CLONE_VFORK), but through clone3, which alone takes CLONE_INTO_CGROUP
// (the child is born in a cgroup2 directory: no cgroup.procs write, no
// page tables copied). glibc 2.36 has no clone3 wrapper, and syscall()
// cannot be used for it: the child would return from syscall() on a new
// stack, with no frame to return to. Internal to the launcher.
#pragma once

#include <linux/sched.h>
#include <sys/types.h>

namespace allot {

// Runs fn(arg) in the child on the stack `args` names (stack, stack_size;
// the kernel starts the child at stack + stack_size, which must be 16-byte
// aligned) and exits the child with fn's result; fn must not return into
// anything else. `args->flags` must hold CLONE_VM and CLONE_VFORK. Returns
// the child's pid in the parent (once the child has exec'd or exited), or
// -1 with errno: the kernel's answer, or ENOSYS on an architecture without
// an implementation here (x86-64 only so far).
pid_t clone3SharingMemory(clone_args* args, int (*fn)(void*), void* arg);

}  // namespace allot
