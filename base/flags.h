// Flags: the command-line parser every allot binary uses, so they all accept
// `--name value` and `--name=value`, print the same `--help`, and reject
// unknown or malformed flags with one clear message.
//
//   Flags flags("allot-master", "Runs the allot master.");
//   std::string listen = "127.0.0.1:5050";
//   flags.addString("listen", &listen, "HOST:PORT to listen on");
//   if (auto st = flags.parse(argc, argv); !st) { print st.error(); exit 2; }
//   if (flags.helpRequested()) { print flags.usage(); exit 0; }
//
// Targets are written only when parse() meets the flag; defaults are whatever
// the caller initialised them to (and are shown in usage()).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"

namespace allot {

class Flags {
 public:
  Flags(std::string program, std::string summary);

  void addString(std::string name, std::string* target, std::string help);
  void addInt(std::string name, int64_t* target, std::string help);
  void addDouble(std::string name, double* target, std::string help);
  // `--name` alone sets true; `--name=false` / `--name=true` also accepted.
  void addBool(std::string name, bool* target, std::string help);

  // Parses argv[1..]. Stops at the first problem and says which flag and value.
  // Positional arguments are an error unless allowPositional() was called.
  Status parse(int argc, const char* const* argv);

  void allowPositional() { allowPositional_ = true; }
  const std::vector<std::string>& positional() const { return positional_; }

  bool helpRequested() const { return help_; }
  std::string usage() const;

 private:
  enum class Kind { kString, kInt, kDouble, kBool };
  struct Spec {
    std::string name;
    Kind kind;
    void* target;
    std::string help;
    std::string defaultText;
  };

  const Spec* find(const std::string& name) const;
  static Status assign(const Spec& spec, const std::string& value);

  std::string program_;
  std::string summary_;
  std::vector<Spec> specs_;
  std::vector<std::string> positional_;
  bool allowPositional_ = false;
  bool help_ = false;
};

// Parses "host:port" (port 0..65535). IPv6 literals go in brackets: "[::1]:5050".
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
Result<HostPort> parseHostPort(const std::string& text);

// Standard main() prologue: parses, prints usage on --help (exit 0) or the
// error plus a hint on bad flags (exit 2). Returns -1 when main should go on.
int handleFlags(Flags& flags, int argc, const char* const* argv);

}  // namespace allot
