// Run-as users: who an executor and its tasks run as, resolved at the agent
// (getpwnam_r, getgrouplist) before the launch, so the launcher's child
// only copies numbers into setgroups/setgid/setuid.
//
// Which user (docs/architecture.md, "Tasks run unprivileged"):
//   the executor's CommandInfo.user, else the task's CommandInfo.user (a
//   command task), else FrameworkInfo.user, else the agent's --default-user
//   (default `nobody`). A user the framework names that is root (uid 0) runs
//   only when the master's RunTask says its ACLs allowed it
//   (RunTask.allow_root); the operator's own --default-user may be root.
// Thread: any (the lookups may block on NSS; the agent calls them on its
// loop once per new executor).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/result.h"

namespace allot {

struct RunAsUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups, the primary one included
  bool isRoot() const { return uid == 0; }
};

// Bounds the supplementary groups copied into a child (NGROUPS_MAX is 65536).
inline constexpr size_t kRunAsGroupsMax = 1024;

// Looks `name` up in the user database. An unknown name is an Error that
// says so ("run-as user 'x' does not exist on this agent").
Result<RunAsUser> resolveUser(const std::string& name);

// The effective user name for an executor, by the precedence above (empty
// when nothing names one and there is no default).
std::string runAsName(const std::string& executorUser, const std::string& taskUser,
                      const std::string& frameworkUser, const std::string& defaultUser);

// Checks that `dir` and every directory above it can be searched by users
// other than their owners (the run-as users must reach their sandbox and
// the executor socket below it). The Error names the first that cannot.
Status checkSearchableByOthers(const std::string& dir);

}  // namespace allot
