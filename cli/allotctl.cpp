// allotctl: the operator's command line over the master's HTTP endpoints
// (master/http_api.h).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include <google/protobuf/util/json_util.h>

#include "base/flags.h"
#include "cli/allotctl_logs.h"
#include "cli/allotctl_roles.h"
#include "cli/table.h"
#include "ha/leader_lookup.h"
#include "ha/zk_detector.h"
#include "http/client.h"
#include "proto/resources.h"
#include "proto/state.pb.h"

namespace {

using namespace allot;

// Exit codes scripts can use.
constexpr int kOk = 0;
constexpr int kUsage = 2;        // bad command line
constexpr int kUnreachable = 3;  // no answer from the master (or no master leads)
constexpr int kNotFound = 4;     // no such agent or task
constexpr int kRefused = 5;      // the master refused (bad request, not authorized, ...)

constexpr const char* kSummary =
    "Operates an allot cluster through the master's HTTP endpoints.\n\n"
    "commands:\n"
    "  agents | frameworks | tasks | offers | shares   list (--json: the JSON from /state)\n"
    "  kill TASK [--framework ID]                      kill a task\n"
    "  drain AGENT [--deadline S]                      stop offering AGENT, ask its tasks to\n"
    "                                                  finish, kill them after S seconds\n"
    "  undrain AGENT                                   offer AGENT again\n"
    "  logs TASK [--stderr] [-f] [--tail N]            a task's stdout (stderr), from its agent;\n"
    "                                                  -f: as the task writes, until it ends\n"
    "  leader                                          which master answers: id, epoch, addresses\n"
    "  roles                                           roles: weight, quota, allocation\n"
    "  role weight ROLE W | role quota ROLE RES|none   set a role's weight or quota; answered once\n"
    "                                                  stored (ZooKeeper with --zk, else the master's\n"
    "                                                  --work-dir), kept across a restart or failover\n\n"
    "With several masters in ZooKeeper, name the group; allotctl asks the leader:\n"
    "  allotctl --master zk://10.0.0.1:2181,10.0.0.2:2181/allot agents\n\n"
    "With mutual TLS on the master (--tls-*), give an operator's certificate:\n"
    "  allotctl --master https://HOST:PORT --tls-cert operator.crt --tls-key operator.key \\\n"
    "           --tls-ca ca.crt drain AGENT\n\n"
    "exit codes: 0 ok, 2 bad usage, 3 master unreachable or no master leads,\n"
    "            4 no such agent or task,\n"
    "            5 refused by the master";

struct Settings {
  std::string master = "127.0.0.1:5055";
  bool json = false;
  double deadlineS = 60;
  std::string framework;
  double timeoutS = 10;
  TlsFiles tls;
  bool stderrStream = false;
  bool follow = false;
  int64_t tail = -1;
};

std::string fmt(double v) {
  std::ostringstream o;
  o << std::round(v * 1000) / 1000;
  return o.str();
}

std::string resourcesText(const google::protobuf::RepeatedPtrField<wire::Resource>& list) {
  auto r = Resources::fromWire(list);
  return r ? r->toString() : "?";
}

double scalarOf(const google::protobuf::RepeatedPtrField<wire::Resource>& list, const char* name) {
  for (const auto& r : list) {
    if (r.name() == name) return r.scalar();
  }
  return 0;
}

std::string shortName(const std::string& enumName, const char* prefix) {
  return enumName.rfind(prefix, 0) == 0 ? enumName.substr(std::string(prefix).size()) : enumName;
}

int httpError(const http::ClientResponse& r) {
  std::string body = r.body;
  while (!body.empty() && body.back() == '\n') body.pop_back();
  std::cerr << "allotctl: master answered " << r.status << ": " << body << "\n";
  return r.status == 404 ? kNotFound : kRefused;
}

struct Context {
  Settings settings;
  HostPort master;
  http::ClientTls tls;
  std::optional<LeaderEntry> zkLeader;  // with --master zk://...: the entry found there

