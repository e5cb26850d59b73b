#include "isolators/filesystem_isolator.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include "base/log.h"
#include "images/digest.h"
#include "images/layer_store.h"
#include "launcher/rootfs_env.h"

namespace allot {

namespace {

namespace fs = std::filesystem;

// "a/b", "/a/b": no "..", no empty name; "." components allowed.
bool hasDotDot(const std::string& path) {
  std::istringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '/'))
    if (part == "..") return true;
  return false;
}

Result<std::string> resolved(const std::string& path) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) return Error::fromErrno("volume host path " + path);
  return std::string(buffer);
}

bool under(const std::string& path, const std::string& root) {
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          (root.back() == '/' || path[root.size()] == '/'));
}

Status makeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return Error::fromErrno("mkdir " + path);
  return okStatus();
}

// The value of NAME=... in `env`, "" when absent.
std::string envValue(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& e : env)
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=')
      return e.substr(name.size() + 1);
  return "";
}

// An executor in a network namespace of its own: loopback names, and the
// node's hostname (no UTS namespace: the task sees it) at the executor's
// own address, not at the host's as the host's /etc/hosts has it.
std::string ownHosts(const std::vector<std::string>& env) {
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string out = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  std::string address = envValue(env, "ALLOT_NETWORK_ADDRESS");
  std::string address6 = envValue(env, "ALLOT_NETWORK_ADDRESS6");
  if (host[0] != '\0' && !address.empty()) out += address + "\t" + host + "\n";
  if (host[0] != '\0' && !address6.empty()) out += address6 + "\t" + host + "\n";
  return out;
}

Status writeFile(const std::string& path, const std::string& text) {
  std::string temp = path + ".new";
  FILE* f = std::fopen(temp.c_str(), "we");
  if (f == nullptr) return Error::fromErrno("writing " + temp);
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(temp.c_str(), path.c_str()) != 0) return Error::fromErrno("writing " + path);
  return okStatus();
}

// A mount point of filesystem/linux's shared mount points dir: a path
// relative to the root, and whether it is a directory.
struct MountPoint {
  std::string path;
  bool directory = true;
};

// The mount points every root gets (kRootfsSandbox among them), then the
// targets of the operator's host binds (with their parents): the dir is
// stacked on a root only when each of its files is bound over. Two dirs:
// one for executors' roots (with the host binds), one for roots that only
// an executor's tasks enter (rootForTasksOnly: without them).
std::string mountPointsDirOf(const std::string& rootfsDir, bool tasksOnly) {
  return rootfsDir + "-mount-points/" + (tasksOnly ? "task" : "executor");
}

std::vector<MountPoint> mountPointsFor(const std::vector<RootfsBind>& hostBinds) {
  std::vector<MountPoint> points = {{"proc"}, {"dev"}, {"sys"}, {"tmp"}, {"mnt"}, {"mnt/sandbox"}, {"etc"},
                                    {"etc/hosts", false}, {"etc/resolv.conf", false}};
  for (const RootfsBind& bind : hostBinds) {
    std::string target = bind.target.substr(1);
    for (size_t slash = target.find('/'); slash != std::string::npos; slash = target.find('/', slash + 1))
      points.push_back({target.substr(0, slash)});
    struct stat st;
    points.push_back({target, ::stat(bind.source.c_str(), &st) == 0 && S_ISDIR(st.st_mode)});
  }
  return points;
}

// Made once, empty; read-only to the roots (a lower layer).
Status makeMountPoints(const std::string& dir, const std::vector<MountPoint>& points) {
  if (Status st = makeDir(dir, 0755); !st) return st;
  for (const MountPoint& point : points) {
    std::string path = dir + "/" + point.path;
    if (point.directory) {
      if (Status st = makeDir(path, 0755); !st) return st;
      continue;
    }
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) continue;
    if (Status written = writeFile(path, ""); !written) return written;
  }
  return okStatus();
}

