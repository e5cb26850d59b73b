// filesystem/linux: each executor in a root filesystem of its own, made
// from its image's layers in the agent's layer store (images/layer_store.h):
// the layers read-only and shared, under a writable layer of the executor
// at <rootfsDir>/<container>/upper, entered by the launcher's child
// (ChildSetup::rootfs, launcher/child_rootfs.h). Inside the root the
// sandbox is at kRootfsSandbox (ALLOT_SANDBOX says so), volumes where the
// task asked, and the host paths every executor needs (hostBinds: the
// executor's files, the agent's socket) read-only. The built-in executor
// (ContainerConfig::rootForTasksOnly) stays on the node's filesystem: the
// plan goes in its environment (ALLOT_ROOTFS, launcher/rootfs_env.h) and
// each of its tasks enters the root, without the host binds.
//
// A container whose config names no image layers keeps the host's
// filesystem: this isolator does nothing for it. Layers are held in the
// store from prepare() (or recover()) to cleanup(), so eviction never
// takes a layer a running executor stands on. Volumes: an absolute host
// path must be at or below one of the operator's allowed paths (after
// resolving symlinks); a relative one is a directory in the sandbox
// (made if missing); neither may contain "..".
//
// Thread: the agent's loop (the reap job removes the writable layer off it).
#pragma once

#include <memory>

#include "base/result.h"
#include "isolators/isolator.h"

namespace allot {

// Where the sandbox appears inside a root filesystem.
inline constexpr const char* kRootfsSandbox = "/mnt/sandbox";
// Volumes one executor may ask for.
inline constexpr size_t kVolumesMax = 16;

Result<std::unique_ptr<Isolator>> makeFilesystemIsolator(const IsolatorOptions& options);

}  // namespace allot
