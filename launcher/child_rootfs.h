// The launcher child's entry into a root filesystem of its own
// (ChildSetup::rootfs, launcher.h), internal to launcher/. Everything is
// planned before the clone (planRootfs: strings, mount options, what each
// step mounts where); the child only walks the plan with syscalls.
//
// The child, in a private mount namespace of its own (slave: host mounts
// still reach it, its own never reach the host):
//   1. clones a detached mount of every host path it binds in (open_tree),
//      read-only where asked, while the host is still in view;
//   2. mounts the overlay (the image's layers read-only, lower dirs named
//      relative to the layer store so the options fit one page; above
//      them RootfsSetup::mountPointsDir when there is one) and
//      pivot_roots into it, detaching the old root: from here on every path,
//      symlinks in the image included, resolves inside the new root, so an
//      image cannot point a mount target at the host (CVE-2021-30465);
//   3. mounts its own /proc, a minimal /dev (tmpfs with null, zero, full,
//      random, urandom and tty bound from the host, devpts, a /dev/shm
//      tmpfs, the fd and stdio links), /sys read-only, a private /tmp
//      tmpfs, and attaches the detached binds;
//   4. masks the kernel paths runc masks (files under /dev/null, dirs under
//      a read-only tmpfs), makes /proc/{bus,fs,irq,sys,sysrq-trigger}
//      read-only, and chdirs to the working directory.
// A failing step exits the child with Step::kRootfs and the step's index.
#pragma once

#include <string>
#include <vector>

#include "launcher/launcher.h"

namespace allot::launch_child {

// Host paths one root may bind in (its own, plus the device nodes).
inline constexpr size_t kRootfsBindsMax = 32;

struct RootfsPlan {
  bool enabled = false;
  std::string layersDir;
  std::string mountPoint;
  std::string overlayData;  // "lowerdir=...,upperdir=...,workdir=..."
  std::string workingDir;
  struct Bind {
    std::string source;
    std::string target;  // absolute inside the root
    bool readOnly = true;
    bool directory = false;
  };
  std::vector<Bind> binds;  // at most kRootfsBindsMax, the device nodes first
};

// The plan for `setup` (disabled when setup.enabled() is false). The
// launcher checks planRootfsError() before it clones.
RootfsPlan planRootfs(const RootfsSetup& setup);

// Why `setup` cannot be entered (too many binds or layers, a mount option
// string over a page, a relative path), "" when it can.
std::string planRootfsError(const RootfsSetup& setup);

// Runs in the child (async-signal-safe calls only); the plan's strings
// are modified in place and restored (mkdir -p). Exits through `fail`
// with the step's index on error.
void enterRootfs(RootfsPlan& plan, void (*fail)(int step, void* context), void* context);

// The name of a step enterRootfs() reported.
const char* rootfsStepName(int step);

}  // namespace allot::launch_child