// Whether the mount points dir can go above `layers` (bottom first, hex
// digests) without hiding part of the image: for each mount point, the
// topmost layer that has its name has it as the same kind of file (a
// directory above a symlink or a whiteout would hide it).
bool mountPointsFit(const std::string& layersDir, const std::vector<std::string>& layers,
                    const std::vector<MountPoint>& points) {
  for (const MountPoint& point : points) {
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      struct stat st;
      if (::lstat((layersDir + "/" + *it + "/rootfs/" + point.path).c_str(), &st) != 0) continue;
      if (point.directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) return false;
      break;
    }
  }
  return true;
}

class FilesystemIsolator final : public Isolator {
 public:
  FilesystemIsolator(const IsolatorOptions& options, std::vector<std::string> allowed)
      : store_(*options.imageStore), rootfsDir_(options.rootfsDir), allowed_(std::move(allowed)),
        hostBinds_(options.hostBinds), resolvConf_(options.resolvConf),
        mountPoints_{mountPointsFor(hostBinds_), mountPointsFor({})} {}

  std::string_view name() const override { return "filesystem/linux"; }

  Status recover(const std::vector<KnownContainer>& known) override;
  Status prepare(const ContainerId& id, const ContainerConfig& config, ChildSetup* setup) override;
  Status isolate(const ContainerId&, pid_t) override { return okStatus(); }
  Status watch(const ContainerId&, std::function<void(const Limitation&)>) override { return okStatus(); }
  Status update(const ContainerId&, const Resources&) override { return okStatus(); }
  Status usage(const ContainerId&, wire::ResourceUsage*) override { return okStatus(); }
  Status cleanup(const ContainerId& id) override;
  std::function<Status()> reapJob(const ContainerId& id) override;

 private:
  std::string dirOf(const ContainerId& id) const { return rootfsDir_ + "/" + id.name(); }
  Status hold(const std::string& name, const std::vector<std::string>& layers);
  void releaseAll(const std::string& name);
  Result<RootfsBind> volumeBind(const ContainerVolume& volume, const std::string& sandbox) const;
  Result<std::vector<RootfsBind>> networkFiles(const std::string& dir, const ChildSetup& setup) const;

  images::LayerStore& store_;
  const std::string rootfsDir_;
  const std::vector<std::string> allowed_;  // resolved
  const std::vector<RootfsBind> hostBinds_;
  const std::string resolvConf_;
  const std::vector<MountPoint> mountPoints_[2];  // an executor's root's, a tasks-only root's
  std::map<std::string, std::vector<images::Digest>> held_;  // by container name
};

Status FilesystemIsolator::hold(const std::string& name, const std::vector<std::string>& layers) {
  if (held_.count(name)) return okStatus();
  std::vector<images::Digest> taken;
  for (const std::string& hex : layers) {
    Result<images::Digest> digest = images::parseDigest("sha256:" + hex);
    if (digest && store_.acquire(*digest)) {
      taken.push_back(*digest);
      continue;
    }
    for (const images::Digest& d : taken) store_.release(d);
    return Error{"filesystem/linux: layer sha256:" + hex + " is not in the image store"};
  }
  held_[name] = std::move(taken);
  return okStatus();
}

void FilesystemIsolator::releaseAll(const std::string& name) {
  auto it = held_.find(name);
  if (it == held_.end()) return;
  for (const images::Digest& d : it->second) store_.release(d);
  held_.erase(it);
}

