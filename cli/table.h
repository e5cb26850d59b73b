// Table: allotctl's plain-text tables. Columns keep their natural width
// when the table fits `width`; otherwise the widest columns are cut (with
// "…") until it does. width 0 means unlimited (output is not a terminal).
#pragma once

#include <string>
#include <vector>

namespace allot {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render(size_t width) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// The terminal's width for stdout (0 when stdout is not a terminal).
size_t terminalWidth();

}  // namespace allot
