#include "images/extract.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string_view>
#include <thread>

#include "base/log.h"
#include "base/unique_fd.h"

namespace allot::images {

namespace {

constexpr size_t kReadBlockBytes = 1u << 16;
constexpr std::string_view kWhiteoutPrefix = ".wh.";
constexpr std::string_view kOpaqueName = ".wh..wh..opq";

enum class Kind { kDir, kFile, kSymlink, kWhiteout, kOther };

// What a layer path is made of: "a/b/c" -> its parent "a/b" and name "c".
std::string_view parentOf(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}
std::string_view nameOf(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}
std::string join(std::string_view dir, std::string_view name) {
  return dir.empty() ? std::string(name) : std::string(dir) + "/" + std::string(name);
}

// A tar path made relative and canonical: "./a//b/" -> "a/b"; "" is the
// layer's root. Absolute paths and ".." are refused, never rewritten.
Result<std::string> cleanPath(const char* raw, std::string_view what) {
  if (raw == nullptr) return Error{std::string(what) + " has no usable path"};
  std::string_view path(raw);
  std::string shown = std::string(what) + " '" + std::string(path.substr(0, 200)) + "'";
  if (path.size() > kLayerPathBytesMax) return Error{shown + ": path longer than the cap"};
  if (!path.empty() && path.front() == '/') return Error{shown + ": absolute path"};
  std::string clean;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string_view part = path.substr(start, slash - start);
    if (part == "..") return Error{shown + ": path leaves the layer ('..')"};
    if (part.size() > kLayerNameBytesMax) return Error{shown + ": name longer than 255 bytes"};
    if (!part.empty() && part != ".") clean = join(clean, part);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return clean;
}

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::kDir: return "directory";
    case Kind::kFile: return "file";
    case Kind::kSymlink: return "symlink";
    case Kind::kWhiteout: return "whiteout";
    case Kind::kOther: return "special file";
  }
  return "entry";
}

class Unpacker {
 public:
  Unpacker(const ExtractLimits& limits) : limits_(limits) {}
  ~Unpacker() {
    if (in_ != nullptr) archive_read_free(in_);
    if (out_ != nullptr) archive_write_free(out_);
  }

  Result<ExtractStats> run(int blobFd);

 private:
  Status open(int blobFd);
  Status entry(archive_entry* e);
  Status checkParents(const std::string& path, std::string_view shown);
  Status ensureDir(std::string_view dir);
  Status replaceExisting(const std::string& path, Kind incoming);
  Status whiteout(const std::string& path);
  Status opaque(std::string_view dir);
  Result<Kind> admit(archive_entry* e, const std::string& path, std::string_view shown);
  Status write(archive_entry* e, const std::string& path, std::string_view shown);
  Status copyData(std::string_view shown);

  ExtractLimits limits_;
  ExtractStats stats_;
  archive* in_ = nullptr;
  archive* out_ = nullptr;
  // Every path this layer has made so far (bounded by entriesMax).
  std::map<std::string, Kind> made_;
};

Status Unpacker::open(int blobFd) {
  in_ = archive_read_new();
  out_ = archive_write_disk_new();
  if (in_ == nullptr || out_ == nullptr) return Error{"libarchive: out of memory"};
  archive_read_support_filter_gzip(in_);
  archive_read_support_filter_zstd(in_);
  archive_read_support_format_tar(in_);
  int flags = ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
              ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME;
  if (geteuid() == 0) flags |= ARCHIVE_EXTRACT_OWNER;
  archive_write_disk_set_options(out_, flags);
  if (archive_read_open_fd(in_, blobFd, kReadBlockBytes) != ARCHIVE_OK)
    return Error{std::string("layer is not a tar: ") + archive_error_string(in_)};
  return okStatus();
}

Result<ExtractStats> Unpacker::run(int blobFd) {
  if (Status st = open(blobFd); !st) return st.error();
  for (;;) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(in_, &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) return Error{std::string("layer tar: ") + archive_error_string(in_)};
    if (++stats_.entries > limits_.entriesMax)
      return Error{"layer has more than " + std::to_string(limits_.entriesMax) + " entries"};
    if (Status st = entry(e); !st) return st.error();
  }
  if (archive_write_close(out_) != ARCHIVE_OK)
    return Error{std::string("layer: finishing directories: ") + archive_error_string(out_)};
  return stats_;
}