Result<RootfsBind> FilesystemIsolator::volumeBind(const ContainerVolume& volume, const std::string& sandbox) const {
  const std::string& target = volume.containerPath;
  std::string shown = "volume '" + volume.hostPath + "' -> '" + target + "'";
  if ((volume.hostPath + target).find_first_of("\t\n") != std::string::npos)
    return Error{shown + ": a tab or newline in a path"};
  if (target.empty() || target.front() != '/' || target == "/" || hasDotDot(target))
    return Error{shown + ": the path inside the root must be absolute, not '/', without '..'"};
  if (volume.hostPath.empty() || hasDotDot(volume.hostPath)) return Error{shown + ": bad host path"};
  if (volume.hostPath.front() != '/') {
    std::string inSandbox = sandbox + "/" + volume.hostPath;
    std::error_code ec;
    fs::create_directories(inSandbox, ec);
    if (ec) return Error{shown + ": making " + inSandbox + ": " + ec.message()};
    // The sandbox's owner (the run-as user) writes there, as in the sandbox.
    struct stat owner;
    if (::stat(sandbox.c_str(), &owner) != 0 || ::chown(inSandbox.c_str(), owner.st_uid, owner.st_gid) != 0)
      return Error::fromErrno(shown + ": giving " + inSandbox + " to the sandbox's owner");
    return RootfsBind{inSandbox, target, volume.readOnly};
  }
  Result<std::string> real = resolved(volume.hostPath);
  if (!real) return real.error();
  for (const std::string& root : allowed_)
    if (under(*real, root)) return RootfsBind{*real, target, volume.readOnly};
  return Error{shown + ": " + *real + " is not under a path the agent allows (--volume-allow)"};
}

// /etc/hosts and /etc/resolv.conf that fit the executor's network,
// read-only: the host's on the host's network; in a network namespace of
// its own (network/netns prepared before this isolator and gave the
// launch its namespace) a hosts file of its own in `dir` and the
// operator's --resolv-conf. A host file that does not exist is left out.
Result<std::vector<RootfsBind>> FilesystemIsolator::networkFiles(const std::string& dir,
                                                                 const ChildSetup& setup) const {
  std::string hosts = "/etc/hosts";
  std::string resolv = "/etc/resolv.conf";
  if (setup.netnsFd >= 0) {
    hosts = dir + "/hosts";
    if (Status st = writeFile(hosts, ownHosts(setup.env)); !st) return st.error();
    resolv = resolvConf_;
  }
  std::vector<RootfsBind> binds;
  for (const auto& [source, target] : {std::pair{hosts, "/etc/hosts"}, std::pair{resolv, "/etc/resolv.conf"}}) {
    if (source.empty() || ::access(source.c_str(), R_OK) != 0) continue;
    binds.push_back({source, target, true});
  }
  return binds;
}

Status FilesystemIsolator::prepare(const ContainerId& id, const ContainerConfig& config, ChildSetup* setup) {
  if (config.imageLayers.empty()) {
    if (!config.volumes.empty()) return Error{"filesystem/linux: volumes need an image"};
    return okStatus();
  }
  if (config.volumes.size() > kVolumesMax)
    return Error{"filesystem/linux: more than " + std::to_string(kVolumesMax) + " volumes"};
  RootfsSetup root;
  root.binds.push_back({config.sandbox, kRootfsSandbox, false});
  for (const ContainerVolume& volume : config.volumes) {
    Result<RootfsBind> bind = volumeBind(volume, config.sandbox);
    if (!bind) return bind.error();
    root.binds.push_back(*bind);
  }
  if (!config.rootForTasksOnly)
    for (const RootfsBind& bind : hostBinds_) root.binds.push_back(bind);
  if (Status st = hold(id.name(), config.imageLayers); !st) return st;
  std::string dir = dirOf(id);
  for (const std::string& d : {dir, dir + "/upper", dir + "/work", dir + "/mnt"}) {
    if (Status st = makeDir(d, d == dir ? 0700 : 0755); !st) {
      releaseAll(id.name());
      return st;
    }
  }
  Result<std::vector<RootfsBind>> files = networkFiles(dir, *setup);
  if (!files) {
    releaseAll(id.name());
    return files.error();
  }
  root.binds.insert(root.binds.end(), files->begin(), files->end());
  root.layersDir = store_.root() + "/layers";
  // Every file in it bound over: both network files (an absent one leaves
  // the image's in view) and the host binds.
  bool tasksOnly = config.rootForTasksOnly;
  if (files->size() == 2 && mountPointsFit(root.layersDir, config.imageLayers, mountPoints_[tasksOnly]))
    root.mountPointsDir = mountPointsDirOf(rootfsDir_, tasksOnly);
  for (auto it = config.imageLayers.rbegin(); it != config.imageLayers.rend(); ++it)
    root.lowerDirs.push_back(*it + "/rootfs");
  root.upperDir = dir + "/upper";
  root.workDir = dir + "/work";
  root.mountPoint = dir + "/mnt";
  root.workingDir = config.workingDir.empty() ? kRootfsSandbox : config.workingDir;
  setup->env.push_back(std::string("ALLOT_SANDBOX=") + kRootfsSandbox);
  if (config.rootForTasksOnly) {
    setup->env.push_back(std::string(kRootfsEnv) + "=" + encodeRootfs(root));
    return okStatus();
  }
  setup->rootfs = std::move(root);
  return okStatus();
}

