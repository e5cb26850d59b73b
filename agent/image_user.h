// An image's User (OCI config: "user|uid[:group|gid]") as a run-as user,
// looked up in the image's own /etc/passwd and /etc/group, never the
// host's. Each file is read from the top-most layer holding it (a
// whiteout there hides it), opened beneath that layer's root (openat2
// RESOLVE_IN_ROOT): a layer whose /etc/passwd is a symlink cannot make
// the agent read a host file (CVE-2024-9676).
//
// As the image spec says: without a group, the user's passwd group and
// the groups that list it in /etc/group; with one, that group alone. A
// uid the image's passwd does not know runs with gid 0, as Docker does.
// Thread: any (file reads; the agent calls it on its sandbox thread).
#pragma once

#include <string>
#include <vector>

#include "agent/run_as.h"
#include "base/result.h"

namespace allot {

// How much of the image's /etc/passwd or /etc/group is read.
inline constexpr size_t kImageUserFileBytesMax = 1 << 20;

// `layerRoots`: the layers' root directories, top-most first.
Result<RunAsUser> resolveImageUser(const std::string& spec, const std::vector<std::string>& layerRoots);

}  // namespace allot