  Result<http::ClientResponse> call(const std::string& method, const std::string& target) const {
    return http::fetch(master, method, target, "",
                       std::chrono::milliseconds(static_cast<int64_t>(settings.timeoutS * 1000)),
                       tls);
  }
};

// One list of /state as JSON: the array as /state has it.
void printListJson(const state::MasterState& m, const std::string& what) {
  google::protobuf::util::JsonPrintOptions print;
  print.always_print_primitive_fields = true;
  print.add_whitespace = true;
  state::MasterState only;
  if (what == "agents") *only.mutable_agents() = m.agents();
  if (what == "frameworks" || what == "shares") *only.mutable_frameworks() = m.frameworks();
  if (what == "tasks") {
    *only.mutable_tasks() = m.tasks();
    for (const auto& t : m.completed_tasks()) *only.add_tasks() = t;
  }
  if (what == "offers") *only.mutable_offers() = m.offers();
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(only, &json, print);
  // {"agents": [...], ...other empty lists}: print just the wanted array.
  std::string key = "\"" + std::string(what == "shares" ? "frameworks" : what) + "\": ";
  size_t at = json.find(key);
  if (at == std::string::npos) {
    std::cout << "[]\n";
    return;
  }
  size_t begin = at + key.size();
  // The array ends where the next top-level key starts (or the object).
  int depth = 0;
  size_t end = begin;
  for (; end < json.size(); ++end) {
    char c = json[end];
    if (c == '[' || c == '{') ++depth;
    if (c == ']' || c == '}') --depth;
    if (depth == 0) break;
  }
  std::cout << json.substr(begin, end - begin + 1) << "\n";
}

Table agentsTable(const state::MasterState& m) {
  Table t({"ID", "HOST", "STATE", "SHARD", "CPUS USED/TOTAL", "MEM USED/TOTAL", "TASKS", "ATTRIBUTES"});
  for (const auto& a : m.agents()) {
    std::string attrs;
    for (const auto& at : a.attributes()) attrs += (attrs.empty() ? "" : ";") + at.name() + ":" + at.value();
    t.add({a.id(), a.hostname(),
           a.draining() ? "draining" : a.connected() ? "connected" : "disconnected",
           a.shard().empty() ? "-" : a.shard(),
           fmt(scalarOf(a.used(), "cpus")) + "/" + fmt(scalarOf(a.total(), "cpus")),
           fmt(scalarOf(a.used(), "mem")) + "/" + fmt(scalarOf(a.total(), "mem")),
           std::to_string(a.task_count()), attrs});
  }
  return t;
}

Table frameworksTable(const state::MasterState& m) {
  Table t({"ID", "NAME", "USER", "ROLE", "WEIGHT", "SHARE", "TASKS", "OFFERS", "STATE"});
  for (const auto& f : m.frameworks()) {
    t.add({f.id(), f.name(), f.user(), f.role(), fmt(f.weight()),
           fmt(100 * f.dominant_share()) + "%", std::to_string(f.task_count()),
           std::to_string(f.offer_count()), f.connected() ? "connected" : "disconnected"});
  }
  return t;
}

Table sharesTable(const state::MasterState& m) {
  Table t({"FRAMEWORK", "NAME", "WEIGHT", "DOMINANT SHARE", "ALLOCATED", "GUARANTEED"});
  for (const auto& f : m.frameworks()) {
    t.add({f.id(), f.name(), fmt(f.weight()), fmt(100 * f.dominant_share()) + "%",
           resourcesText(f.allocated()), resourcesText(f.guaranteed())});
  }
  return t;
}

Table tasksTable(const state::MasterState& m) {
  Table t({"ID", "FRAMEWORK", "AGENT", "STATE", "HEALTH", "REASON", "IMAGE", "RESOURCES", "MESSAGE"});
  std::vector<const state::TaskView*> rows;
  for (const auto& task : m.tasks()) rows.push_back(&task);
  for (const auto& task : m.completed_tasks()) rows.push_back(&task);
  for (const state::TaskView* row : rows) {
    const state::TaskView& task = *row;
    t.add({task.task_id(), task.framework_id(), task.agent_id(),
           shortName(wire::TaskState_Name(task.state()), "TASK_"),
           !task.has_healthy() ? "" : task.healthy() ? "healthy" : "unhealthy",
           task.reason() == wire::REASON_NONE ? "" : shortName(wire::Reason_Name(task.reason()), "REASON_"),
           task.image(), resourcesText(task.resources()), task.message()});
  }
  return t;
}

Table offersTable(const state::MasterState& m) {
  Table t({"ID", "FRAMEWORK", "AGENT", "RESOURCES", "EXPIRES IN"});
  for (const auto& o : m.offers()) {
    t.add({o.offer_id(), o.framework_id(), o.agent_id(), resourcesText(o.resources()),
           fmt(o.expires_in_s()) + " s"});
  }
  return t;
}

int printList(const Context& ctx, const std::string& what) {
  auto r = ctx.call("GET", "/state");
  if (!r) {
    std::cerr << "allotctl: " << r.error().describe() << "\n";
    return kUnreachable;
  }
  if (r->status != 200) return httpError(*r);
  state::State st;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(r->body, &st, parse).ok()) {
    std::cerr << "allotctl: the master's /state is not a State\n";
    return kRefused;
  }
  const state::MasterState& m = st.master();
  if (ctx.settings.json) {
    printListJson(m, what);
    return kOk;
  }
  Table table = what == "agents"       ? agentsTable(m)
                : what == "frameworks" ? frameworksTable(m)
                : what == "shares"     ? sharesTable(m)
                : what == "tasks"      ? tasksTable(m)
                                       : offersTable(m);
  std::cout << table.render(terminalWidth());
  return kOk;
}