Status FilesystemIsolator::recover(const std::vector<KnownContainer>& known) {
  std::map<std::string, bool> keep;
  for (const KnownContainer& k : known) {
    if (k.config.imageLayers.empty()) continue;
    keep[k.id.name()] = true;
    if (Status st = hold(k.id.name(), k.config.imageLayers); !st)
      LOG_WARNING("filesystem/linux: recovering " << k.id.name() << ": " << st.error().describe());
  }
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(rootfsDir_, ec)) {
    if (keep.count(entry.path().filename())) continue;
    LOG_INFO("filesystem/linux: removing the writable layer of unknown container " << entry.path().string());
    fs::remove_all(entry.path(), ec);
  }
  return okStatus();
}

std::function<Status()> FilesystemIsolator::reapJob(const ContainerId& id) {
  if (!held_.count(id.name())) return nullptr;
  return [dir = dirOf(id)]() -> Status {
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec) return Error{"filesystem/linux: removing " + dir + ": " + ec.message()};
    return okStatus();
  };
}

Status FilesystemIsolator::cleanup(const ContainerId& id) {
  releaseAll(id.name());
  std::error_code ec;
  fs::remove_all(dirOf(id), ec);  // gone after the reap job; an empty one after a failed prepare
  if (ec) return Error{"filesystem/linux: removing " + dirOf(id) + ": " + ec.message()};
  return okStatus();
}

}  // namespace

Result<std::unique_ptr<Isolator>> makeFilesystemIsolator(const IsolatorOptions& options) {
  if (geteuid() != 0) return Error{"filesystem/linux needs allot-agent to run as root (overlay, pivot_root)"};
  if (options.imageStore == nullptr || options.rootfsDir.empty())
    return Error{"filesystem/linux needs the agent's image store"};
  if (Status st = makeDir(options.rootfsDir, 0700); !st) return st.error();
  if (Status st = makeDir(options.rootfsDir + "-mount-points", 0755); !st) return st.error();
  for (bool tasksOnly : {false, true}) {
    Status st = makeMountPoints(mountPointsDirOf(options.rootfsDir, tasksOnly),
                                mountPointsFor(tasksOnly ? std::vector<RootfsBind>{} : options.hostBinds));
    if (!st) return st.error();
  }
  // The host's own may be absent (then roots get none); a file the
  // operator names must be there.
  if (options.resolvConf != IsolatorOptions{}.resolvConf && ::access(options.resolvConf.c_str(), R_OK) != 0)
    return Error::fromErrno("--resolv-conf " + options.resolvConf);
  std::vector<std::string> allowed;
  std::istringstream list(options.volumeAllow);
  std::string path;
  while (std::getline(list, path, ',')) {
    if (path.empty()) continue;
    if (path.front() != '/') return Error{"--volume-allow: '" + path + "' is not an absolute path"};
    Result<std::string> real = resolved(path);
    if (!real) return Error{"--volume-allow: " + real.error().describe()};
    allowed.push_back(*real);
  }
  return std::unique_ptr<Isolator>(new FilesystemIsolator(options, std::move(allowed)));
}

}  // namespace allot
