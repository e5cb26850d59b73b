// Files: the one place that turns ids into file names and writes files
// atomically. Everything the agent names after a framework or executor id
// (sandboxes, checkpoints, cgroups, update logs) goes through escapeId() or
// containerName(); every "write a temp file, rename it over" goes through
// writeFileAtomically().
//
// Thread: every function may be called from any thread (no shared state).
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "base/result.h"

namespace allot {

// Longest name containerName() returns: leaves room under NAME_MAX (255)
// for the suffixes added to it (".<ms>" of a sandbox, ".0"/".1" and
// ".corrupt" of a checkpoint, a prefix such as "allot.").
inline constexpr size_t kContainerNameBytesMax = 200;

// A file-name-safe spelling of an id: [A-Za-z0-9_-] kept, every other byte
// (also '.', '%' and '/') as %XX (upper-case hex); the empty id is "%".
// Injective, never contains '.', never "." or ".." or hidden; at most 3
// bytes per input byte.
std::string escapeId(std::string_view id);

// The one name of the container of a (framework id, executor id) pair:
// escapeId(framework) + "." + escapeId(executor). Since escapeId() never
// emits '.', the pair is recovered from the name: distinct pairs never
// share a name. When that spelling would exceed kContainerNameBytesMax, the
// name is its first 120 bytes, '~', and the SHA-256 (hex) of the whole
// spelling: '~' appears in no short name, and two long names collide only
// if SHA-256 does. Stable across versions from this one on.
std::string containerName(std::string_view frameworkId, std::string_view executorId);

// The file in its executor's sandbox where the command executor writes a
// command task's `stream` ("stdout" or "stderr"): the task id with '/' and
// NUL as '_' (and '_' before a leading '.'), then "." and the stream.
std::string taskOutputFile(std::string_view taskId, std::string_view stream);

// Writes `data` to `path` atomically: `path`.tmp is written (mode `mode`),
// fdatasync'd when `durable`, and renamed over `path`; when `durable` the
// directory is fsync'd too so the rename itself survives a node crash.
// Without `durable` a crash of the process still leaves the old or the new
// file; only a crash of the node may lose the new one. On error the temp
// file is removed and `path` is untouched.
Status writeFileAtomically(const std::string& path, std::string_view data, bool durable = true,
                           mode_t mode = 0600);

// Writes all of `data` to `fd` (retrying short writes and EINTR); the error
// names `path`.
Status writeAll(int fd, std::string_view data, const std::string& path);

// Raises RLIMIT_NOFILE's soft limit to `wanted` (root lifts the hard limit
// too, up to fs.nr_open); when that is refused, to the hard limit. Returns
// the soft limit in force afterwards (0 when it cannot be read).
rlim_t raiseFileLimit(rlim_t wanted);

}  // namespace allot
