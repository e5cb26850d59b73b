#include "launcher/rootfs_env.h"

#include <vector>

namespace allot {

namespace {

std::vector<std::string_view> split(std::string_view text, char by) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(by, start);
    if (end == std::string_view::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string encodeRootfs(const RootfsSetup& setup) {
  std::string out = "layers\t" + setup.layersDir + "\n";
  for (const std::string& lower : setup.lowerDirs) out += "lower\t" + lower + "\n";
  out += "upper\t" + setup.upperDir + "\nwork\t" + setup.workDir + "\nmount\t" + setup.mountPoint + "\ncwd\t" +
         setup.workingDir + "\n";
  for (const RootfsBind& bind : setup.binds)
    out += std::string("bind\t") + (bind.readOnly ? "ro" : "rw") + "\t" + bind.source + "\t" + bind.target + "\n";
  if (!setup.mountPointsDir.empty()) out += "points\t" + setup.mountPointsDir + "\n";
  return out;
}

Result<RootfsSetup> decodeRootfs(std::string_view text) {
  if (text.size() > kRootfsEnvBytesMax) return Error{std::string(kRootfsEnv) + ": too long"};
  RootfsSetup setup;
  for (std::string_view line : split(text, '\n')) {
    if (line.empty()) continue;
    std::vector<std::string_view> f = split(line, '\t');
    std::string key(f[0]);
    if (f.size() == 2 && key == "layers") setup.layersDir = f[1];
    else if (f.size() == 2 && key == "lower") setup.lowerDirs.emplace_back(f[1]);
    else if (f.size() == 2 && key == "upper") setup.upperDir = f[1];
    else if (f.size() == 2 && key == "work") setup.workDir = f[1];
    else if (f.size() == 2 && key == "mount") setup.mountPoint = f[1];
    else if (f.size() == 2 && key == "cwd") setup.workingDir = f[1];
    else if (f.size() == 2 && key == "points") setup.mountPointsDir = f[1];
    else if (f.size() == 4 && key == "bind" && (f[1] == "ro" || f[1] == "rw"))
      setup.binds.push_back({std::string(f[2]), std::string(f[3]), f[1] == "ro"});
    else return Error{std::string(kRootfsEnv) + ": bad line '" + std::string(line) + "'"};
  }
  if (!setup.enabled()) return Error{std::string(kRootfsEnv) + ": no layers"};
  return setup;
}

}  // namespace allot
