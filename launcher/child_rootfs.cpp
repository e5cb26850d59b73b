#include "launcher/child_rootfs.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace allot::launch_child {

namespace {

enum RootfsStep : int {
  kUnshare, kSlave, kOpenTree, kBindAttr, kLayersDir, kOverlay, kPivot, kDetachOld, kProc, kDev,
  kDevPts, kShm, kDevLinks, kSys, kTmp, kBindTarget, kBindAttach, kMask, kReadOnlyProc, kWorkingDir,
  kStepCount,
};

constexpr const char* kStepNames[kStepCount] = {
    "unshare a mount namespace", "make the host's mounts slaves", "clone a host path to bind in (open_tree)",
    "set a bind's mount attributes", "chdir to the layer store", "mount the overlay",
    "pivot_root into the new root", "detach the old root", "mount /proc", "mount /dev", "mount /dev/pts",
    "mount /dev/shm", "make the /dev links", "mount /sys read-only", "mount /tmp",
    "make a bind's target", "attach a bind (move_mount)", "mask a kernel path", "make a /proc path read-only",
    "chdir to the working directory"};

// Host device nodes a root gets (runc's default devices, /dev/console aside).
constexpr const char* kDevices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};

// runc's masked paths, and moby's additions since.
constexpr const char* kMaskedPaths[] = {
    "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
    "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/proc/interrupts", "/sys/firmware",
    "/sys/devices/virtual/powercap"};
