#include "isolators/cgroupfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "base/unique_fd.h"

namespace allot::cgroupfs {

namespace {
std::string fakeRoot;  // files under it are created on write (unit tests)
}  // namespace

void setFakeRoot(const std::string& dir) { fakeRoot = dir; }

Status writeFile(const std::string& path, const std::string& value) {
  bool fake = !fakeRoot.empty() && path.rfind(fakeRoot, 0) == 0;
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC | (fake ? O_CREAT | O_TRUNC : 0), 0644));
  if (fd.get() < 0) return Error::fromErrno("open " + path);
  if (write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return Error::fromErrno("write '" + value + "' to " + path);
  }
  return okStatus();
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

Result<int64_t> readInt(const std::string& path) {
  auto text = readFile(path);
  if (!text) return text.error();
  if (text->rfind("max", 0) == 0) return int64_t{-1};
  try {
    return static_cast<int64_t>(std::stoll(*text));
  } catch (...) {
    return Error{path + ": '" + *text + "' is not a number"};
  }
}

Result<int64_t> readKey(const std::string& path, const std::string& key) {
  auto text = readFile(path);
  if (!text) return text.error();
  std::istringstream in(*text);
  std::string k;
  int64_t v;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return Error{path + ": no '" + key + "'"};
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

Status makeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return okStatus();
  return Error::fromErrno("mkdir " + path);
}

Status removeDir(const std::string& path, bool fake) {
  if (fake) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) return Error{"remove " + path + ": " + ec.message()};
    return okStatus();
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (rmdir(path.c_str()) == 0 || errno == ENOENT) return okStatus();
    if (errno != EBUSY) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Error::fromErrno("rmdir " + path);
}

std::vector<pid_t> procs(const std::string& dir) {
  std::vector<pid_t> out;
  auto text = readFile(dir + "/cgroup.procs");
  if (!text) return out;
  std::istringstream in(*text);
  pid_t pid;
  while (in >> pid) out.push_back(pid);
  return out;
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

}  // namespace allot::cgroupfs
