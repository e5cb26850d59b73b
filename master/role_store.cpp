#include "master/role_store.h"

#include <sys/stat.h>

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/asio.h"
#include "base/encoding.h"
#include "base/files.h"
#include "base/log.h"
#include "master/master.h"

namespace allot {
namespace {

constexpr std::string_view kHeader = "allot-role-settings 1";

bool printableNotPercent(unsigned char c) { return c > 0x20 && c < 0x7f && c != '%'; }

std::string escapeName(std::string_view name) {
  if (name.empty()) return "%";
  return percentEncode(name, printableNotPercent);
}

Result<std::string> unescapeName(std::string_view text) {
  if (text == "%") return std::string();
  auto name = percentDecode(text);
  if (!name) return Error{"bad %-escape in role name '" + std::string(text) + "'"};
  return name;
}

// Exact: milli-units as an integer part and up to three decimals (the
// Resources text form rounds to six significant digits).
std::string formatQuota(const Resources& quota) {
  if (quota.empty()) return "none";
  std::string out;
  for (const auto& s : quota.scalars()) {
    char number[48];
    int64_t whole = s.millis / 1000;
    int64_t frac = s.millis % 1000;
    if (frac == 0) {
      snprintf(number, sizeof number, "%" PRId64, whole);
    } else {
      snprintf(number, sizeof number, "%" PRId64 ".%03" PRId64, whole, frac);
    }
    out += (out.empty() ? "" : ";") + s.name + ":" + number;
  }
  return out;
}

std::vector<std::string_view> splitBlanks(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t end = line.find(' ', i);
    if (end == std::string_view::npos) end = line.size();
    if (end > i) out.push_back(line.substr(i, end - i));
    i = end;
  }
  return out;
}

Result<double> parseWeight(std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  double w = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(w) || !(w > 0) || w > kRoleWeightMax) {
    return Error{"weight '" + s + "' is not in (0, 1e6]"};
  }
  return w;
}

Result<Resources> parseQuota(std::string_view text) {
  if (text == "none") return Resources();
  auto quota = Resources::parse(text);
  if (!quota) return Error{"quota: " + quota.error().describe()};
  if (!quota->rangeSets().empty() || quota->empty()) return Error{"quota: scalars only"};
  return *quota;
}

// "role NAME [weight=W] [quota=Q]"
Status parseRoleLine(const std::vector<std::string_view>& words, RoleSettings* out) {
  if (words.size() < 2 || words.size() > 4) return Error{"expected: role NAME [weight=W] [quota=Q]"};
  auto name = unescapeName(words[1]);
  if (!name) return name.error();
  if (Status st = validateRoleName(*name); !st) return st.error();
  if (out->count(*name)) return Error{"role '" + *name + "' appears twice"};
  RoleSetting setting;
  for (size_t i = 2; i < words.size(); ++i) {
    std::string_view w = words[i];
    if (w.rfind("weight=", 0) == 0 && !setting.weight) {
      auto weight = parseWeight(w.substr(7));
      if (!weight) return weight.error();
      setting.weight = *weight;
    } else if (w.rfind("quota=", 0) == 0 && !setting.quota) {
      auto quota = parseQuota(w.substr(6));
      if (!quota) return quota.error();
      setting.quota = *quota;
    } else {
      return Error{"unexpected '" + std::string(w) + "'"};
    }
  }
  if (!setting.weight && !setting.quota) return Error{"role '" + *name + "' sets nothing"};
  (*out)[*name] = std::move(setting);
  return okStatus();
}

}  // namespace

std::string encodeRoleSettings(const RoleSettings& settings, uint64_t epoch) {
  std::string out = std::string(kHeader) + "\nepoch " + std::to_string(epoch) + "\n";
  for (const auto& [name, setting] : settings) {
    out += "role " + escapeName(name);
    if (setting.weight) {
      char weight[40];
      snprintf(weight, sizeof weight, "%.17g", *setting.weight);
      out += std::string(" weight=") + weight;
    }
    if (setting.quota) out += " quota=" + formatQuota(*setting.quota);
    out += "\n";
  }
  return out;
}

