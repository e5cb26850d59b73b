#include "agent/http_api.h"

#include <google/protobuf/util/json_util.h>

namespace allot {

Result<std::unique_ptr<AgentHttp>> AgentHttp::create(asio::io_context& io, Agent& agent,
                                                     http::ServerOptions options, FilesApiOptions files) {
  auto server = http::Server::create(io, options);
  if (!server) return server.error();
  std::unique_ptr<AgentHttp> out(new AgentHttp(io, agent, std::move(*server), files));
  out->addRoutes();
  return out;
}

AgentHttp::AgentHttp(asio::io_context& io, Agent& agent, std::unique_ptr<http::Server> server,
                     FilesApiOptions files)
    : agent_(agent), files_(io, agent, files), server_(std::move(server)), startTimeS_(wallClockSeconds()) {}

state::State AgentHttp::snapshot(const Agent& agent, double startTimeS) {
  state::State s;
  state::AgentState* a = s.mutable_agent();
  const AgentConfig& c = agent.config();
  a->set_agent_id(agent.agentId());
  a->set_hostname(c.hostname);
  a->set_master(c.master);
  a->set_registered(agent.registered());
  c.resources.toWire(a->mutable_resources());
  for (const auto& attr : c.attributes) *a->add_attributes() = attr;
  agent.executors().fillState(a);
  a->set_pending_updates(static_cast<uint32_t>(agent.pendingUpdates()));
  a->set_start_time_s(startTimeS);
  return s;
}

void AgentHttp::addRoutes() {
  files_.addRoutes(*server_);
  server_->route("GET", "/health", [this](const http::Request&) {
    auto timer = agent_.loopSections().time(AgentSection::kHttp);
    // Ids are [A-Za-z0-9-] (issued by the master), safe in a JSON string.
    return http::Response::json(std::string("{\"status\":\"ok\",\"role\":\"agent\",\"agentId\":\"") +
                                agent_.agentId() + "\",\"registered\":" +
                                (agent_.registered() ? "true" : "false") + "}\n");
  });
  server_->route("GET", "/state", [this](const http::Request&) {
    auto timer = agent_.loopSections().time(AgentSection::kHttp);
    google::protobuf::util::JsonPrintOptions options;
    options.always_print_primitive_fields = true;
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(snapshot(agent_, startTimeS_), &json, options);
    return http::Response::json(std::move(json));
  });
  server_->route("GET", "/metrics", [this](const http::Request&) {
    auto timer = agent_.loopSections().time(AgentSection::kHttp);
    AgentMetrics& m = agent_.metrics();
    m.executors().Set(static_cast<double>(agent_.executors().executorCount()));
    m.liveTasks().Set(static_cast<double>(agent_.executors().liveTaskCount()));
    m.pendingUpdates().Set(static_cast<double>(agent_.pendingUpdates()));
    m.registered().Set(agent_.registered() ? 1 : 0);
    http::Response r;
    r.contentType = "text/plain; version=0.0.4; charset=utf-8";
    r.body = m.serialize();
    return r;
  });
}

}  // namespace allot
