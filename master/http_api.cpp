#include "master/http_api.h"

#include <chrono>
#include <cmath>

#include "base/log.h"
#include "master/state_view.h"
#include "master/ui_assets.h"

namespace allot {

Result<std::unique_ptr<MasterHttp>> MasterHttp::create(asio::io_context& io, MasterServer& master,
                                                       MasterHttpOptions options) {
  auto server = http::Server::create(io, options.server);
  if (!server) return server.error();
  std::unique_ptr<MasterHttp> out(new MasterHttp(io, master, std::move(options), std::move(*server)));
  out->addRoutes();
  return out;
}

MasterHttp::MasterHttp(asio::io_context& io, MasterServer& master, MasterHttpOptions options,
                       std::unique_ptr<http::Server> server)
    : master_(master),
      options_(std::move(options)),
      server_(std::move(server)),
      startTimeS_(wallClockSeconds()) {
  StateCacheOptions cache;
  cache.clientsMax = options_.stateClientsMax;
  cache.sections = &master_.loopSections();
  cache.sliceSection = static_cast<LoopSections::Id>(LoopSection::kStateSlice);
  cache.piecesSection = static_cast<LoopSections::Id>(LoopSection::kStatePieces);
  stateCache_ = std::make_unique<StateCache>(
      io,
      [this] {
        return std::make_unique<MasterStateView>(master_.master(), master_.leaderEpoch(), startTimeS_);
      },
      cache);
}

namespace {

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

void MasterHttp::addRoutes() {
  addReadRoutes();
  addOperateRoutes();
}

void MasterHttp::addReadRoutes() {
  server_->route("GET", "/health", [this](const http::Request&) {
    Master& m = master_.master();
    return http::Response::json("{\"status\":\"ok\",\"role\":\"master\",\"masterId\":" +
                                jsonString(m.masterId()) +
                                ",\"agents\":" + std::to_string(m.agentCount()) +
                                ",\"frameworks\":" + std::to_string(m.frameworkCount()) + "}\n");
  });
  server_->route("GET", "/state", [this](const http::Request&) { return state(); });
  server_->route("GET", "/metrics", [this](const http::Request&) { return metrics(); });
  for (const UiAsset& asset : uiAssets()) {
    server_->route("GET", asset.path, [&asset](const http::Request&) {
      http::Response r;
      r.contentType = asset.contentType;
      r.body = std::string(asset.content);
      return r;
    });
  }
  server_->route("GET", "/roles", [this](const http::Request&) {
    auto timed = master_.timed(LoopSection::kRoles);
    return roles();
  });
}

http::Response MasterHttp::metrics() {
  auto timed = master_.timed(LoopSection::kMetrics);
  Master& m = master_.master();
  auto start = std::chrono::steady_clock::now();
  m.refreshGauges();
  auto gaugesSet = std::chrono::steady_clock::now();
  http::Response r;
  r.contentType = "text/plain; version=0.0.4; charset=utf-8";
  r.body = m.metrics().serialize();
  if (const ShardHub* shards = master_.shards()) r.body += shards->metricsText();
  auto written = std::chrono::steady_clock::now();
  m.metrics().scraped(std::chrono::duration<double>(gaugesSet - start).count(),
                      std::chrono::duration<double>(written - gaugesSet).count());
  return r;
}

void MasterHttp::addOperateRoutes() {
  server_->route("POST", "/api/v1/drain", [this](const http::Request& r) {
    auto agent = r.query.find("agent");
    double deadline = 0;
    if (auto d = r.query.find("deadline"); d != r.query.end()) {
      char* end = nullptr;
      deadline = std::strtod(d->second.c_str(), &end);
      if (d->second.empty() || *end != '\0' || !std::isfinite(deadline) || deadline < 0 ||
          deadline > std::chrono::duration<double>(options_.maxDrainDeadline).count()) {
        return http::Response::text(400, "deadline must be seconds between 0 and " +
                                             std::to_string(std::chrono::duration<double>(options_.maxDrainDeadline).count()));
      }
    }
    if (agent == r.query.end() || agent->second.empty()) {
      return http::Response::text(400, "agent= is required");
    }
    return operate(r, [&] { return master_.master().drainAgent(agent->second, secondsToDuration(deadline)); });
  });
  server_->route("POST", "/api/v1/undrain", [this](const http::Request& r) {
    auto agent = r.query.find("agent");
    if (agent == r.query.end() || agent->second.empty()) {
      return http::Response::text(400, "agent= is required");
    }
    return operate(r, [&] { return master_.master().undrainAgent(agent->second); });
  });
  server_->route("POST", "/api/v1/kill", [this](const http::Request& r) {
    auto task = r.query.find("task");
    if (task == r.query.end() || task->second.empty()) {
      return http::Response::text(400, "task= is required");
    }
    std::string framework = r.query.count("framework") ? r.query.at("framework") : "";
    return operate(r, [&] { return master_.master().killTask(task->second, framework); });
  });
  for (const char* method : {"POST", "PUT"}) {
    server_->routeAsync(method, "/api/v1/roles",
                        [this](const http::Request& r, http::Reply reply) { setRole(r, std::move(reply)); });
  }
}

// {"roles":[{"name":..,"weight":..,"quota":"RES","allocated":"RES","frameworks":N,
//   "run_time":BOOL},..],"store":"..."}
http::Response MasterHttp::roles() {
  std::string body = "{\"roles\":[";
  bool first = true;
  for (const Master::RoleRow& row : master_.master().roles()) {
    char weight[32];
    snprintf(weight, sizeof weight, "%.6g", row.weight);
    body += std::string(first ? "" : ",") + "{\"name\":" + jsonString(row.name) + ",\"weight\":" + weight +
            ",\"quota\":" + jsonString(row.quota.toString()) + ",\"allocated\":" +
            jsonString(row.allocated.toString()) + ",\"frameworks\":" + std::to_string(row.frameworks) +
            ",\"run_time\":" + (row.runTime ? "true" : "false") + "}";
    first = false;
  }
  return http::Response::json(body + "],\"store\":" +
                              jsonString(master_.roleSettings().storeDescription()) + "}\n");
}

// POST /api/v1/roles?role=R[&weight=W][&quota=RES]: quota= (empty) removes
// the role's quota. Answered once the change is stored (RoleSettingsKeeper):
// 400 for a refused change, 503 when this master cannot store it now.
void MasterHttp::setRole(const http::Request& r, http::Reply reply) {
  auto role = r.query.find("role");
  if (role == r.query.end()) return reply(http::Response::text(400, "role= is required"));
  RoleSetting change;
  if (auto w = r.query.find("weight"); w != r.query.end()) {
    char* end = nullptr;
    change.weight = std::strtod(w->second.c_str(), &end);
    if (w->second.empty() || *end != '\0') return reply(http::Response::text(400, "weight= must be a number"));
  }
  if (auto q = r.query.find("quota"); q != r.query.end()) {
    auto parsed = Resources::parse(q->second);
    if (!parsed) return reply(http::Response::text(400, "quota: " + parsed.error().describe()));
    change.quota = std::move(*parsed);
  }
  if (!change.weight && !change.quota) return reply(http::Response::text(400, "weight= or quota= is required"));
  if (Status st = operatePermission(master_.master(), options_.aclsFromFile, r); !st) {
    LOG_WARNING("http " << r.peer << ": " << r.path << " refused: " << st.error().describe());
    return reply(http::Response::text(403, st.error().describe()));
  }
  master_.roleSettings().set(
      role->second, change,
      [this, reply = std::move(reply)](const std::optional<RoleSettingsKeeper::SetError>& error) {
        if (!error) {
          master_.kick();
          return reply(http::Response::json("{\"ok\":true}\n"));
        }
        bool invalid = error->refusal == RoleSettingsKeeper::Refusal::kInvalid;
        reply(http::Response::text(invalid ? 400 : 503, error->message));
      });
}

Status operatePermission(const Master& master, bool aclsFromFile, const http::Request& request) {
  if (!request.tls) return okStatus();
  if (aclsFromFile) {
    if (master.mayOperate(request.principal)) return okStatus();
    return Error{"principal " + request.principal + " may not operate (no operate rule in --acls)"};
  }
  if (request.certRole == "operator") return okStatus();
  return Error{"principal " + request.principal + " may not operate: without --acls only a "
               "certificate of role operator may (this one's role is '" + request.certRole + "')"};
}

http::Response MasterHttp::operate(const http::Request& r, const std::function<Status()>& action) {
  if (Status st = operatePermission(master_.master(), options_.aclsFromFile, r); !st) {
    LOG_WARNING("http " << r.peer << ": " << r.path << " refused: " << st.error().describe());
    return http::Response::text(403, st.error().describe());
  }
  Status st = action();
  // Whoever acted reads its own write: no /state rendered before now.
  stateCache_->invalidate();
  if (!st) {
    const std::string& why = st.error().message;
    unsigned code = why.rfind("no ", 0) == 0 ? 404 : 400;
    return http::Response::text(code, why);
  }
  // The action may have freed resources (undrain): allocate soon.
  master_.kick();
  return http::Response::json("{\"ok\":true}\n");
}

http::Response MasterHttp::state() {
  std::shared_ptr<StateReader> reader = stateCache_->open();
  if (!reader) {
    http::Response busy = http::Response::text(
        503, "too many GET /state clients at once (limit " + std::to_string(options_.stateClientsMax) +
                 "); retry");
    busy.headers.emplace_back("Retry-After", "1");
    return busy;
  }
  http::Response r;
  r.contentType = "application/json";
  r.pull = [reader](http::PieceSink sink) { reader->pull(std::move(sink)); };
  return r;
}

}  // namespace allot
