#include "cli/table.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace allot {

namespace {

constexpr size_t kGap = 2;
constexpr size_t kMinColumn = 4;

// Display width, counting UTF-8 continuation bytes as nothing.
size_t displayWidth(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string cut(const std::string& s, size_t width) {
  if (displayWidth(s) <= width) return s;
  std::string out;
  size_t n = 0;
  for (unsigned char c : s) {
    bool starts = (c & 0xC0) != 0x80;
    if (starts && n + 1 >= width) break;
    n += starts;
    out += static_cast<char>(c);
  }
  return out + "…";
}

}  // namespace

std::string Table::render(size_t width) const {
  std::vector<size_t> widths(header_.size());
  for (size_t i = 0; i < header_.size(); ++i) widths[i] = displayWidth(header_[i]);
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], displayWidth(row[i]));
    }
  }
  auto total = [&] {
    size_t t = 0;
    for (size_t w : widths) t += w + kGap;
    return t - kGap;
  };
  while (width > 0 && total() > width) {
    auto widest = std::max_element(widths.begin(), widths.end());
    if (*widest <= kMinColumn) break;
    *widest -= 1;
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (size_t i = 0; i < widths.size(); ++i) {
      std::string c = cut(i < cells.size() ? cells[i] : "", widths[i]);
      l += c;
      if (i + 1 < widths.size()) l += std::string(widths[i] - displayWidth(c) + kGap, ' ');
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(header_);
  for (const auto& row : rows_) line(row);
  return out;
}

size_t terminalWidth() {
  if (!isatty(STDOUT_FILENO)) return 0;
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) return static_cast<size_t>(std::atoi(c));
  return 80;
}

}  // namespace allot
