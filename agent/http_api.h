// AgentHttp: the agent's operator endpoints on --http-listen (http::Server
// on the agent's own loop):
//   GET /health    {"status":"ok","role":"agent","agentId":...,"registered":...}
//   GET /state     allot.state.State with `agent` set, as JSON
//   GET /metrics   Prometheus text format (agent/metrics.h)
//   GET /files/... a task's sandbox, for its owner (agent/files_api.h)
// The agent runs at most ExecutorManagerOptions::executorsMax executors, so
// /state is rendered at once.
//
// Thread: the agent's loop. Stop before destroying the Agent.
#pragma once

#include <memory>

#include "agent/agent.h"
#include "agent/files_api.h"
#include "http/server.h"

namespace allot {

class AgentHttp {
 public:
  static Result<std::unique_ptr<AgentHttp>> create(asio::io_context& io, Agent& agent,
                                                   http::ServerOptions options,
                                                   FilesApiOptions files = {});
  void start() { server_->start(); }
  void stop() {
    files_.stop();
    server_->stop();
  }
  size_t followers() const { return files_.followers(); }
  uint16_t port() const { return server_->port(); }

  // The agent's state as /state shows it.
  static state::State snapshot(const Agent& agent, double startTimeS);

 private:
  AgentHttp(asio::io_context& io, Agent& agent, std::unique_ptr<http::Server> server,
            FilesApiOptions files);
  void addRoutes();

  Agent& agent_;
  FilesApi files_;  // before the server: its sessions may hold follows
  std::unique_ptr<http::Server> server_;
  double startTimeS_;
};

}  // namespace allot