Result<state::MasterState> fetchMasterState(const Context& ctx) {
  auto r = ctx.call("GET", "/state");
  if (!r) return r.error();
  if (r->status != 200) return Error{"master answered " + std::to_string(r->status) + " to /state"};
  state::State st;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(r->body, &st, parse).ok())
    return Error{"the master's /state is not a State"};
  return st.master();
}

// Which master answers at the HTTP address, and (with zk://) whether it is
// the one ZooKeeper names as leader.
int printLeader(const Context& ctx) {
  auto m = fetchMasterState(ctx);
  if (!m) {
    std::cerr << "allotctl: " << m.error().describe() << "\n";
    return kUnreachable;
  }
  std::string http = ctx.master.host + ":" + std::to_string(ctx.master.port);
  if (!ctx.zkLeader) {
    std::cout << "master " << m->master_id() << " (epoch " << m->leader_epoch() << "), HTTP " << http
              << "\n";
    return kOk;
  }
  const LeaderEntry& e = *ctx.zkLeader;
  if (m->master_id() != e.data.masterId) {
    std::cerr << "allotctl: ZooKeeper names master " << e.data.masterId << " as leader but "
              << http << " answers as master " << m->master_id() << " (a failover under way?)\n";
    return kUnreachable;
  }
  std::cout << "master " << e.data.masterId << " leads (epoch " << e.epoch << "): protocol "
            << e.data.address.describe() << ", HTTP " << http << "\n";
  return kOk;
}

int operate(const Context& ctx, const std::string& target, const std::string& done) {
  auto r = ctx.call("POST", target);
  if (!r) {
    std::cerr << "allotctl: " << r.error().describe() << "\n";
    return kUnreachable;
  }
  if (r->status != 200) return httpError(*r);
  std::cout << done << "\n";
  return kOk;
}

// allotctl logs TASK: through the task's agent (cli/allotctl_logs.h).
int logs(const Context& ctx, const std::vector<std::string>& args) {
  LogsRequest request;
  if (!parseLogsArgs(args, &request)) return kUsage;
  request.framework = ctx.settings.framework;
  request.stderrStream = ctx.settings.stderrStream;
  request.follow = request.follow || ctx.settings.follow;
  request.tail = ctx.settings.tail;
  request.timeoutS = ctx.settings.timeoutS;
  request.agentTls = http::ClientTls{ctx.tls.context, "agent"};
  auto call = [&](const std::string& method, const std::string& target) { return ctx.call(method, target); };
  return static_cast<int>(runLogs(call, request));
}

int run(const Context& ctx, const std::vector<std::string>& args) {
  const std::string& cmd = args[0];
  auto needOne = [&](const char* what) {
    if (args.size() == 2) return true;
    std::cerr << "allotctl: " << cmd << " takes one " << what << "\n";
    return false;
  };
  if (cmd == "agents" || cmd == "frameworks" || cmd == "tasks" || cmd == "offers" || cmd == "shares") {
    if (args.size() != 1) {
      std::cerr << "allotctl: " << cmd << " takes no arguments\n";
      return kUsage;
    }
    return printList(ctx, cmd);
  }
  if (cmd == "kill") {
    if (!needOne("TASK")) return kUsage;
    std::string target = "/api/v1/kill?task=" + http::encodeQueryValue(args[1]);
    if (!ctx.settings.framework.empty()) {
      target += "&framework=" + http::encodeQueryValue(ctx.settings.framework);
    }
    return operate(ctx, target, "kill of task " + args[1] + " sent");
  }
  if (cmd == "drain") {
    if (!needOne("AGENT")) return kUsage;
    if (!(ctx.settings.deadlineS >= 0)) {
      std::cerr << "allotctl: --deadline must be >= 0\n";
      return kUsage;
    }
    return operate(ctx,
                   "/api/v1/drain?agent=" + http::encodeQueryValue(args[1]) +
                       "&deadline=" + fmt(ctx.settings.deadlineS),
                   "agent " + args[1] + " draining; tasks killed after " +
                       fmt(ctx.settings.deadlineS) + " s");
  }
  if (cmd == "undrain") {
    if (!needOne("AGENT")) return kUsage;
    return operate(ctx, "/api/v1/undrain?agent=" + http::encodeQueryValue(args[1]),
                   "agent " + args[1] + " offered again");
  }
  if (cmd == "leader") {
    if (args.size() != 1) {
      std::cerr << "allotctl: leader takes no arguments\n";
      return kUsage;
    }
    return printLeader(ctx);
  }
  if (cmd == "logs") return logs(ctx, args);
  if (isRoleCommand(cmd)) {
    auto call = [&](const std::string& method, const std::string& target) { return ctx.call(method, target); };
    return static_cast<int>(runRoleCommand(call, args, ctx.settings.json));
  }
  std::cerr << "allotctl: unknown command '" << cmd << "' (allotctl --help)\n";
  return kUsage;
}

