// The web UI's files (master/ui/*), compiled into allot-master by
// master/ui/embed.py so the master serves them without any file on disk.
#pragma once

#include <string_view>
#include <vector>

namespace allot {

struct UiAsset {
  const char* path;         // "/", "/index.html", "/app.js", ...
  const char* contentType;
  std::string_view content;
};

const std::vector<UiAsset>& uiAssets();

}  // namespace allot
