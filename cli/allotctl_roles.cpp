#include "cli/allotctl_roles.h"

#include <cmath>
#include <iostream>
#include <sstream>

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>

#include "cli/table.h"
#include "proto/resources.h"

namespace allot {
namespace {

constexpr size_t kRoleNameBytesMax = 64;  // the master's limit (proto/input_limits.h)
constexpr double kWeightMax = 1e6;

CtlExit answer(const Result<http::ClientResponse>& r) {
  if (!r) {
    std::cerr << "allotctl: " << r.error().describe() << "\n";
    return CtlExit::kUnreachable;
  }
  if (r->status == 200) return CtlExit::kOk;
  std::string body = r->body;
  while (!body.empty() && body.back() == '\n') body.pop_back();
  std::cerr << "allotctl: master answered " << r->status << ": " << body << "\n";
  return r->status == 404 ? CtlExit::kNotFound : CtlExit::kRefused;
}

CtlExit listRoles(const CtlCall& call, bool json) {
  auto r = call("GET", "/roles");
  if (CtlExit e = answer(r); e != CtlExit::kOk) return e;
  if (json) {
    std::cout << r->body;
    return CtlExit::kOk;
  }
  boost::property_tree::ptree tree;
  try {
    std::istringstream in(r->body);
    boost::property_tree::read_json(in, tree);
  } catch (const std::exception& e) {
    std::cerr << "allotctl: the master's /roles is not JSON: " << e.what() << "\n";
    return CtlExit::kRefused;
  }
  // SET: where the role's weight and quota come from, "run-time" (allotctl
  // role, stored) or "flags" (--role-weight/--quota, or the defaults).
  Table t({"ROLE", "WEIGHT", "QUOTA", "ALLOCATED", "FRAMEWORKS", "SET"});
  const boost::property_tree::ptree noRoles;  // outlives the loop, unlike a temporary
  for (const auto& [key, role] : tree.get_child("roles", noRoles)) {
    std::string name = role.get<std::string>("name", "");
    std::string quota = role.get<std::string>("quota", "");
    t.add({name.empty() ? "(default)" : name, role.get<std::string>("weight", "?"),
           quota.empty() ? "-" : quota, role.get<std::string>("allocated", ""),
           role.get<std::string>("frameworks", "0"),
           role.get<bool>("run_time", false) ? "run-time" : "flags"});
  }
  size_t width = terminalWidth();
  std::cout << t.render(width);
  // One store for every role: a line under the table, cut like a cell.
  Table store({"run-time settings stored in: " + tree.get<std::string>("store", "?")});
  std::cout << store.render(width);
  return CtlExit::kOk;
}

CtlExit setRole(const CtlCall& call, const std::string& role, const std::string& param,
                const std::string& value, const std::string& done) {
  if (role.size() > kRoleNameBytesMax) {
    std::cerr << "allotctl: role name longer than " << kRoleNameBytesMax << " bytes\n";
    return CtlExit::kUsage;
  }
  auto r = call("POST", "/api/v1/roles?role=" + http::encodeQueryValue(role) + "&" + param + "=" +
                            http::encodeQueryValue(value));
  if (CtlExit e = answer(r); e != CtlExit::kOk) return e;
  std::cout << done << "\n";
  return CtlExit::kOk;
}

}  // namespace

bool isRoleCommand(const std::string& cmd) { return cmd == "roles" || cmd == "role"; }

CtlExit runRoleCommand(const CtlCall& call, const std::vector<std::string>& args, bool json) {
  if (args[0] == "roles") {
    if (args.size() != 1) {
      std::cerr << "allotctl: roles takes no arguments\n";
      return CtlExit::kUsage;
    }
    return listRoles(call, json);
  }
  if (args.size() != 4 || (args[1] != "weight" && args[1] != "quota")) {
    std::cerr << "allotctl: role weight ROLE W | role quota ROLE RESOURCES|none\n";
    return CtlExit::kUsage;
  }
  const std::string& role = args[2];
  const std::string& value = args[3];
  if (args[1] == "weight") {
    char* end = nullptr;
    double w = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !std::isfinite(w) || !(w > 0) || w > kWeightMax) {
      std::cerr << "allotctl: weight must be a number in (0, 1e6], not '" << value << "'\n";
      return CtlExit::kUsage;
    }
    return setRole(call, role, "weight", value, "role '" + role + "' weight " + value);
  }
  std::string quota = value == "none" ? "" : value;
  if (!quota.empty()) {
    auto parsed = Resources::parse(quota);
    if (!parsed) {
      std::cerr << "allotctl: quota: " << parsed.error().describe() << "\n";
      return CtlExit::kUsage;
    }
  }
  return setRole(call, role, "quota", quota,
                 "role '" + role + "' quota " + (quota.empty() ? "removed" : quota));
}

}  // namespace allot
