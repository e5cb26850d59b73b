// cgroupfs: reading and writing cgroup control files, with errors that name
// the file, the value and errno (crun's habit). Also the bounded waits the
// kernel forces on us: rmdir may answer EBUSY while the last task of a
// cgroup is still being torn down.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/result.h"

namespace allot::cgroupfs {

// Files under `dir` (a fake cgroupfs in a temp dir) are created on write,
// as the kernel has them already in a real cgroup. "" turns it off.
void setFakeRoot(const std::string& dir);

Status writeFile(const std::string& path, const std::string& value);
Result<std::string> readFile(const std::string& path);
// First integer of the file ("max" reads as -1).
Result<int64_t> readInt(const std::string& path);
// Value of `key` in a "key value" file (memory.events, cpu.stat, ...).
Result<int64_t> readKey(const std::string& path, const std::string& key);
bool exists(const std::string& path);

Status makeDir(const std::string& path);
// Removes a cgroup directory, retrying EBUSY for up to ~1 s. A missing
// directory is success. `fake` (unit tests on a temp dir) removes the
// regular files inside first, as the kernel does for real cgroups.
Status removeDir(const std::string& path, bool fake);

std::vector<pid_t> procs(const std::string& dir);
// Subdirectory names of `dir` (container cgroups under the agent's root).
std::vector<std::string> subdirs(const std::string& dir);

}  // namespace allot::cgroupfs
