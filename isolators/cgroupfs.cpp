#include "isolators/cgroupfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

#include "base/unique_fd.h"

namespace allot {
namespace cgroupfs {

// A write the kernel gave up on for a pending signal (EINTR: e.g. a memory
// limit's resize loop, memory.memsw.limit_in_bytes, checks signal_pending,
// and the agent's loop gets SIGCHLD and io_uring task work) is tried again,
// at most this many times.
constexpr int kWriteAttemptsOnEintr = 8;

Status writeFile(const std::string& path, const std::string& value) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) return Error::fromErrno("open " + path);
  for (int attempt = 1;; ++attempt) {
    ssize_t n = write(fd.get(), value.data(), value.size());
    if (n == static_cast<ssize_t>(value.size())) return okStatus();
    if (n >= 0) errno = EIO;  // a short write to a cgroup file: not applied whole
    if (errno != EINTR || attempt == kWriteAttemptsOnEintr) break;
  }
  return Error::fromErrno("write '" + value + "' to " + path);
}

Result<std::string> readFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Error::fromErrno("open " + path);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd.get(), buf, sizeof buf)) > 0) out.append(buf, n);
  if (n < 0) return Error::fromErrno("read " + path);
  return out;
}

Result<int64_t> parseInt(const std::string& path, const std::string& text) {
  if (text.rfind("max", 0) == 0) return int64_t{-1};
  try {
    return static_cast<int64_t>(std::stoll(text));
  } catch (...) {
    return Error{path + ": '" + text + "' is not a number"};
  }
}

Result<int64_t> parseKey(const std::string& path, const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  int64_t v;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return Error{path + ": no '" + key + "'"};
}

std::vector<pid_t> parsePids(const std::string& text) {
  std::vector<pid_t> out;
  std::istringstream in(text);
  pid_t pid;
  while (in >> pid) out.push_back(pid);
  return out;
}

Result<int64_t> readInt(const std::string& path) {
  auto text = readFile(path);
  if (!text) return text.error();
  return parseInt(path, *text);
}

Result<int64_t> readKey(const std::string& path, const std::string& key) {
  auto text = readFile(path);
  if (!text) return text.error();
  return parseKey(path, *text, key);
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

Status makeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return okStatus();
  return Error::fromErrno("mkdir " + path);
}

Status removeDir(const std::string& path) {
  if (rmdir(path.c_str()) == 0 || errno == ENOENT) return okStatus();
  return Error::fromErrno("rmdir " + path);
}

std::vector<pid_t> procs(const std::string& dir) {
  auto text = readFile(dir + "/cgroup.procs");
  return text ? parsePids(*text) : std::vector<pid_t>{};
}

std::vector<std::string> subdirs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (stat((dir + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) out.push_back(name);
  }
  closedir(d);
  return out;
}

}  // namespace cgroupfs

Result<int64_t> CgroupFs::readInt(const std::string& path) const {
  auto text = readFile(path);
  if (!text) return text.error();
  return cgroupfs::parseInt(path, *text);
}

Result<int64_t> CgroupFs::readKey(const std::string& path, const std::string& key) const {
  auto text = readFile(path);
  if (!text) return text.error();
  return cgroupfs::parseKey(path, *text, key);
}

std::vector<pid_t> CgroupFs::procs(const std::string& dir) const {
  auto text = readFile(dir + "/cgroup.procs");
  return text ? cgroupfs::parsePids(*text) : std::vector<pid_t>{};
}

namespace {

class RealCgroupFs final : public CgroupFs {
 public:
  Status writeFile(const std::string& path, const std::string& value) const override {
    return cgroupfs::writeFile(path, value);
  }
  Result<std::string> readFile(const std::string& path) const override { return cgroupfs::readFile(path); }
  bool exists(const std::string& path) const override { return cgroupfs::exists(path); }
  Status makeDir(const std::string& path) const override { return cgroupfs::makeDir(path); }
  Status removeDir(const std::string& path) const override { return cgroupfs::removeDir(path); }
  std::vector<std::string> subdirs(const std::string& dir) const override { return cgroupfs::subdirs(dir); }
  Status signal(pid_t pid, int sig) const override {
    if (::kill(pid, sig) == 0 || errno == ESRCH) return okStatus();
    return Error::fromErrno("kill " + std::to_string(pid));
  }
  Result<CgroupEventSource> watchEvents(const std::string& path, const std::string& eventControl) const override {
    CgroupEventSource source;
    if (eventControl.empty()) {
      source.fd = UniqueFd(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
      if (source.fd.get() < 0) return Error::fromErrno("inotify_init1");
      if (inotify_add_watch(source.fd.get(), path.c_str(), IN_MODIFY) < 0) {
        return Error::fromErrno("inotify_add_watch " + path);
      }
      return source;
    }
    source.fd = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (source.fd.get() < 0) return Error::fromErrno("eventfd");
    source.held = UniqueFd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (source.held.get() < 0) return Error::fromErrno("open " + path);
    std::string registration = std::to_string(source.fd.get()) + " " + std::to_string(source.held.get());
    if (Status st = cgroupfs::writeFile(eventControl, registration); !st) return st.error();
    return source;
  }
};

}  // namespace

std::shared_ptr<CgroupFs> realCgroupFs() {
  static const std::shared_ptr<CgroupFs> fs = std::make_shared<RealCgroupFs>();
  return fs;
}

}  // namespace allot
