#include "agent/run_as.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

namespace allot {

Result<RunAsUser> resolveUser(const std::string& name) {
  if (name.empty()) return Error{"empty run-as user name"};
  long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(hint > 0 ? static_cast<size_t>(hint) : 16384);
  passwd pw{};
  passwd* found = nullptr;
  int rc;
  // ERANGE: the entry does not fit; grow the buffer (bounded).
  while ((rc = getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found)) == ERANGE &&
         buf.size() < (1u << 20)) {
    buf.resize(buf.size() * 2);
  }
  if (rc != 0) return Error{"looking up run-as user '" + name + "'", rc};
  if (!found) return Error{"run-as user '" + name + "' does not exist on this agent"};
  RunAsUser user;
  user.name = name;
  user.uid = pw.pw_uid;
  user.gid = pw.pw_gid;
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  if (getgrouplist(name.c_str(), pw.pw_gid, groups.data(), &count) < 0) {
    if (count <= 0 || static_cast<size_t>(count) > kRunAsGroupsMax) {
      return Error{"run-as user '" + name + "' is in " + std::to_string(count) + " groups (limit " +
                   std::to_string(kRunAsGroupsMax) + ")"};
    }
    groups.resize(static_cast<size_t>(count));
    if (getgrouplist(name.c_str(), pw.pw_gid, groups.data(), &count) < 0) {
      return Error{"listing the groups of run-as user '" + name + "' failed"};
    }
  }
  groups.resize(static_cast<size_t>(count));
  user.groups = std::move(groups);
  return user;
}

std::string runAsName(const std::string& executorUser, const std::string& taskUser,
                      const std::string& frameworkUser, const std::string& defaultUser) {
  if (!executorUser.empty()) return executorUser;
  if (!taskUser.empty()) return taskUser;
  if (!frameworkUser.empty()) return frameworkUser;
  return defaultUser;
}

Status checkSearchableByOthers(const std::string& dir) {
  std::filesystem::path p = std::filesystem::absolute(dir);
  for (; !p.empty(); p = p.parent_path()) {
    struct stat st{};
    if (::stat(p.c_str(), &st) != 0) return Error::fromErrno("stat " + p.string());
    if (!(st.st_mode & S_IXOTH)) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
      return Error{p.string() + " (mode " + mode + ") cannot be searched by other users, so executors "
                   "running as unprivileged users cannot reach their sandboxes and the executor socket "
                   "below it; make it at least 0711 or choose another --work-dir"};
    }
    if (p == p.root_path()) break;
  }
  return okStatus();
}

}  // namespace allot
