// Builds layer tarballs for tests, hostile ones included: libarchive's
// writer stores names and link targets as given ("../x", "/etc/shadow").
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <string>

#include <gtest/gtest.h>

namespace allot::testing {

class TarBuilder {
 public:
  enum class Compression { kNone, kGzip, kZstd };

  explicit TarBuilder(std::string path, Compression compression = Compression::kNone)
      : path_(std::move(path)), a_(archive_write_new()) {
    archive_write_set_format_pax_restricted(a_);
    if (compression == Compression::kGzip) archive_write_add_filter_gzip(a_);
    if (compression == Compression::kZstd) archive_write_add_filter_zstd(a_);
    EXPECT_EQ(archive_write_open_filename(a_, path_.c_str()), ARCHIVE_OK) << archive_error_string(a_);
  }
  ~TarBuilder() { close(); }

  TarBuilder& file(const std::string& name, const std::string& content, mode_t mode = 0644) {
    archive_entry* e = start(name, AE_IFREG, mode);
    archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
    finish(e);
    if (!content.empty()) archive_write_data(a_, content.data(), content.size());
    return *this;
  }
  TarBuilder& dir(const std::string& name, mode_t mode = 0755) { finish(start(name, AE_IFDIR, mode)); return *this; }
  TarBuilder& symlink(const std::string& name, const std::string& target) {
    archive_entry* e = start(name, AE_IFLNK, 0777);
    archive_entry_set_symlink(e, target.c_str());
    finish(e);
    return *this;
  }
  TarBuilder& hardlink(const std::string& name, const std::string& target) {
    archive_entry* e = start(name, AE_IFREG, 0644);
    archive_entry_set_hardlink(e, target.c_str());
    finish(e);
    return *this;
  }
  TarBuilder& device(const std::string& name, unsigned type, unsigned major, unsigned minor) {
    archive_entry* e = start(name, type, 0666);
    archive_entry_set_rdevmajor(e, major);
    archive_entry_set_rdevminor(e, minor);
    finish(e);
    return *this;
  }
  // Writes the trailer; the file is complete afterwards.
  const std::string& close() {
    if (a_ != nullptr) {
      archive_write_close(a_);
      archive_write_free(a_);
      a_ = nullptr;
    }
    return path_;
  }

 private:
  archive_entry* start(const std::string& name, unsigned type, mode_t mode) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, mode);
    archive_entry_set_mtime(e, 1700000000, 0);
    return e;
  }
  void finish(archive_entry* e) {
    EXPECT_EQ(archive_write_header(a_, e), ARCHIVE_OK) << archive_error_string(a_);
    archive_entry_free(e);
  }

  std::string path_;
  archive* a_;
};

}  // namespace allot::testing