constexpr const char* kReadOnlyProcPaths[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"};

// A page, less room the kernel's own option parsing may add.
constexpr size_t kMountDataBytesMax = 4096 - 512;

bool absolute(const std::string& path) { return !path.empty() && path.front() == '/'; }

std::string overlayData(const RootfsSetup& setup) {
  std::string lower = setup.mountPointsDir;
  for (const std::string& dir : setup.lowerDirs) lower += (lower.empty() ? "" : ":") + dir;
  return "lowerdir=" + lower + ",upperdir=" + setup.upperDir + ",workdir=" + setup.workDir;
}

struct Fail {
  void (*fn)(int, void*);
  void* context;
  [[noreturn]] void operator()(int step) const {
    fn(step, context);
    _exit(127);
  }
};

// mkdir -p of the parents of `path` (absolute, inside the current root);
// the buffer is restored.
void makeParents(char* path) {
  char* last = std::strrchr(path, '/');
  for (char* slash = std::strchr(path + 1, '/'); slash != nullptr && slash <= last; slash = std::strchr(slash + 1, '/')) {
    *slash = '\0';
    mkdir(path, 0755);
    *slash = '/';
  }
}

void mountAt(const char* source, const char* target, const char* type, unsigned long flags, const char* data,
             int step, const Fail& fail) {
  mkdir(target, 0755);
  if (mount(source, target, type, flags, data) != 0) fail(step);
}

// Step 1: detached clones of the host paths, attributes set while detached.
void cloneBinds(RootfsPlan& plan, int* trees, const Fail& fail) {
  for (size_t i = 0; i < plan.binds.size(); ++i) {
    const RootfsPlan::Bind& bind = plan.binds[i];
    trees[i] = open_tree(AT_FDCWD, bind.source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                            (bind.directory ? AT_RECURSIVE : 0));
    if (trees[i] < 0) fail(kOpenTree);
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_NOSUID | (bind.readOnly ? MOUNT_ATTR_RDONLY : 0) |
                    (std::strncmp(bind.target.c_str(), "/dev/", 5) == 0 ? 0 : MOUNT_ATTR_NODEV);
    if (syscall(SYS_mount_setattr, trees[i], "", AT_EMPTY_PATH | (bind.directory ? AT_RECURSIVE : 0), &attr,
                sizeof attr) != 0)
      fail(kBindAttr);
  }
}

// Step 2: the overlay, then pivot_root into it (no put_old directory:
// pivot_root(".", ".") stacks the old root on the new one; detaching it
// leaves only the new).
void pivotIntoOverlay(RootfsPlan& plan, const Fail& fail) {
  if (chdir(plan.layersDir.c_str()) != 0) fail(kLayersDir);
  if (mount("overlay", plan.mountPoint.c_str(), "overlay", MS_NODEV, plan.overlayData.c_str()) != 0) fail(kOverlay);
  if (chdir(plan.mountPoint.c_str()) != 0) fail(kPivot);
  if (syscall(SYS_pivot_root, ".", ".") != 0) fail(kPivot);
  if (umount2(".", MNT_DETACH) != 0) fail(kDetachOld);
  if (chdir("/") != 0) fail(kDetachOld);
}

// Step 3: the kernel file systems and /dev of the new root.
void mountBasics(const Fail& fail) {
  mountAt("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr, kProc, fail);
  mountAt("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_STRICTATIME, "mode=755,size=65536k", kDev, fail);
  mountAt("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620", kDevPts, fail);
  mountAt("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=65536k", kShm, fail);
  if (symlink("pts/ptmx", "/dev/ptmx") != 0 || symlink("/proc/self/fd", "/dev/fd") != 0 ||
      symlink("/proc/self/fd/0", "/dev/stdin") != 0 || symlink("/proc/self/fd/1", "/dev/stdout") != 0 ||
      symlink("/proc/self/fd/2", "/dev/stderr") != 0)
    fail(kDevLinks);
  mountAt("sysfs", "/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr, kSys, fail);
  mountAt("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", kTmp, fail);
}

void attachBinds(RootfsPlan& plan, const int* trees, const Fail& fail) {
  for (size_t i = 0; i < plan.binds.size(); ++i) {
    RootfsPlan::Bind& bind = plan.binds[i];
    makeParents(bind.target.data());
    if (bind.directory) {
      if (mkdir(bind.target.c_str(), 0755) != 0 && errno != EEXIST) fail(kBindTarget);
    } else if (access(bind.target.c_str(), F_OK) != 0) {
      // Only when missing: opening a lower layer's file to write copies it up.
      int fd = open(bind.target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0 && errno != EISDIR) fail(kBindTarget);
      if (fd >= 0) close(fd);
    }
    if (move_mount(trees[i], "", AT_FDCWD, bind.target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) fail(kBindAttach);
    close(trees[i]);
  }
}

// Step 4: what a task must not read or write in /proc and /sys.
void maskKernelPaths(const Fail& fail) {
  for (const char* path : kMaskedPaths) {
    struct stat st;
    if (lstat(path, &st) != 0) continue;
    int r = S_ISDIR(st.st_mode) ? mount("tmpfs", path, "tmpfs", MS_RDONLY, "size=0")
                                : mount("/dev/null", path, nullptr, MS_BIND, nullptr);
    if (r != 0) fail(kMask);
  }
  for (const char* path : kReadOnlyProcPaths) {
    if (access(path, F_OK) != 0) continue;
    if (mount(path, path, nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
        mount(nullptr, path, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
      fail(kReadOnlyProc);
  }
}

}  // namespace

std::string planRootfsError(const RootfsSetup& setup) {
  if (!setup.enabled()) return "";
  if (!absolute(setup.layersDir) || !absolute(setup.upperDir) || !absolute(setup.workDir) ||
      !absolute(setup.mountPoint) || !absolute(setup.workingDir))
    return "root filesystem: layersDir, upperDir, workDir, mountPoint and workingDir must be absolute";
  if (!setup.mountPointsDir.empty() &&
      (!absolute(setup.mountPointsDir) || setup.mountPointsDir.find_first_of(":,") != std::string::npos))
    return "root filesystem: the mount points dir '" + setup.mountPointsDir + "' must be absolute, without ':' or ','";
  for (const std::string& lower : setup.lowerDirs)
    if (lower.empty() || absolute(lower) || lower.find_first_of(":,") != std::string::npos)
      return "root filesystem: lower dir '" + lower + "' must be relative to layersDir, without ':' or ','";
  if (overlayData(setup).size() > kMountDataBytesMax)
    return "root filesystem: " + std::to_string(setup.lowerDirs.size()) + " layers do not fit one overlay mount";
  if (setup.binds.size() + std::size(kDevices) > kRootfsBindsMax)
    return "root filesystem: more than " + std::to_string(kRootfsBindsMax - std::size(kDevices)) + " binds";
  for (const RootfsBind& bind : setup.binds)
    if (!absolute(bind.source) || !absolute(bind.target) || bind.target == "/")
      return "root filesystem: bind '" + bind.source + "' -> '" + bind.target + "' needs absolute paths";
  return "";
}

RootfsPlan planRootfs(const RootfsSetup& setup) {
  RootfsPlan plan;
  if (!setup.enabled()) return plan;
  plan.enabled = true;
  plan.layersDir = setup.layersDir;
  plan.mountPoint = setup.mountPoint;
  plan.overlayData = overlayData(setup);
  plan.workingDir = setup.workingDir;
  for (const char* device : kDevices) plan.binds.push_back({device, device, false, false});
  for (const RootfsBind& bind : setup.binds) {
    struct stat st;
    bool directory = stat(bind.source.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    plan.binds.push_back({bind.source, bind.target, bind.readOnly, directory});
  }
  return plan;
}

void enterRootfs(RootfsPlan& plan, void (*failFn)(int step, void* context), void* context) {
  Fail fail{failFn, context};
  int trees[kRootfsBindsMax];
  if (unshare(CLONE_NEWNS) != 0) fail(kUnshare);
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) fail(kSlave);
  cloneBinds(plan, trees, fail);
  pivotIntoOverlay(plan, fail);
  mountBasics(fail);
  attachBinds(plan, trees, fail);
  maskKernelPaths(fail);
  if (chdir(plan.workingDir.c_str()) != 0) fail(kWorkingDir);
}

const char* rootfsStepName(int step) {
  return step >= 0 && step < kStepCount ? kStepNames[step] : "set up the root filesystem";
}

}  // namespace allot::launch_child
