// MasterHttp: the master's operator endpoints on --http-listen, served by
// http::Server on the master's own loop:
//   GET  /health                  {"status":"ok","role":"master",...}
//   GET  /state                   allot.state.State as JSON (streamed)
//   GET  /metrics                 Prometheus text format
//   GET  /                        the web UI (master/ui/)
//   POST /api/v1/drain?agent=ID[&deadline=S]
//   POST /api/v1/undrain?agent=ID
//   POST /api/v1/kill?task=ID[&framework=ID]
// Operating endpoints (POST) answer 200 with {"ok":true}, 400 on bad
// parameters, 404 when the agent or task is unknown, 403 when `authorize`
// refuses.
//
// Thread: the master's loop. Construct after the MasterServer, stop before
// destroying it.
#pragma once

#include <functional>
#include <memory>

#include "http/server.h"
#include "master/server.h"

namespace allot {

struct MasterHttpOptions {
  http::ServerOptions server;
  // The operate permission (ACLs, issue 10). Until the master knows HTTP
  // principals, the default allows every caller that can reach the port
  // (loopback by default).
  std::function<Status(const http::Request&)> authorize;
  Duration maxDrainDeadline = std::chrono::hours(24 * 7);
};

class MasterHttp {
 public:
  static Result<std::unique_ptr<MasterHttp>> create(asio::io_context& io, MasterServer& master,
                                                    MasterHttpOptions options);
  void start() { server_->start(); }
  void stop() { server_->stop(); }
  uint16_t port() const { return server_->port(); }

 private:
  MasterHttp(MasterServer& master, MasterHttpOptions options, std::unique_ptr<http::Server> server);
  void addRoutes();
  http::Response state();
  http::Response operate(const http::Request& r, const std::function<Status()>& action);

  MasterServer& master_;
  MasterHttpOptions options_;
  std::unique_ptr<http::Server> server_;
  double startTimeS_;
};

}  // namespace allot
