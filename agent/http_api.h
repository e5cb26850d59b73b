// AgentHttp: the agent's operator endpoints on --http-listen (http::Server
// on the agent's own loop):
//   GET /health    {"status":"ok","role":"agent","agentId":...,"registered":...}
//   GET /state     allot.state.State with `agent` set, as JSON
//   GET /metrics   Prometheus text format (agent/metrics.h)
// The agent runs at most ExecutorManagerOptions::executorsMax executors, so
// /state is rendered at once.
//
// Thread: the agent's loop. Stop before destroying the Agent.
#pragma once

#include <memory>

#include "agent/agent.h"
#include "http/server.h"

namespace allot {

class AgentHttp {
 public:
  static Result<std::unique_ptr<AgentHttp>> create(asio::io_context& io, Agent& agent,
                                                   http::ServerOptions options);
  void start() { server_->start(); }
  void stop() { server_->stop(); }
  uint16_t port() const { return server_->port(); }

  // The agent's state as /state shows it.
  static state::State snapshot(const Agent& agent, double startTimeS);

 private:
  AgentHttp(Agent& agent, std::unique_ptr<http::Server> server);
  void addRoutes();

  Agent& agent_;
  std::unique_ptr<http::Server> server_;
  double startTimeS_;
};

}  // namespace allot
