#include "cli/task_root.h"

#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <string>

#include "launcher/launcher.h"
#include "launcher/rootfs_env.h"

namespace allot {

namespace {

// Steps past enterRootfs's own (launcher/child_rootfs.cpp numbers them
// from 0 up, well below this).
constexpr int kJoinStep = 90;
constexpr int kWorkingDirStep = 91;
constexpr int kUserStep = 92;
constexpr int kCapsStep = 93;
constexpr int kSeccompStep = 94;

Result<std::vector<char>> parseHex(const std::string& text) {
  if (text.size() % 16 != 0 || text.size() / 2 > kTaskSeccompBytesMax)
    return Error{std::string(kTaskSeccompEnv) + ": not a BPF program"};
  std::vector<char> out;
  for (size_t i = 0; i < text.size(); i += 2) {
    char* end = nullptr;
    std::string pair = text.substr(i, 2);
    long b = std::strtol(pair.c_str(), &end, 16);
    if (*end != '\0') return Error{std::string(kTaskSeccompEnv) + ": not hex"};
    out.push_back(static_cast<char>(b));
  }
  return out;
}

void installSeccomp(const std::vector<char>& bpf, void (*fail)(int, void*), void* context) {
  if (bpf.empty()) return;
  sock_fprog program{static_cast<unsigned short>(bpf.size() / sizeof(sock_filter)),
                     reinterpret_cast<sock_filter*>(const_cast<char*>(bpf.data()))};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0)
    fail(kTaskRootStepBase + kSeccompStep, context);
}

Result<TaskRoot> parseUser(const std::string& text, TaskRoot root) {
  std::istringstream in(text);
  std::string uid, gid, groups;
  if (!std::getline(in, uid, ':') || !std::getline(in, gid, ':')) return Error{std::string(kTaskUserEnv) + ": bad value"};
  std::getline(in, groups);
  char* end = nullptr;
  root.uid = static_cast<int>(std::strtol(uid.c_str(), &end, 10));
  if (*end != '\0' || root.uid < 0) return Error{std::string(kTaskUserEnv) + ": bad uid"};
  root.gid = static_cast<int>(std::strtol(gid.c_str(), &end, 10));
  if (*end != '\0' || root.gid < 0) return Error{std::string(kTaskUserEnv) + ": bad gid"};
  std::istringstream list(groups);
  std::string g;
  while (std::getline(list, g, ',') && root.groups.size() < NGROUPS_MAX)
    if (!g.empty()) root.groups.push_back(static_cast<gid_t>(std::strtoul(g.c_str(), nullptr, 10)));
  return root;
}

// A root task keeps only a confined root's capabilities: the bounding set
// first (PR_CAPBSET_DROP needs CAP_SETPCAP), then effective and permitted.
void confineRootCapabilities(void (*fail)(int, void*), void* context) {
  for (int cap = 0; cap < 64; ++cap) {
    if (kRootTaskCapabilities >> cap & 1) continue;
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) fail(kTaskRootStepBase + kCapsStep, context);
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; ++i)
    data[i].permitted = data[i].effective = static_cast<uint32_t>(kRootTaskCapabilities >> (32 * i));
  if (syscall(SYS_capset, &header, data) != 0) fail(kTaskRootStepBase + kCapsStep, context);
}

struct RootfsFail {
  void (*fail)(int, void*);
  void* context;
};

void rootfsFail(int step, void* context) {
  auto* f = static_cast<RootfsFail*>(context);
  f->fail(kTaskRootStepBase + step, f->context);
}

}  // namespace

Result<std::optional<TaskRoot>> taskRootFromEnvironment() {
  const char* plan = std::getenv(kRootfsEnv);
  const char* user = std::getenv(kTaskUserEnv);
  const char* seccomp = std::getenv(kTaskSeccompEnv);
  std::string planText = plan ? plan : "", userText = user ? user : "", seccompText = seccomp ? seccomp : "";
  unsetenv(kRootfsEnv);
  unsetenv(kTaskUserEnv);
  unsetenv(kTaskSeccompEnv);
  if (planText.empty()) return std::optional<TaskRoot>();
  Result<RootfsSetup> setup = decodeRootfs(planText);
  if (!setup) return setup.error();
  if (std::string why = launch_child::planRootfsError(*setup); !why.empty()) return Error{why};
  TaskRoot root;
  root.plan = launch_child::planRootfs(*setup);
  if (!seccompText.empty()) {
    Result<std::vector<char>> bpf = parseHex(seccompText);
    if (!bpf) return bpf.error();
    root.seccompBpf = std::move(*bpf);
  }
  if (userText.empty()) return std::optional<TaskRoot>(std::move(root));
  Result<TaskRoot> withUser = parseUser(userText, std::move(root));
  if (!withUser) return withUser.error();
  return std::optional<TaskRoot>(std::move(*withUser));
}

void enterTaskRoot(TaskRoot& root, int mntNsFd, void (*fail)(int, void*), void* context) {
  if (mntNsFd < 0) {
    RootfsFail f{fail, context};
    launch_child::enterRootfs(root.plan, rootfsFail, &f);
  } else {
    if (setns(mntNsFd, CLONE_NEWNS) != 0) fail(kTaskRootStepBase + kJoinStep, context);
    if (chdir(root.plan.workingDir.c_str()) != 0) fail(kTaskRootStepBase + kWorkingDirStep, context);
  }
  if (root.uid >= 0 && (setgroups(root.groups.size(), root.groups.data()) != 0 || setgid(root.gid) != 0))
    fail(kTaskRootStepBase + kUserStep, context);
  if (root.uid <= 0) {
    confineRootCapabilities(fail, context);
  } else if (setuid(root.uid) != 0) {
    fail(kTaskRootStepBase + kUserStep, context);
  }
  installSeccomp(root.seccompBpf, fail, context);
}

const char* taskRootStepName(int step) {
  switch (step - kTaskRootStepBase) {
    case kJoinStep: return "join the task's mount namespace";
    case kWorkingDirStep: return "chdir to the task's working directory";
    case kUserStep: return "switch to the run-as user";
    case kCapsStep: return "drop capabilities";
    case kSeccompStep: return "install the seccomp filter";
    default: return launch_child::rootfsStepName(step - kTaskRootStepBase);
  }
}

}  // namespace allot
