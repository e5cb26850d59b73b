#include "master/acls.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace allot {
namespace {

constexpr size_t kAclFileBytesMax = 1 << 20;
constexpr size_t kAclRulesMax = 10000;

bool isRoot(std::string_view user) { return user == "root" || user == "0"; }

struct Token {
  std::string_view text;
  size_t column;  // 1-based
};

std::vector<Token> tokenize(std::string_view line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == '#') break;
    if (line[i] == ' ' || line[i] == '\t' || line[i] == '\r') {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '#') ++i;
    out.push_back({line.substr(start, i - start), start + 1});
  }
  return out;
}

std::vector<std::string> splitList(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (!item.empty()) out.emplace_back(item);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  }
  return out;
}

}  // namespace

bool FrameworkGrant::allowsUser(std::string_view user) const {
  if (user.empty()) return true;
  if (isRoot(user)) return allowRoot;
  return anyUser || std::find(users.begin(), users.end(), user) != users.end();
}

bool FrameworkGrant::allowsRole(std::string_view role) const {
  if (anyRole || role.empty()) return true;
  return std::find(roles.begin(), roles.end(), role) != roles.end();
}

Acls Acls::permissive() {
  Acls acls;
  FrameworkGrant any;
  any.anyUser = true;
  any.allowRoot = false;
  acls.rules_.push_back({Action::kRegisterFramework, "*", any});
  acls.rules_.push_back({Action::kRegisterAgent, "*", {}});
  return acls;
}

namespace {

Result<size_t> parseCount(std::string_view key, std::string_view value) {
  size_t n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n == 0) {
    return Error{std::string(key) + " must be a positive whole number"};
  }
  return n;
}

const char* optionsOf(std::string_view action) {
  if (action == "register_framework") return "users, roles, weight_max, guarantee, frameworks_max";
  if (action == "register_agent") return "agents_max";
  return "";
}

bool knownOption(std::string_view action, std::string_view key) {
  std::string_view list = optionsOf(action);
  for (const std::string& option : splitList(std::string(list))) {
    size_t first = option.find_first_not_of(' ');
    if (option.substr(first) == key) return true;
  }
  return false;
}

}  // namespace

Status Acls::parseOption(std::string_view key, std::string_view value, Rule* rule) {
  FrameworkGrant& grant = rule->grant;
  auto named = [&](const char* u) { return std::find(grant.users.begin(), grant.users.end(), u) != grant.users.end(); };
  if (key == "users") {
    grant.users = splitList(value);
    grant.anyUser = named("*");
    grant.allowRoot = named("root") || named("0");
  } else if (key == "roles") {
    grant.roles = splitList(value);
    grant.anyRole = std::find(grant.roles.begin(), grant.roles.end(), "*") != grant.roles.end();
  } else if (key == "weight_max") {
    double w = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), w);
    if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(w) || w <= 0) {
      return Error{"weight_max must be a positive number"};
    }
    grant.weightMax = w;
  } else if (key == "guarantee") {
    auto r = Resources::parse(value);
    if (!r) return Error{"guarantee: " + r.error().describe()};
    if (!r->rangeSets().empty()) return Error{"guarantee: scalars only"};
    grant.guarantee = *r;
  } else {
    auto n = parseCount(key, value);
    if (!n) return n.error();
    (key == "frameworks_max" ? grant.frameworksMax : rule->agentsMax) = *n;
  }
  return okStatus();
}

Result<Acls> Acls::parse(std::string_view text, const std::string& source) {
  Acls acls;
  acls.fromFile_ = true;
  size_t lineNo = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++lineNo;
    auto rule = parseRule(line);
    if (!rule) return Error{source + ":" + std::to_string(lineNo) + ":" + rule.error().message};
    if (!rule->has_value()) continue;
    if (acls.rules_.size() >= kAclRulesMax) {
      return Error{source + ":" + std::to_string(lineNo) + ":1: more than " +
                   std::to_string(kAclRulesMax) + " rules"};
    }
    acls.rules_.push_back(std::move(**rule));
  }
  return acls;
}

// One line: nothing (blank or a comment), a rule, or an error whose
// message starts with "COLUMN: ".
Result<std::optional<Acls::Rule>> Acls::parseRule(std::string_view line) {
  auto at = [](size_t column, const std::string& what) {
    return Error{std::to_string(column) + ": " + what};
  };
  std::vector<Token> tokens = tokenize(line);
  if (tokens.empty()) return std::optional<Rule>();
  Rule rule;
  std::string_view action = tokens[0].text;
  if (action == "register_framework") {
    rule.action = Action::kRegisterFramework;
  } else if (action == "register_agent") {
    rule.action = Action::kRegisterAgent;
  } else if (action == "operate") {
    rule.action = Action::kOperate;
  } else {
    return at(tokens[0].column, "unknown action '" + std::string(action) +
                                    "' (register_framework, register_agent or operate)");
  }
  if (tokens.size() < 2) return at(line.size() + 1, "missing principal (a name or *)");
  rule.principal = std::string(tokens[1].text);
  for (size_t i = 2; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    if (rule.action == Action::kOperate) return at(t.column, "'operate' takes no options");
    size_t eq = t.text.find('=');
    if (eq == std::string_view::npos || eq == 0) return at(t.column, "expected KEY=VALUE");
    std::string_view key = t.text.substr(0, eq);
    std::string_view value = t.text.substr(eq + 1);
    if (value.empty()) return at(t.column + eq + 1, "empty value for " + std::string(key));
    if (!knownOption(action, key)) {
      return at(t.column, "unknown option '" + std::string(key) + "' (" + optionsOf(action) + ")");
    }
    if (Status st = parseOption(key, value, &rule); !st) return at(t.column + eq + 1, st.error().message);
  }
  return std::optional<Rule>(std::move(rule));
}

Result<Acls> Acls::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::fromErrno("cannot open ACL file " + path);
  std::string text(kAclFileBytesMax + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kAclFileBytesMax) {
    return Error{"ACL file " + path + " is larger than " + std::to_string(kAclFileBytesMax) + " bytes"};
  }
  return parse(text, path);
}

const Acls::Rule* Acls::find(Action action, std::string_view principal) const {
  for (const Rule& r : rules_) {
    if (r.action == action && (r.principal == "*" || r.principal == principal)) return &r;
  }
  return nullptr;
}

std::optional<FrameworkGrant> Acls::registerFramework(std::string_view principal) const {
  const Rule* r = find(Action::kRegisterFramework, principal);
  if (r == nullptr) return std::nullopt;
  return r->grant;
}

bool Acls::registerAgent(std::string_view principal) const {
  return find(Action::kRegisterAgent, principal) != nullptr;
}

size_t Acls::agentsMax(std::string_view principal) const {
  const Rule* r = find(Action::kRegisterAgent, principal);
  return r == nullptr ? 0 : r->agentsMax;
}

bool Acls::operate(std::string_view principal) const {
  return find(Action::kOperate, principal) != nullptr;
}

std::vector<std::string> Acls::operatePrincipals() const {
  std::vector<std::string> out;
  for (const Rule& r : rules_) {
    if (r.action == Action::kOperate) out.push_back(r.principal);
  }
  return out;
}

}  // namespace allot