// The leading master's HTTP address, from its entry in the ZooKeeper group
// at `url` (ha/group.h): one look, no watch (ha/leader_lookup.h).
Result<LeaderEntry> zooKeeperLeader(const std::string& url, double timeoutS) {
  auto zk = parseZkUrl(url);
  if (!zk) return Error{"--master: " + zk.error().describe()};
  asio::io_context io(1);
  auto sessions = zooKeeperSessionFactory(io, zk->servers, kDetectorSessionTimeout);
  if (!sessions) return Error{"--master: " + sessions.error().describe()};
  auto leader = findLeader(io, *sessions, zk->path, secondsToDuration(timeoutS));
  if (!leader) return leader.error();
  if (!leader->data.http) {
    return Error{"the leading master " + leader->data.masterId + " (" +
                 leader->data.address.describe() +
                 ") publishes no HTTP address in ZooKeeper: it runs without --http-listen, or "
                 "is older than allotctl; give --master HOST:PORT"};
  }
  return leader;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  Flags flags("allotctl", kSummary);
  flags.addString("master", &s.master,
                  "HOST:PORT of the master's --http-listen (https://HOST:PORT: mutual TLS, with "
                  "--tls-*), or zk://host:port,.../path: the leader's, as its ZooKeeper entry "
                  "publishes it");
  flags.addString("zk", &s.master, "zk://host:port,.../path: the same as --master zk://...");
  flags.addBool("json", &s.json, "print the list as JSON (the array from /state)");
  flags.addDouble("deadline", &s.deadlineS, "drain: seconds before the agent's tasks are killed");
  flags.addString("framework", &s.framework, "kill, logs: the task's framework (when ids repeat)");
  flags.addBool("stderr", &s.stderrStream, "logs: the task's stderr instead of its stdout");
  flags.addBool("follow", &s.follow, "logs: keep printing what the task writes until it ends (= -f)");
  flags.addInt("tail", &s.tail, "logs: only the last N lines (then, with -f, what comes)");
  flags.addDouble("timeout", &s.timeoutS, "seconds to wait for the master");
  addTlsFlags(flags, &s.tls);
  flags.allowPositional();
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  if (flags.positional().empty()) {
    std::fputs(flags.usage().c_str(), stderr);
    return kUsage;
  }
  if (!(s.timeoutS > 0 && s.timeoutS < 3600)) {
    std::cerr << "allotctl: --timeout must be in (0, 3600)\n";
    return kUsage;
  }
  // https:// says TLS; the --tls-* files alone say it too.
  std::string address = s.master;
  std::optional<LeaderEntry> zkLeader;
  if (address.rfind("zk://", 0) == 0) {
    auto leader = zooKeeperLeader(address, s.timeoutS);
    if (!leader) {
      std::cerr << "allotctl: " << leader.error().describe() << "\n";
      return leader.error().message.rfind("--master", 0) == 0 ? kUsage : kUnreachable;
    }
    zkLeader = std::move(*leader);
    address = zkLeader->data.http->describe();
  }
  bool https = address.rfind("https://", 0) == 0;
  if (https) address = address.substr(8);
  if (address.rfind("http://", 0) == 0) address = address.substr(7);
  auto hp = parseHostPort(address);
  if (!hp) {
    std::cerr << "allotctl: --master: " << hp.error().describe() << "\n";
    return kUsage;
  }
  auto tls = tlsContextFromFlags(s.tls, TlsSide::kClient);
  if (!tls) {
    std::cerr << "allotctl: " << tls.error().describe() << "\n";
    return kUsage;
  }
  if (https && !*tls) {
    std::cerr << "allotctl: --master https://... needs --tls-cert, --tls-key and --tls-ca "
                 "(an operator's certificate from the cluster's CA)\n";
    return kUsage;
  }
  return run(Context{s, *hp, http::ClientTls{*tls, "master"}, std::move(zkLeader)},
             flags.positional());
}