Result<StoredRoleSettings> decodeRoleSettings(std::string_view text) {
  if (text.size() > kRoleSettingsBytesMax) {
    return Error{std::to_string(text.size()) + " bytes (at most " +
                 std::to_string(kRoleSettingsBytesMax) + ")"};
  }
  StoredRoleSettings out;
  size_t lineNo = 0;
  bool sawEpoch = false;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return Error{"line " + std::to_string(lineNo + 1) + ": no final newline"};
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    ++lineNo;
    auto fail = [&](const std::string& why) {
      return Error{"line " + std::to_string(lineNo) + ": " + why};
    };
    if (lineNo == 1) {
      if (line != kHeader) return fail("expected '" + std::string(kHeader) + "'");
      continue;
    }
    auto words = splitBlanks(line);
    if (words.empty()) return fail("empty line");
    if (words[0] == "epoch" && words.size() == 2 && !sawEpoch && lineNo == 2) {
      std::string n(words[1]);
      char* end = nullptr;
      errno = 0;
      out.epoch = std::strtoull(n.c_str(), &end, 10);
      if (*end != '\0' || errno != 0 || n.empty() || n[0] == '-') return fail("bad epoch");
      sawEpoch = true;
    } else if (words[0] == "role") {
      if (out.settings.size() >= kConfiguredRolesMax) {
        return fail("more than " + std::to_string(kConfiguredRolesMax) + " roles");
      }
      if (Status st = parseRoleLine(words, &out.settings); !st) return fail(st.error().message);
    } else {
      return fail("unexpected '" + std::string(words[0]) + "'");
    }
  }
  if (lineNo == 0) return Error{"empty"};
  if (!sawEpoch) return Error{"no epoch line"};
  return out;
}

namespace {

class FileRoleStore final : public RoleStore {
 public:
  FileRoleStore(asio::io_context& io, std::string path) : io_(io), path_(std::move(path)) {}

  void load(LoadFn done) override {
    Result<RoleSettings> result = read();
    asio::post(io_, [done = std::move(done), result = std::move(result)]() mutable {
      done(std::move(result));
    });
  }

  void save(const RoleSettings& settings, SaveFn done) override {
    Status st = writeFileAtomically(path_, encodeRoleSettings(settings, 0), /*durable=*/true, 0600);
    if (!st) st = Error{"cannot write " + path_ + ": " + st.error().describe()};
    asio::post(io_, [done = std::move(done), st = std::move(st)]() mutable { done(std::move(st)); });
  }

  std::string describe() const override { return "file " + path_; }

 private:
  Result<RoleSettings> read() const {
    struct stat info {};
    if (::stat(path_.c_str(), &info) != 0) {
      if (errno == ENOENT) return RoleSettings();
      return Error::fromErrno("cannot stat " + path_);
    }
    if (!S_ISREG(info.st_mode)) return Error{path_ + " is not a regular file"};
    if (static_cast<uint64_t>(info.st_size) > kRoleSettingsBytesMax) {
      return Error{path_ + ": " + std::to_string(info.st_size) + " bytes (at most " +
                   std::to_string(kRoleSettingsBytesMax) + ")"};
    }
    std::ifstream in(path_, std::ios::binary);
    if (!in) return Error::fromErrno("cannot open " + path_);
    std::string text(kRoleSettingsBytesMax + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (in.bad()) return Error::fromErrno("cannot read " + path_);
    text.resize(static_cast<size_t>(in.gcount()));
    auto decoded = decodeRoleSettings(text);
    if (!decoded) return Error{path_ + ": " + decoded.error().message};
    return decoded->settings;
  }

  asio::io_context& io_;
  std::string path_;
};

class UnpersistedRoleStore final : public RoleStore {
 public:
  explicit UnpersistedRoleStore(asio::io_context& io) : io_(io) {}
  void load(LoadFn done) override {
    asio::post(io_, [done = std::move(done)] { done(RoleSettings()); });
  }
  void save(const RoleSettings&, SaveFn done) override {
    asio::post(io_, [done = std::move(done)] { done(okStatus()); });
  }
  std::string describe() const override { return "none (no --zk or --work-dir)"; }
  bool persistent() const override { return false; }

 private:
  asio::io_context& io_;
};

}  // namespace

std::unique_ptr<RoleStore> makeFileRoleStore(asio::io_context& io, std::string path) {
  return std::make_unique<FileRoleStore>(io, std::move(path));
}

std::unique_ptr<RoleStore> makeUnpersistedRoleStore(asio::io_context& io) {
  return std::make_unique<UnpersistedRoleStore>(io);
}

}  // namespace allot
