#include "base/flags.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace allot {

Flags::Flags(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void Flags::addString(std::string name, std::string* target, std::string help) {
  specs_.push_back({std::move(name), Kind::kString, target, std::move(help), *target});
}

void Flags::addInt(std::string name, int64_t* target, std::string help) {
  specs_.push_back({std::move(name), Kind::kInt, target, std::move(help), std::to_string(*target)});
}

void Flags::addDouble(std::string name, double* target, std::string help) {
  std::ostringstream text;
  text << *target;
  specs_.push_back({std::move(name), Kind::kDouble, target, std::move(help), text.str()});
}

void Flags::addBool(std::string name, bool* target, std::string help) {
  specs_.push_back({std::move(name), Kind::kBool, target, std::move(help), *target ? "true" : "false"});
}

const Flags::Spec* Flags::find(const std::string& name) const {
  for (const Spec& spec : specs_) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

Status Flags::assign(const Spec& spec, const std::string& value) {
  const std::string where = "--" + spec.name + "=" + value;
  switch (spec.kind) {
    case Kind::kString:
      *static_cast<std::string*>(spec.target) = value;
      return okStatus();
    case Kind::kInt: {
      int64_t parsed = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
      if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
        return Error{"flag " + where + ": not an integer"};
      }
      *static_cast<int64_t*>(spec.target) = parsed;
      return okStatus();
    }
    case Kind::kDouble: {
      char* end = nullptr;
      double parsed = std::strtod(value.c_str(), &end);
      if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(parsed)) {
        return Error{"flag " + where + ": not a number"};
      }
      *static_cast<double*>(spec.target) = parsed;
      return okStatus();
    }
    case Kind::kBool:
      if (value == "true" || value == "1") {
        *static_cast<bool*>(spec.target) = true;
      } else if (value == "false" || value == "0") {
        *static_cast<bool*>(spec.target) = false;
      } else {
        return Error{"flag " + where + ": expected true or false"};
      }
      return okStatus();
  }
  return Error{"flag " + where + ": unknown kind"};
}

Status Flags::parse(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!allowPositional_) return Error{"unexpected argument '" + arg + "'"};
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool hasValue = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      hasValue = true;
    }
    const Spec* spec = find(name);
    if (spec == nullptr) return Error{"unknown flag --" + name + " (see --help)"};
    if (!hasValue && spec->kind == Kind::kBool) {
      value = "true";
    } else if (!hasValue) {
      if (i + 1 >= argc) return Error{"flag --" + name + " needs a value"};
      value = argv[++i];
    }
    if (Status st = assign(*spec, value); !st) return st;
  }
  return okStatus();
}

std::string Flags::usage() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [flags]\n" << summary_ << "\n\nflags:\n";
  for (const Spec& spec : specs_) {
    out << "  --" << spec.name;
    if (spec.kind != Kind::kBool) out << " VALUE";
    out << "\n      " << spec.help;
    if (!spec.defaultText.empty()) out << " (default: " << spec.defaultText << ")";
    out << "\n";
  }
  out << "  --help\n      print this text and exit\n";
  return out.str();
}

Result<HostPort> parseHostPort(const std::string& text) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return Error{"'" + text + "' is not HOST:PORT"};
  }
  HostPort out;
  out.host = text.substr(0, colon);
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  std::string port = text.substr(colon + 1);
  unsigned parsed = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), parsed);
  if (ec != std::errc() || end != port.data() + port.size() || parsed > 65535) {
    return Error{"'" + text + "': port '" + port + "' is not a number in 0..65535"};
  }
  out.port = static_cast<uint16_t>(parsed);
  return out;
}

int handleFlags(Flags& flags, int argc, const char* const* argv) {
  if (Status st = flags.parse(argc, argv); !st) {
    std::fprintf(stderr, "%s\n", st.error().describe().c_str());
    return 2;
  }
  if (flags.helpRequested()) {
    std::fputs(flags.usage().c_str(), stdout);
    return 0;
  }
  return -1;
}

}  // namespace allot
