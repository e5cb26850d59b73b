// The one way a C++ benchmark prints its result (bench/README.md), the
// twin of bench/result.py for the shell and Python ones: a name and ordered
// key=value fields, printed for a person (the name, then one field a line,
// aligned) and, when $BENCH_OUT names a directory, appended to
// $BENCH_OUT/<name>.csv (a header line first) and <name>.jsonl (one JSON
// object a line) for plots.
//
//   bench::Result r("isolated_launch");
//   r.add("allot_p50_ms", p50).add("runc_p50_ms", runc).add("isolation", "cgroups/cpu");
//   r.emit();
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace allot::bench {

class Result {
 public:
  explicit Result(std::string name) : name_(std::move(name)) {}

  Result& add(std::string key, double value, int precision = 3) {
    char text[64];
    std::snprintf(text, sizeof text, "%.*f", precision, value);
    fields_.push_back({std::move(key), text, std::isfinite(value)});
    return *this;
  }
  Result& add(std::string key, long long value) {
    fields_.push_back({std::move(key), std::to_string(value), true});
    return *this;
  }
  Result& add(std::string key, std::string value) {
    fields_.push_back({std::move(key), std::move(value), false});
    return *this;
  }

  // Prints the summary to stdout; appends to $BENCH_OUT when it is set.
  void emit() const {
    size_t width = 0;
    for (const Field& f : fields_) width = std::max(width, f.key.size());
    std::printf("== %s\n", name_.c_str());
    for (const Field& f : fields_) std::printf("  %-*s  %s\n", static_cast<int>(width), f.key.c_str(), f.text.c_str());
    std::fflush(stdout);
    const char* out = std::getenv("BENCH_OUT");
    if (out != nullptr && *out != '\0') append(out);
  }

 private:
  struct Field {
    std::string key;
    std::string text;
    bool number;
  };

  // A JSON string; a CSV field ("" for a quote) when csv.
  static std::string quoted(const std::string& s, bool csv = false) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"') out += csv ? '"' : '\\';
      if (c == '\\' && !csv) out += '\\';
      out += c;
    }
    return out + '"';
  }

  void append(const std::string& dir) const {
    ::mkdir(dir.c_str(), 0755);
    std::string csvPath = dir + "/" + name_ + ".csv";
    struct stat st {};
    bool fresh = ::stat(csvPath.c_str(), &st) != 0 || st.st_size == 0;
    if (FILE* csv = std::fopen(csvPath.c_str(), "a")) {
      for (size_t i = 0; fresh && i < fields_.size(); ++i) std::fprintf(csv, "%s%s", i ? "," : "", fields_[i].key.c_str());
      if (fresh) std::fputc('\n', csv);
      for (size_t i = 0; i < fields_.size(); ++i) {
        const std::string& t = fields_[i].text;
        bool plain = t.find_first_of(",\"\n") == std::string::npos;
        std::fprintf(csv, "%s%s", i ? "," : "", plain ? t.c_str() : quoted(t, true).c_str());
      }
      std::fputc('\n', csv);
      std::fclose(csv);
    }
    if (FILE* json = std::fopen((dir + "/" + name_ + ".jsonl").c_str(), "a")) {
      for (size_t i = 0; i < fields_.size(); ++i) {
        const Field& f = fields_[i];
        std::fprintf(json, "%s%s: %s", i ? ", " : "{", quoted(f.key).c_str(),
                     f.number ? f.text.c_str() : quoted(f.text).c_str());
      }
      std::fputs(fields_.empty() ? "{}\n" : "}\n", json);
      std::fclose(json);
    }
  }

  std::string name_;
  std::vector<Field> fields_;
};

}  // namespace allot::bench
