#include "agent/image_user.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <charconv>
#include <optional>
#include <sstream>

#include "base/unique_fd.h"

namespace allot {
namespace {

// The file at `relative` in the top-most layer that has it; nullopt when
// none has it or a whiteout hides it.
Result<std::optional<std::string>> readFromLayers(const std::vector<std::string>& layerRoots,
                                                  const char* relative) {
  for (const std::string& root : layerRoots) {
    UniqueFd dir(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir.valid()) return Error::fromErrno("image layer " + root);
    open_how how{};
    how.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
    UniqueFd fd(static_cast<int>(syscall(SYS_openat2, dir.get(), relative, &how, sizeof how)));
    if (!fd.valid()) {
      if (errno == ENOENT || errno == ENOTDIR) continue;  // in a lower layer, if any
      return Error::fromErrno(std::string("the image's /") + relative);
    }
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0) return Error::fromErrno(std::string("the image's /") + relative);
    if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) return std::optional<std::string>();  // whiteout
    if (!S_ISREG(st.st_mode)) return Error{std::string("the image's /") + relative + " is not a file"};
    std::string text(static_cast<size_t>(std::min<off_t>(st.st_size, kImageUserFileBytesMax)), '\0');
    ssize_t n = ::pread(fd.get(), text.data(), text.size(), 0);
    if (n < 0) return Error::fromErrno(std::string("reading the image's /") + relative);
    text.resize(static_cast<size_t>(n));
    return std::optional<std::string>(std::move(text));
  }
  return std::optional<std::string>();
}

std::optional<uint32_t> number(const std::string& s) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// The colon-separated fields of each line of a passwd or group file.
std::vector<std::vector<std::string>> entries(const std::optional<std::string>& text) {
  std::vector<std::vector<std::string>> out;
  if (!text) return out;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::istringstream parts(line);
    std::string field;
    while (std::getline(parts, field, ':')) fields.push_back(field);
    if (fields.size() >= 4) out.push_back(std::move(fields));
  }
  return out;
}

// A passwd entry by name, or by uid when `name` is a number.
const std::vector<std::string>* findUser(const std::vector<std::vector<std::string>>& passwd,
                                         const std::string& name) {
  std::optional<uint32_t> uid = number(name);
  for (const auto& e : passwd)
    if (uid ? number(e[2]) == uid : e[0] == name) return &e;
  return nullptr;
}

Result<gid_t> groupId(const std::vector<std::vector<std::string>>& group, const std::string& name) {
  if (std::optional<uint32_t> gid = number(name)) return static_cast<gid_t>(*gid);
  for (const auto& e : group)
    if (e[0] == name && number(e[2])) return static_cast<gid_t>(*number(e[2]));
  return Error{"image user's group '" + name + "' is not in the image's /etc/group"};
}

// The groups whose member list names `user`, after `primary`.
std::vector<gid_t> groupsOf(const std::vector<std::vector<std::string>>& group, const std::string& user,
                            gid_t primary) {
  std::vector<gid_t> out{primary};
  for (const auto& e : group) {
    std::optional<uint32_t> gid = number(e[2]);
    if (!gid || *gid == primary || e.size() < 4 || out.size() >= kRunAsGroupsMax) continue;
    std::istringstream members(e[3]);
    std::string member;
    while (std::getline(members, member, ','))
      if (member == user) {
        out.push_back(static_cast<gid_t>(*gid));
        break;
      }
  }
  return out;
}

}  // namespace

Result<RunAsUser> resolveImageUser(const std::string& spec, const std::vector<std::string>& layerRoots) {
  size_t colon = spec.find(':');
  std::string userPart = spec.substr(0, colon);
  std::string groupPart = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (userPart.empty() || (colon != std::string::npos && groupPart.empty()))
    return Error{"image user '" + spec + "' is not user[:group]"};
  auto passwdText = readFromLayers(layerRoots, "etc/passwd");
  if (!passwdText) return passwdText.error();
  auto groupText = readFromLayers(layerRoots, "etc/group");
  if (!groupText) return groupText.error();
  auto passwd = entries(*passwdText);
  auto group = entries(*groupText);
  const std::vector<std::string>* entry = findUser(passwd, userPart);
  std::optional<uint32_t> uid = entry ? number((*entry)[2]) : number(userPart);
  if (!uid) return Error{"image user '" + userPart + "' is not in the image's /etc/passwd"};
  RunAsUser user;
  user.name = entry ? (*entry)[0] : userPart;
  user.uid = static_cast<uid_t>(*uid);
  if (!groupPart.empty()) {
    Result<gid_t> gid = groupId(group, groupPart);
    if (!gid) return gid.error();
    user.gid = *gid;
    user.groups = {user.gid};
    return user;
  }
  std::optional<uint32_t> primary = entry ? number((*entry)[3]) : std::optional<uint32_t>(0);
  user.gid = static_cast<gid_t>(primary.value_or(0));
  user.groups = entry ? groupsOf(group, user.name, user.gid) : std::vector<gid_t>{user.gid};
  return user;
}

}  // namespace allot