// Refuses a path any of whose parents this layer made as something other
// than a directory (a symlink would carry the write elsewhere), and checks
// the same on disk.
Status Unpacker::checkParents(const std::string& path, std::string_view shown) {
  for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    std::string prefix = path.substr(0, slash);
    auto it = made_.find(prefix);
    if (it != made_.end() && it->second != Kind::kDir)
      return Error{std::string(shown) + ": goes through the " + kindName(it->second) + " '" + prefix + "'"};
    struct stat st;
    if (::lstat(prefix.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      return Error{std::string(shown) + ": goes through '" + prefix + "', not a directory"};
  }
  return okStatus();
}

// Makes the directories of `dir` this layer lacks (a whiteout may name a
// directory the tar has no entry for).
Status Unpacker::ensureDir(std::string_view dir) {
  if (dir.empty()) return okStatus();
  size_t start = 0;
  for (;;) {
    size_t slash = dir.find('/', start);
    std::string prefix(dir.substr(0, slash));
    if (!made_.count(prefix)) {
      if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
        return Error::fromErrno("layer: mkdir '" + prefix + "'");
      made_[prefix] = Kind::kDir;
    }
    if (slash == std::string_view::npos) return okStatus();
    start = slash + 1;
  }
}

// A later entry replaces an earlier one of the same path, unless both are
// directories (then the later one's attributes win).
Status Unpacker::replaceExisting(const std::string& path, Kind incoming) {
  auto it = made_.find(path);
  if (it == made_.end()) return okStatus();
  if (it->second == Kind::kDir && incoming == Kind::kDir) return okStatus();
  std::error_code ec;
  std::filesystem::remove_all(path, ec);  // never follows symlinks
  if (ec) return Error{"layer: removing '" + path + "' to replace it: " + ec.message()};
  std::string under = path + "/";
  made_.erase(made_.lower_bound(under), made_.lower_bound(path + "0"));  // '0' follows '/'
  made_.erase(path);
  return okStatus();
}

Status Unpacker::opaque(std::string_view dir) {
  if (Status st = ensureDir(dir); !st) return st;
  std::string target = dir.empty() ? "." : std::string(dir);
  if (::lsetxattr(target.c_str(), "trusted.overlay.opaque", "y", 1, 0) != 0)
    return Error::fromErrno("layer: marking '" + target + "' opaque (trusted.overlay.opaque)");
  ++stats_.opaqueDirs;
  return okStatus();
}

Status Unpacker::whiteout(const std::string& path) {
  std::string_view name = nameOf(path);
  std::string_view dir = parentOf(path);
  if (name == kOpaqueName) return opaque(dir);
  std::string_view hidden = name.substr(kWhiteoutPrefix.size());
  if (hidden.empty()) return Error{"layer entry '" + path + "': bare whiteout name '.wh.'"};
  if (hidden.substr(0, kWhiteoutPrefix.size()) == kWhiteoutPrefix) return okStatus();  // aufs metadata
  std::string target = join(dir, hidden);
  if (Status st = checkParents(target, "layer whiteout '" + path + "'"); !st) return st;
  if (made_.count(target)) return okStatus();  // never hides a file of its own layer
  if (Status st = ensureDir(dir); !st) return st;
  if (::mknod(target.c_str(), S_IFCHR | 0, makedev(0, 0)) != 0)
    return Error::fromErrno("layer: making the whiteout '" + target + "'");
  made_[target] = Kind::kWhiteout;
  ++stats_.whiteouts;
  return okStatus();
}

// Decides whether an entry may be written and what it makes.
Result<Kind> Unpacker::admit(archive_entry* e, const std::string& path, std::string_view shown) {
  if (const char* link = archive_entry_hardlink(e); link != nullptr) {
    Result<std::string> target = cleanPath(link, std::string(shown) + ": hard link target");
    if (!target) return target.error();
    if (Status st = checkParents(*target, shown); !st) return st.error();
    auto it = made_.find(*target);
    if (it == made_.end() || (it->second != Kind::kFile && it->second != Kind::kSymlink))
      return Error{std::string(shown) + ": hard link to '" + *target +
                   "', which is not an earlier file of this layer"};
    archive_entry_set_hardlink(e, target->c_str());
    return it->second;
  }
  switch (archive_entry_filetype(e)) {
    case AE_IFREG: return Kind::kFile;
    case AE_IFDIR: return Kind::kDir;
    case AE_IFLNK: return Kind::kSymlink;
    case AE_IFIFO: return Kind::kOther;
    case AE_IFCHR:
    case AE_IFBLK: return Error{std::string(shown) + ": device node (refused in image layers)"};
    default: return Error{std::string(shown) + ": unsupported file type"};
  }
}

Status Unpacker::entry(archive_entry* e) {
  Result<std::string> path = cleanPath(archive_entry_pathname(e), "layer entry");
  if (!path) return path.error();
  if (path->empty()) return okStatus();  // the layer's root: its attributes are ours
  std::string shown = "layer entry '" + *path + "'";
  if (nameOf(*path).substr(0, kWhiteoutPrefix.size()) == kWhiteoutPrefix) return whiteout(*path);
  if (Status st = checkParents(*path, shown); !st) return st;
  Result<Kind> kind = admit(e, *path, shown);
  if (!kind) return kind.error();
  if (Status st = replaceExisting(*path, *kind); !st) return st;
  if (archive_entry_hardlink(e) == nullptr && *kind == Kind::kFile) {
    la_int64_t size = archive_entry_size(e);
    stats_.bytes += size > 0 ? static_cast<uint64_t>(size) : 0;
    if (stats_.bytes > limits_.bytesMax)
      return Error{"layer unpacks to more than " + std::to_string(limits_.bytesMax) + " bytes"};
  }
  if (Status st = write(e, *path, shown); !st) return st;
  made_[*path] = *kind;
  return okStatus();
}

Status Unpacker::write(archive_entry* e, const std::string& path, std::string_view shown) {
  archive_entry_set_pathname(e, path.c_str());
  int r = archive_write_header(out_, e);
  if (r < ARCHIVE_WARN) return Error{std::string(shown) + ": " + archive_error_string(out_)};
  if (r == ARCHIVE_OK && archive_entry_size(e) > 0)
    if (Status st = copyData(shown); !st) return st;
  if (archive_write_finish_entry(out_) < ARCHIVE_WARN)
    return Error{std::string(shown) + ": " + archive_error_string(out_)};
  return okStatus();
}

Status Unpacker::copyData(std::string_view shown) {
  for (;;) {
    const void* buffer = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    int r = archive_read_data_block(in_, &buffer, &size, &offset);
    if (r == ARCHIVE_EOF) return okStatus();
    if (r < ARCHIVE_WARN) return Error{std::string(shown) + ": " + archive_error_string(in_)};
    if (archive_write_data_block(out_, buffer, size, offset) < ARCHIVE_WARN)
      return Error{std::string(shown) + ": " + archive_error_string(out_)};
  }
}

// Runs on a thread of its own: its working directory (and root, when the
// process may chroot) is the layer, apart from every other thread's.
Result<ExtractStats> extractConfined(int blobFd, int destFd, const ExtractLimits& limits) {
  if (::unshare(CLONE_FS) != 0) return Error::fromErrno("layer: unshare(CLONE_FS)");
  if (::fchdir(destFd) != 0) return Error::fromErrno("layer: fchdir into the layer");
  if (geteuid() == 0 && ::chroot(".") != 0 && errno != EPERM)
    return Error::fromErrno("layer: chroot into the layer");
  Unpacker unpacker(limits);
  return unpacker.run(blobFd);
}

}  // namespace

Result<ExtractStats> extractLayer(const std::string& blobPath, const std::string& destDir,
                                  const ExtractLimits& limits) {
  UniqueFd blob(::open(blobPath.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!blob) return Error::fromErrno("open layer blob " + blobPath);
  UniqueFd dest(::open(destDir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!dest) return Error::fromErrno("open layer dir " + destDir);
  std::optional<Result<ExtractStats>> result;
  std::thread confined([&] { result.emplace(extractConfined(blob.get(), dest.get(), limits)); });
  confined.join();
  return std::move(*result);
}

}  // namespace allot::images
